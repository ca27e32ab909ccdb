/* tests/install/hello_inca.c: a program outside the INCA tree, built against an installed
 * libinca with `pkg-config --cflags --libs inca` only. A communicator of one rank (no
 * bootstrap, no switch) and an AllReduce on it, which must leave the data unchanged. */
#include <inca/inca.h>
#include <stdio.h>

int main(void)
{
	struct inca_comm_opts o;
	struct inca_comm *c;

	inca_comm_opts_init(&o);
	o.size = 1;
	int rc = inca_comm_create(&o, &c);
	if (rc < 0) {
		fprintf(stderr, "inca_comm_create: %s\n", inca_strerror(rc));
		return 1;
	}
	int32_t v[4] = { 1, -2, 3, 40000 };
	rc = inca_allreduce(c, v, v, 4, INCA_INT32, INCA_SUM);
	int ok = rc == 0 && inca_comm_size(c) == 1 && v[0] == 1 && v[1] == -2 && v[2] == 3 &&
		 v[3] == 40000;
	inca_comm_destroy(c);
	if (!ok) {
		fprintf(stderr, "allreduce on one rank: rc %d (%s), data %d %d %d %d\n", rc,
			inca_strerror(rc), v[0], v[1], v[2], v[3]);
		return 1;
	}
	printf("hello_inca: libinca %d.%d, one-rank allreduce ok\n", INCA_VERSION_MAJOR,
	       INCA_VERSION_MINOR);
	return 0;
}
