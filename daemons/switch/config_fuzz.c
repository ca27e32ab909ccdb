/* libFuzzer harness for the inca-switch config parser: the input is parsed as a config file
 * and, if it holds no NUL, also as a --tree spec; accepted configs are dumped and re-parsed
 * (the dump must always parse back). Build: clang -fsanitize=fuzzer with config.c and
 * lib/util/util.c (tests/fuzz/run_fuzz.sh). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sw_config c;
	char err[SW_CONF_ERR_MAX];

	sw_config_init(&c);
	if (sw_config_parse_text(&c, (const char *)data, size, "fuzz", err, sizeof err) == 0) {
		char *buf = NULL;
		size_t n = 0;
		FILE *f = open_memstream(&buf, &n);

		(void)sw_config_validate(&c, err, sizeof err);
		if (f) {
			struct sw_config c2;

			sw_config_dump(&c, f);
			fclose(f);
			sw_config_init(&c2);
			if (sw_config_parse_text(&c2, buf, n, "dump", err, sizeof err) != 0 ||
			    c2.ntrees != c.ntrees)
				abort(); /* the dump of an accepted config must parse back */
			sw_config_free(&c2);
			free(buf);
		}
	}
	sw_config_free(&c);

	if (size < 4096 && !memchr(data, 0, size)) {
		char spec[4096];

		memcpy(spec, data, size);
		spec[size] = 0;
		sw_config_init(&c);
		(void)sw_config_add_tree_spec(&c, spec, err, sizeof err);
		sw_config_free(&c);
	}
	return 0;
}
