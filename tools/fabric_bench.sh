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
[ $# -gt 0 ] && shift
standalone=
if [ "${1:-}" = "--standalone" ]; then
	standalone=--standalone
	shift
fi
[ "${1:-}" = "--" ] && shift
bench=$(cd "$build" 2>/dev/null && pwd)/tools/inca-bench
if [ ! -x "$bench" ]; then
	echo "fabric-bench: $bench not built (meson compile -C $build tools/inca-bench)" >&2
	exit 2
fi
[ $# -eq 0 ] && set -- -b 4 -e 1M -f 16 -w 1 -i 5 --budget 1
FABRIC_ARGS="--demo $bench ${FABRIC_ARGS:-}"
export FABRIC_ARGS
exec "$here/fabric_demo.sh" "$build" $standalone -- "$@"
