/* lib/util/version: the one version string of every program, meson's project version through
 * the generated util/version.h. */
#include <stdio.h>

#include "util/cli.h"
#include "util/version.h"

const char *util_cli_version(void)
{
	return INCA_VERSION;
}

void util_cli_print_version(const char *prog)
{
	printf("%s (INCA) %s\n", prog, INCA_VERSION);
}
