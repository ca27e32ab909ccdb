#!/bin/sh
# tools/fabric_bench.sh: inca-bench in the netns fabric. Builds the same fabric as
# tools/fabric_demo.sh (tools/fabric-example.ini: 2 leaves x 4 hosts + spine, rate-limited veth
# links, inca-switch in the leaf/spine namespaces, inca-am; tests/netns/fabric.py) but runs
# inca-bench instead of inca-fabric-demo: every collective, INC next to each host algorithm and
# auto, the 8 ranks in the host namespaces, and Open MPI's own collectives over TCP across the
# same links (tools/ompi-fabric-run, MPI rank r where INCA rank r is). Needs root (exit 77
# otherwise).
#   usage: tools/fabric_bench.sh [BUILD_DIR] [--standalone] [-- inca-bench options]
#          default options: -b 4 -e 1M -f 16 -w 1 -i 5 --budget 1
#   env:   as tools/fabric_demo.sh (FABRIC_SPEC, FABRIC_RATE, FABRIC_LOSS, FABRIC_ARGS)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
bench=$(cd "$build" 2>/dev/null && pwd)/tools/inca-bench
if [ ! -x "$bench" ]; then
	echo "fabric-bench: $bench not built (meson compile -C $build tools/inca-bench)" >&2
	exit 2
fi
# fabric_demo.sh reads the same arguments; these run when no inca-bench options follow "--".
FABRIC_ARGS="--demo $bench ${FABRIC_ARGS:-}"
FABRIC_DEMO_DEFAULTS="-b 4 -e 1M -f 16 -w 1 -i 5 --budget 1"
export FABRIC_ARGS FABRIC_DEMO_DEFAULTS
exec "$here/fabric_demo.sh" "$@"
