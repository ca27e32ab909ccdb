#!/bin/sh
# Integration: inca-demo --switch-cpu N runs inca-switch on CPU N alone and the ranks on the
# other CPUs in INC rows, on all of them in ring rows; a CPU the process may not use is refused
# with exit 2. The "# cpus" line is what the kernel applied (read back); each rank reads its own
# set back and fails the job if it differs. Results exact as always.
# usage: demo_switch_cpu.sh <inca-demo> <inca-switch> [addr-index]
# Exit 77 (skip) when this process may use fewer than 2 CPUs.
set -u
demo=$1
switch=$2
idx=${3:-118}
out=$(mktemp "${TMPDIR:-/tmp}/inca-swcpu.XXXXXX")
trap 'rm -f "$out"' EXIT

# Refused: a CPU outside this process's set, and the option where no switch is started.
"$demo" --switch "$switch" --addr-index "$idx" --switch-cpu 1023 -b 4 -e 4 >"$out" 2>&1
rc=$?
if [ $rc -ne 2 ] || ! grep -q "switch-cpu 1023: CPU 1023 is not one this process may use" "$out"; then
	cat "$out"
	echo "FAIL: --switch-cpu 1023 gave exit $rc without the expected message"
	exit 1
fi
"$demo" --switch "$switch" --addr-index "$idx" --switch-cpu 0 --no-inc -b 4 -e 4 >"$out" 2>&1
rc=$?
if [ $rc -ne 2 ] || ! grep -q "not with --fabric or --no-inc" "$out"; then
	cat "$out"
	echo "FAIL: --switch-cpu with --no-inc gave exit $rc without the expected message"
	exit 1
fi

# The last CPU this process may use goes to the switch.
cpus=$(awk '/^Cpus_allowed_list:/ { print $2 }' /proc/self/status)
last=$(echo "$cpus" | tr ',' '\n' | tail -n 1 | sed 's/.*-//')
n=$(echo "$cpus" | tr ',' '\n' | awk -F- '{ n += (NF == 2 ? $2 - $1 + 1 : 1) } END { print n }')
if [ "$n" -lt 2 ]; then
	"$demo" --switch "$switch" --addr-index "$idx" --switch-cpu "$last" -b 4 -e 4 >"$out" 2>&1
	rc=$?
	if [ $rc -ne 2 ] || ! grep -q "none would be left for the ranks" "$out"; then
		cat "$out"
		echo "FAIL: --switch-cpu on a one-CPU process gave exit $rc"
		exit 1
	fi
	echo "SKIP: this process may use one CPU ($cpus): refused as it should be"
	exit 77
fi
"$demo" --switch "$switch" --addr-index "$idx" --switch-cpu "$last" -b 4 -e 256K -f 16 \
	-n 3 -w 1 --budget 0.5 >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || { echo "FAIL: inca-demo --switch-cpu $last exited $rc"; exit 1; }
line=$(grep '^# cpus' "$out")
case "$line" in
"# cpus   : inca-switch on CPU $last alone; ranks on CPU "*" in INC rows, on $cpus in ring rows") ;;
*)
	echo "FAIL: expected the switch on CPU $last alone and the ranks on $cpus in ring rows, got: $line"
	exit 1
	;;
esac
# The ranks' INC set is the process's set without the switch's CPU.
rest=$(echo "$line" | sed 's/.*ranks on CPU \([^ ]*\) in INC rows.*/\1/')
case ",$rest," in
*",$last,"* | *"-$last,"*)
	echo "FAIL: the ranks' INC CPUs ($rest) include the switch's CPU $last"
	exit 1
	;;
esac
grep -q '^# OK:' "$out" || { echo "FAIL: no OK line"; exit 1; }
echo "PASS: switch on CPU $last alone, ranks on $rest in INC rows and on $cpus in ring rows"
