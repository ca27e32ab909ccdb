/* Unit tests of lib/util/prom (exposition text, escaping, names) and lib/util/httpd (one GET
 * /metrics, a 404, an idle client that does not hold up another) on 127.0.0.1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "util/httpd.h"
#include "util/prom.h"
#include "util/util.h"

static int fails;

#define CHECK(cond)                                                                         \
	do {                                                                                \
		if (!(cond)) {                                                              \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);     \
			fails++;                                                            \
		}                                                                           \
	} while (0)

static void test_prom(void)
{
	struct util_prom p;
	size_t len;
	char *text;

	util_prom_init(&p);
	util_prom_family(&p, "x_total", "help with \\ and\nnewline \"kept\"", UTIL_PROM_COUNTER);
	util_prom_sample(&p, "x_total", (const char *[]){ "a", "q\"b\\c\nd", "e", "", NULL }, 42);
	util_prom_family(&p, "g", "gauge", UTIL_PROM_GAUGE);
	util_prom_sample(&p, "g", NULL, 0);
	util_prom_sample_double(&p, "g", (const char *[]){ "k", "v", NULL }, 0.5);
	text = util_prom_take(&p, &len);
	CHECK(text != NULL && len == strlen(text));
	CHECK(text && strcmp(text,
			     "# HELP x_total help with \\\\ and\\nnewline \"kept\"\n"
			     "# TYPE x_total counter\n"
			     "x_total{a=\"q\\\"b\\\\c\\nd\",e=\"\"} 42\n"
			     "# HELP g gauge\n# TYPE g gauge\ng 0\ng{k=\"v\"} 0.5\n") == 0);
	if (text && fails)
		fprintf(stderr, "got:\n%s", text);
	free(text);
	CHECK(util_prom_name_ok("inca_switch_rx_pkts_total"));
	CHECK(util_prom_name_ok("a:b_c9"));
	CHECK(!util_prom_name_ok("9a"));
	CHECK(!util_prom_name_ok("a-b"));
	CHECK(!util_prom_name_ok(""));
}

static void render(void *arg, struct util_prom *p)
{
	(*(int *)arg)++;
	util_prom_family(p, "t_total", "test", UTIL_PROM_COUNTER);
	util_prom_sample(p, "t_total", NULL, 7);
}

static int connect_to(const struct sockaddr_in *a)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (const struct sockaddr *)a, sizeof *a) < 0) {
		perror("connect");
		exit(1);
	}
	return fd;
}

/* Send req, poll the server until the client has read a whole response (server closes). */
static size_t exchange(struct util_httpd *h, int fd, const char *req, char *out, size_t cap)
{
	size_t n = 0;

	if (send(fd, req, strlen(req), 0) < 0)
		return 0;
	for (int i = 0; i < 200; i++) {
		ssize_t r;
		util_httpd_poll(h, 10);
		r = recv(fd, out + n, cap - 1 - n, MSG_DONTWAIT);
		if (r == 0)
			break;
		if (r > 0)
			n += (size_t)r;
	}
	out[n] = 0;
	return n;
}

static void test_httpd(void)
{
	struct util_httpd_opts o = { .listen = "127.0.0.1:0", .render = render };
	struct util_httpd *h;
	struct util_httpd_stats st;
	char err[128], buf[4096];
	int calls = 0, idle, fd;

	o.arg = &calls;
	CHECK(util_httpd_create(&(struct util_httpd_opts){ .listen = "nonsense" }, &h, err,
				sizeof err) == -EINVAL);
	if (util_httpd_create(&o, &h, err, sizeof err) < 0) {
		fprintf(stderr, "SKIP: %s\n", err);
		exit(77);
	}
	CHECK(ntohs(util_httpd_addr(h)->sin_port) != 0);
	idle = connect_to(util_httpd_addr(h)); /* connects, never sends */
	fd = connect_to(util_httpd_addr(h));
	exchange(h, fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", buf, sizeof buf);
	CHECK(strncmp(buf, "HTTP/1.1 200 OK\r\n", 17) == 0);
	CHECK(strstr(buf, "Content-Type: " UTIL_PROM_CONTENT_TYPE "\r\n") != NULL);
	CHECK(strstr(buf, "\r\n\r\n# HELP t_total test\n# TYPE t_total counter\nt_total 7\n"));
	CHECK(calls == 1);
	close(fd);
	fd = connect_to(util_httpd_addr(h));
	exchange(h, fd, "GET /other HTTP/1.0\r\n\r\n", buf, sizeof buf);
	CHECK(strncmp(buf, "HTTP/1.1 404 ", 13) == 0);
	CHECK(calls == 1);
	close(fd);
	util_httpd_get_stats(h, &st);
	CHECK(st.accepted == 3 && st.served == 1 && st.rejected == 1 && st.timeouts == 0);
	close(idle);
	util_httpd_destroy(h);
}

int main(void)
{
	test_prom();
	test_httpd();
	if (fails)
		return 1;
	printf("prom/httpd: ok\n");
	return 0;
}
