/* wire_dtype_dump: prints the tables of lib/wire/dtype.h as JSON on stdout, for
 * tools/gen_facts.py, which writes and checks the Python, Lua, YANG, inca.h and docs mirrors.
 * Build helper only: nothing here is linked into a library. */
#include <stdio.h>

#include "wire/dtype.h"

#define DT_JSON(NAME, name, code, size, kind)                                                   \
	printf("%s\n    {\"id\": \"%s\", \"name\": \"%s\", \"code\": %d, \"size\": %d, "          \
	       "\"kind\": \"%s\"}",                                                             \
	       (code) ? "," : "", #NAME, #name, code, size, #kind);
#define OP_JSON(NAME, name, code, applies)                                                      \
	printf("%s\n    {\"id\": \"%s\", \"name\": \"%s\", \"code\": %d, \"applies\": \"%s\"}", \
	       (code) ? "," : "", #NAME, #name, code, #applies);

int main(void)
{
	printf("{\n  \"dtypes\": [");
	WIRE_DTYPES(DT_JSON)
	printf("\n  ],\n  \"ops\": [");
	WIRE_OPS(OP_JSON)
	printf("\n  ],\n  \"qpn\": {\"switch_base\": %u, \"member_base\": %u, \"max\": %u}\n}\n",
	       wire_qpn_default(WIRE_QPN_SWITCH, 0), wire_qpn_default(WIRE_QPN_MEMBER, 0),
	       WIRE_QPN_MAX);
	return 0;
}
