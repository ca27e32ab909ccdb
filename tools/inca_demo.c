/* inca-demo: what `make demo` runs. Starts an inca-switch and 4 rank processes on loopback,
 * runs AllReduce 4 B .. 64 MiB for INC and the host ring side by side, verifies every result,
 * prints an nccl-tests-style table and the switch's counters. Options: inca-demo --help.
 * Its defaults are demo_inca_defaults (demo_cli.c). */
#include "demo_cli.h"

int main(int argc, char **argv)
{
	return demo_main(argc, argv, &demo_inca_defaults);
}
