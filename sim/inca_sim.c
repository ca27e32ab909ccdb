/* sim/inca_sim.c: the inca-sim command: load a scenario file, apply command-line overrides,
 * run with progress on stderr, write the outputs, print a short report (including events/s,
 * which is the only wall-clock figure and is never written into the output files). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "util/cli.h"
#include "sim.h"
#include "util/util.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: inca-sim [options] [scenario.ini] [section.key=value ...]\n"
		"  -s, --set section.key=value  override one parameter (repeatable)\n"
		"  -o, --out DIR                write fct.csv, summary.json, params.ini (and timeseries.csv) here\n"
		"      --seed N                 random seed\n"
		"      --cm FILE                run an htsim connection matrix (workload.type = cmatrix)\n"
		"  -q, --quiet                  no progress and no report on stderr\n"
		"      --dump-config            print the effective parameters and exit\n"
		"      --write-topology FILE    write the topology (as a topology.type = file file) and exit\n"
		"      --params                 list every parameter with its default and meaning\n"
		"  -h, --help\n"
		"  -V, --version\n"
		"exit status: 0 every flow finished, 1 error, 2 bad usage or scenario, 3 some flows\n"
		"did not finish (stop time), 4 stopped by the progress watchdog (diagnosis on stderr)\n");
}

struct prog {
	uint64_t t0_ns, last_events;
	uint64_t last_ns;
};

static void progress(struct sim *s, void *user)
{
	struct prog *p = user;
	struct sim_stats st;
	sim_get_stats(s, &st);
	uint64_t now = util_now_ns();
	double dt = (double)(now - p->last_ns) / 1e9;
	fprintf(stderr, "inca-sim: t=%.1f us  flows %u/%u  events %llu (%.2f M/s)  wall %.1f s\n",
		sim_time_to_us(st.now_ps), st.flows_done, st.flows, (unsigned long long)st.events,
		dt > 0 ? (double)(st.events - p->last_events) / dt / 1e6 : 0,
		(double)(now - p->t0_ns) / 1e9);
	p->last_ns = now;
	p->last_events = st.events;
}

int main(int argc, char **argv)
{
	struct sim_config cfg;
	char err[512];
	const char *out = NULL, *cm = NULL, *seed = NULL, *topo_out = NULL;
	bool quiet = false, dump = false;
	char **sets = calloc((size_t)argc + 1, sizeof(char *));
	int nsets = 0;
	static const struct option opts[] = {
		{ "set", required_argument, NULL, 's' }, { "out", required_argument, NULL, 'o' },
		{ "seed", required_argument, NULL, 1 }, { "cm", required_argument, NULL, 2 },
		{ "quiet", no_argument, NULL, 'q' }, { "dump-config", no_argument, NULL, 3 },
		{ "params", no_argument, NULL, 4 }, { "write-topology", required_argument, NULL, 5 },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' }, { NULL, 0, NULL, 0 },
	};
	int c;
	if (!sets)
		return 1;
	sim_config_defaults(&cfg);
	while ((c = getopt_long(argc, argv, "s:o:qhV", opts, NULL)) != -1) {
		switch (c) {
		case 's': sets[nsets++] = optarg; break;
		case 'o': out = optarg; break;
		case 'q': quiet = true; break;
		case 1: seed = optarg; break;
		case 2: cm = optarg; break;
		case 3: dump = true; break;
		case 4: sim_config_help(stdout); free(sets); return 0;
		case 5: topo_out = optarg; break;
		case 'h': usage(stdout); free(sets); return 0;
		case 'V': util_cli_print_version("inca-sim"); free(sets); return 0;
		default: usage(stderr); free(sets); return 2;
		}
	}
	for (int i = optind; i < argc; i++) {
		if (strchr(argv[i], '=')) {
			sets[nsets++] = argv[i];
		} else if (sim_config_load(&cfg, argv[i], err, sizeof(err)) != 0) {
			fprintf(stderr, "inca-sim: %s\n", err);
			free(sets);
			return 2;
		}
	}
	if (cm) {
		sim_config_set(&cfg, "workload.type", "cmatrix");
		snprintf(cfg.cmatrix, sizeof(cfg.cmatrix), "%s", cm);
	}
	for (int i = 0; i < nsets; i++) {
		int rc = sim_config_set_arg(&cfg, sets[i]);
		if (rc) {
			fprintf(stderr, "inca-sim: %s: %s\n", sets[i],
				rc == -ENOENT ? "unknown parameter (see --params)" : "bad value");
			free(sets);
			return 2;
		}
	}
	free(sets);
	if (seed && sim_config_set(&cfg, "sim.seed", seed)) {
		fprintf(stderr, "inca-sim: bad seed\n");
		return 2;
	}
	if (out)
		snprintf(cfg.out_dir, sizeof(cfg.out_dir), "%s", out);
	/* Files named on the command line: absolute, so params.ini in the output directory reruns
	 * the same matrix and topology. */
	char *files[] = { cfg.cmatrix, cfg.topo_file };
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char cwd[SIM_PATH_MAX], buf[SIM_PATH_MAX];
		if (files[i][0] && files[i][0] != '/' && getcwd(cwd, sizeof(cwd)) &&
		    snprintf(buf, sizeof(buf), "%s/%s", cwd, files[i]) <= SIM_STR_MAX)
			memcpy(files[i], buf, sizeof(buf));
	}
	if (dump) {
		sim_config_dump(&cfg, stdout);
		return 0;
	}
	if (quiet)
		cfg.progress_s = 0;

	uint64_t t0 = util_now_ns();
	struct sim *s;
	if (sim_create(&cfg, &s, err, sizeof(err)) != 0) {
		fprintf(stderr, "inca-sim: %s\n", err);
		return 1;
	}
	if (topo_out) {
		FILE *f = strcmp(topo_out, "-") ? fopen(topo_out, "w") : stdout;
		int wrc = f ? sim_write_topology(s, f) : -errno;
		if (f && f != stdout && fclose(f) && !wrc)
			wrc = -EIO;
		if (wrc)
			fprintf(stderr, "inca-sim: writing %s: %s\n", topo_out, strerror(-wrc));
		sim_destroy(s);
		return wrc ? 1 : 0;
	}
	uint64_t t1 = util_now_ns();
	struct prog pr = { t0, 0, t1 };
	sim_run(s, quiet ? NULL : progress, &pr);
	uint64_t t2 = util_now_ns();
	int rc = 0;
	if (cfg.out_dir[0] && (rc = sim_write_outputs(s, cfg.out_dir)) != 0)
		fprintf(stderr, "inca-sim: writing %s: %s\n", cfg.out_dir, strerror(-rc));
	struct sim_stats st;
	sim_get_stats(s, &st);
	const char *why = sim_run_error(s);
	if (why) /* printed even with -q: the run is not what was asked for */
		fprintf(stderr, "inca-sim: run stopped: %s\n", why);
	if (!quiet) {
		struct rusage ru;
		getrusage(RUSAGE_SELF, &ru);
		double run_s = (double)(t2 - t1) / 1e9;
		fprintf(stderr,
			"inca-sim: %u hosts, %u switches, %u flows (%u completed), sim time %.3f us\n"
			"inca-sim: drops %llu, ECN marks %llu, PFC pauses %llu, retransmissions %llu, timeouts %llu\n"
			"inca-sim: setup %.3f s, run %.3f s, %llu events, %.2f M events/s, peak RSS %.1f MB\n",
			st.hosts, st.switches, st.flows, st.flows_done, sim_time_to_us(st.now_ps),
			(unsigned long long)st.drops_total, (unsigned long long)st.ecn_marks,
			(unsigned long long)st.pfc_pauses, (unsigned long long)st.retx_pkts,
			(unsigned long long)st.timeouts, (double)(t1 - t0) / 1e9, run_s,
			(unsigned long long)st.events, run_s > 0 ? (double)st.events / run_s / 1e6 : 0,
			(double)ru.ru_maxrss / 1024.0);
	}
	int status = rc ? 1 : why ? 4 : (st.flows_done == st.flows ? 0 : 3);
	sim_destroy(s);
	return status;
}
