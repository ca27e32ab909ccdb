/* tools/launch_int.h: helpers private to the launcher's files (launch.c, launch_plan.c). */
#ifndef INCA_TOOLS_LAUNCH_INT_H
#define INCA_TOOLS_LAUNCH_INT_H

#include <time.h>

static inline void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

#endif
