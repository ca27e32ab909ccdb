/* lib/agg/reduce_int.h: internal hooks of reduce.c for its tests and benchmarks; deliberately
 * not in agg.h, no program or library may call them. */
#ifndef INCA_AGG_REDUCE_INT_H
#define INCA_AGG_REDUCE_INT_H

/* Force a kernel set. isa: -1 = pick by CPUID (the default), 0 = baseline, 1 = AVX2+F16C,
 * 2 = AVX-512. Returns the set now active, or -ENOTSUP if this CPU cannot run the requested
 * one. Not thread-safe: call it while no reduction runs. */
int agg__reduce_set_isa(int isa);

#endif
