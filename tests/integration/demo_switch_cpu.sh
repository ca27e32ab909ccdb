#!/bin/sh
# Integration: inca-demo --switch-cpu N runs inca-switch on CPU N alone and the ranks on the
# other CPUs in INC rows, on all of them in ring rows; a CPU the process may not use is refused
# with exit 2, and so are bad inca-switch --cpus lists. The "# cpus" line is what the kernel
# applied (read back); each rank reads its own set back and fails the job if it differs, and
# the demo fails unless the switch counts its worker on a CPU of its own. Results exact.
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

"$demo" --switch "$switch" --addr-index "$idx" --switch-cpu 0 --switch-threads 2 -b 4 -e 4 >"$out" 2>&1
rc=$?
if [ $rc -ne 2 ] || ! grep -q "not with --switch-threads" "$out"; then
	cat "$out"
	echo "FAIL: --switch-cpu with --switch-threads 2 gave exit $rc without the expected message"
	exit 1
fi

# inca-switch --cpus itself: malformed lists, a CPU twice, a CPU outside the process's set
# and fewer CPUs than worker threads are refused with exit 2 and the reason.
check_sw() { # expected-message args...
	msg=$1
	shift
	"$switch" "$@" >"$out" 2>&1
	rc=$?
	if [ $rc -ne 2 ] || ! grep -q -- "$msg" "$out"; then
		cat "$out"
		echo "FAIL: inca-switch $* gave exit $rc without \"$msg\""
		exit 1
	fi
}
check_sw "expected CPU numbers and ranges" --cpus 1-0
check_sw "expected CPU numbers and ranges" --cpus 0,x
check_sw "CPU 0 twice" --cpus 0,0
check_sw "CPU 1023 is not one this process may use" --cpus 1023
check_sw "names 1 CPU for 2 worker threads" --cpus 0 --threads 2 \
	--tree "id=1,key=1,slots=16,auth=off,members=1@127.1.$idx.10:4791"

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
	"$demo" --switch "$switch" --addr-index "$idx" --switch-cpu auto -b 4 -e 4 -n 2 -w 1 >"$out" 2>&1
	rc=$?
	if [ $rc -ne 0 ] || ! grep -q "share the CPUs (one CPU)" "$out"; then
		cat "$out"
		echo "FAIL: --switch-cpu auto on a one-CPU process (exit $rc) did not share"
		exit 1
	fi
	echo "SKIP: this process may use one CPU ($cpus): refused as it should be, auto shares"
	exit 77
fi
"$demo" --switch "$switch" --addr-index "$idx" --switch-cpu "$last" -b 4 -e 256K -f 16 \
	-n 3 -w 1 --budget 0.5 >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || { echo "FAIL: inca-demo --switch-cpu $last exited $rc"; exit 1; }
line=$(grep '^# cpus' "$out")
case "$line" in
"# cpus   : inca-switch on CPU $last alone (--cpus: its worker polls); ranks on CPU "*" in INC rows, on $cpus in ring rows") ;;
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
# auto picks the same CPU (the last one); none places nothing.
"$demo" --switch "$switch" --addr-index "$idx" --switch-cpu auto -b 4 -e 4 -n 2 -w 1 >"$out" 2>&1
rc=$?
if [ $rc -ne 0 ] || ! grep -q "^# cpus   : inca-switch on CPU $last alone" "$out"; then
	cat "$out"
	echo "FAIL: --switch-cpu auto (exit $rc) did not give the switch CPU $last"
	exit 1
fi
"$demo" --switch "$switch" --addr-index "$idx" --switch-cpu none -b 4 -e 4 -n 2 -w 1 >"$out" 2>&1
rc=$?
if [ $rc -ne 0 ] || grep -q "^# cpus" "$out"; then
	cat "$out"
	echo "FAIL: --switch-cpu none (exit $rc) placed something"
	exit 1
fi
# The switch's own count (stats JSON own_cpu_workers) is checked by the demo: an ERROR line
# and exit 1 otherwise.
echo "PASS: switch on CPU $last alone, ranks on $rest in INC rows and on $cpus in ring rows"
