# Thin wrapper around Meson. `make demo` and `make check` are the two commands the README
# promises; everything else is a convenience.
BUILD      ?= build
BUILD_SAN  ?= build-san
MESON      ?= meson
DEMO_ARGS  ?=
FABRIC_RATE ?=
FABRIC_LOSS ?=
FUZZ_SECONDS ?= 600

.PHONY: all deps build demo check check-asan bench fuzz clean fabric-demo fabric-bench fabric-rates sim-report sim-validate

all: build

deps:
	@scripts/deps.sh

$(BUILD)/build.ninja:
	$(MESON) setup $(BUILD)

build: deps $(BUILD)/build.ninja
	$(MESON) compile -C $(BUILD)

demo: build
	$(BUILD)/tools/inca-demo $(DEMO_ARGS)

check: build
	$(MESON) test -C $(BUILD) --print-errorlogs --num-processes 2

$(BUILD_SAN)/build.ninja:
	$(MESON) setup $(BUILD_SAN) -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug

check-asan: deps $(BUILD_SAN)/build.ninja
	$(MESON) compile -C $(BUILD_SAN)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  $(MESON) test -C $(BUILD_SAN) --print-errorlogs --num-processes 2 --timeout-multiplier 4 \
	    --no-suite fuzz  # the fuzz suite already runs sanitized (clang) in `make check`

# Long fuzzing: every harness of the fuzz suite for FUZZ_SECONDS each (default 10 min; `make check`
# gives each 20 s). Crashing inputs are kept in $${TMPDIR:-/tmp}/inca-fuzz-artifacts/<harness>/.
fuzz: build
	FUZZ_SECONDS=$(FUZZ_SECONDS) $(MESON) test -C $(BUILD) --suite fuzz --print-errorlogs \
	  --num-processes 2 --timeout-multiplier 0 --verbose

# A leaf-spine fabric of network namespaces with rate-limited veth links (needs root).
fabric-demo: build
	FABRIC_RATE=$(FABRIC_RATE) FABRIC_LOSS=$(FABRIC_LOSS) tools/fabric_demo.sh $(BUILD)

bench: build
	bench/run_all.sh $(BUILD)

# inca-bench (every collective, INC next to each host algorithm) in the netns fabric (root).
fabric-bench: build
	FABRIC_RATE=$(FABRIC_RATE) FABRIC_LOSS=$(FABRIC_LOSS) tools/fabric_bench.sh $(BUILD)

# The example fabric at several host-link rates (uplinks 4x): INC vs link rate and vs the ring,
# the highest rate where INC keeps >= 0.9 x link and >= 1.6 x ring; PNG in $(BUILD)/fabric-rates/.
FABRIC_RATES ?= 100,250,500,1000
fabric-rates: build
	tools/fabric_rates.sh $(BUILD) $(FABRIC_RATES)

# Every inca-sim scenario of draft-lyu CCM, draft-hcl OSF, failures and INA at scale against its
# baselines: $(BUILD)/sim-report/report.md + PNG plots.
sim-report: build
	tools/sim_report.sh $(BUILD)

# inca-sim against analytic bounds and htsim figures (sim/validate/reference.json): a table of
# scenario, ours, reference, tolerance, PASS/FAIL; exit status 1 if a case fails.
sim-validate: build
	/usr/bin/python3 tools/sim_validate.py --build $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD_SAN)
