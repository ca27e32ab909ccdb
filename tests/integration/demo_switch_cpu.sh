#!/bin/sh
# Integration: inca-demo --switch-cpu N runs inca-switch on CPU N alone and the ranks on the
# other CPUs in INC rows, on all of them in ring rows; a CPU the process may not use is refused
# with exit 2, and so are bad inca-switch --cpus lists. The "# cpus" line is what the kernel
# applied (read back); each rank reads its own set back and fails the job if it differs, and
# the demo fails unless the switch counts its worker on a CPU of its own. Results exact.
# bench-allreduce (optional 4th argument) does the same by default, inca-demo only when asked.
# usage: demo_switch_cpu.sh <inca-demo> <inca-switch> [addr-index] [bench-allreduce]
# Exit 77 (skip) when this process may use fewer than 2 CPUs.
set -u
demo=$1
switch=$2
idx=${3:-118}
bench=${4:-}
out=$(mktemp "${TMPDIR:-/tmp}/inca-swcpu.XXXXXX")
trap 'rm -f "$out"' EXIT

. "$(dirname "$0")/expect.sh"
demo() { "$demo" --switch "$switch" --addr-index "$idx" "$@"; }

# Refused: a CPU outside this process's set, and the option where no switch is started.
expect 2 "switch-cpu 1023: CPU 1023 is not one this process may use" \
	"--switch-cpu 1023 without the expected message" demo --switch-cpu 1023 -b 4 -e 4
expect 2 "not with --fabric or --no-inc" "--switch-cpu with --no-inc without the expected message" \
	demo --switch-cpu 0 --no-inc -b 4 -e 4
expect 2 "not with --switch-threads" \
	"--switch-cpu with --switch-threads 2 without the expected message" \
	demo --switch-cpu 0 --switch-threads 2 -b 4 -e 4

# inca-switch --cpus itself: malformed lists, a CPU twice, a CPU outside the process's set
# and fewer CPUs than worker threads are refused with exit 2 and the reason.
check_sw() { # expected-message args...
	msg=$1
	shift
	expect 2 "$msg" "inca-switch $* without \"$msg\"" "$switch" "$@"
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
	expect 2 "none would be left for the ranks" "--switch-cpu on a one-CPU process" \
		demo --switch-cpu "$last" -b 4 -e 4
	expect 0 "share the CPUs (one CPU)" "--switch-cpu auto on a one-CPU process did not share" \
		demo --switch-cpu auto -b 4 -e 4 -n 2 -w 1
	echo "SKIP: this process may use one CPU ($cpus): refused as it should be, auto shares"
	exit 77
fi
demo --switch-cpu "$last" -b 4 -e 256K -f 16 -n 3 -w 1 --budget 0.5 >"$out" 2>&1
rc=$?
cat "$out"
[ $rc -eq 0 ] || { echo "FAIL: inca-demo --switch-cpu $last exited $rc"; exit 1; }
line=$(grep '^# cpus' "$out")
case "$line" in
"# cpus   : inca-switch on CPU $last alone (--cpus: its worker polls); ranks on CPU "*" in INC rows of 64 KiB or more, on $cpus in the others") ;;
*)
	echo "FAIL: expected the switch on CPU $last alone and the ranks on $cpus in the other rows, got: $line"
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
expect 0 "^# cpus   : inca-switch on CPU $last alone" \
	"--switch-cpu auto did not give the switch CPU $last" demo --switch-cpu auto -b 4 -e 4 -n 2 -w 1
expect 0 "!^# cpus" "--switch-cpu none placed something" demo --switch-cpu none -b 4 -e 4 -n 2 -w 1
# bench-allreduce gives the switch its CPU by default (inca-demo shares by default).
if [ -n "$bench" ]; then
	expect 0 "^# cpus   : inca-switch on CPU $last alone" \
		"bench-allreduce did not give the switch CPU $last by default" \
		"$bench" --switch "$switch" --addr-index "$idx" -t fp32:sum@4-4 -n 2 -w 1
	expect 0 "!^# cpus" "inca-demo placed the switch by default" demo -b 4 -e 4 -n 2 -w 1
fi
# The switch's own count (stats JSON own_cpu_workers) is checked by the demo: an ERROR line
# and exit 1 otherwise.
echo "PASS: switch on CPU $last alone, ranks on $rest in INC rows of 64 KiB or more and on $cpus in the others; bench-allreduce places it by default"
