#!/bin/sh
# tools/fabric_demo.sh: what `make fabric-demo` runs. Builds the example fabric of
# tools/fabric-example.ini (2 leaves x 4 hosts + 1 spine in network namespaces, rate-limited
# veth links), starts inca-switch (NETCONF, no tree) in the leaf and spine namespaces and inca-am
# in the spine namespace, runs inca-fabric-demo (8 ranks join through the AM, which builds the
# 2-level tree; AllReduce 4 B .. 64 MiB, INC next to the host ring, every result verified; the
# AM's `inca status` view while the job holds its group) and tears everything down. Needs root.
#   usage: tools/fabric_demo.sh [BUILD_DIR] [--standalone] [-- extra inca-fabric-demo options]
#          --standalone: no AM, switches with generated trees (the earlier mode)
#   env:   FABRIC_SPEC (default tools/fabric-example.ini), FABRIC_RATE (e.g. 1gbit),
#          FABRIC_LOSS (e.g. leaf1:20), FABRIC_ARGS (extra fabric.py options),
#          FABRIC_DEMO_DEFAULTS (the demo's options when none are given)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(dirname "$here")
build=${1:-build}
[ $# -gt 0 ] && shift
standalone=
if [ "${1:-}" = "--standalone" ]; then
	standalone=--standalone
	shift
fi
[ "${1:-}" = "--" ] && shift
# A wrapper (tools/fabric_bench.sh) may name the options used when none are given.
[ $# -eq 0 ] && [ -n "${FABRIC_DEMO_DEFAULTS:-}" ] && set -- $FABRIC_DEMO_DEFAULTS

if [ "$(id -u)" != 0 ]; then
	echo "fabric-demo: needs root (it creates network namespaces, veth links, tc qdiscs)." >&2
	echo "             run: sudo make fabric-demo" >&2
	exit 77
fi
for tool in ip tc /usr/bin/python3; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "fabric-demo: '$tool' is missing (Debian: iproute2, python3)" >&2
		exit 2
	fi
done
if ! ip netns add incaf-probe-$$ 2>/dev/null; then
	echo "fabric-demo: cannot create network namespaces here" >&2
	exit 77
fi
ip netns del incaf-probe-$$

spec=${FABRIC_SPEC:-$src/tools/fabric-example.ini}
set -- --build "$build" $standalone ${FABRIC_ARGS:-} -- "$@"
[ -n "${FABRIC_LOSS:-}" ] && set -- --set "loss=$FABRIC_LOSS" "$@"
[ -n "${FABRIC_RATE:-}" ] && set -- --set "rate=$FABRIC_RATE" "$@"
# fabric.py tears the fabric down on exit, SIGINT and SIGTERM (and removes stale namespaces of
# killed runs before it builds); the trap covers a kill of this shell between the two.
trap 'rc=$?; /usr/bin/python3 "$src/tests/netns/fabric.py" clean >/dev/null 2>&1 || true; exit $rc' EXIT
exec_rc=0
/usr/bin/python3 "$src/tests/netns/fabric.py" run "$spec" "$@" || exec_rc=$?
exit $exec_rc
