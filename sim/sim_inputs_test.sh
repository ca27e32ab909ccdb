#!/bin/sh
# sim/sim_inputs_test.sh: inca-sim refuses inputs that would hang it or run something other than
# what was asked, with a message naming the parameter and the reason, and a non-zero exit.
# Each case: expected exit status, a fragment the message must contain, then the arguments.
# Usage: sim_inputs_test.sh path/to/inca-sim
set -u
SIM=${1:?usage: $0 inca-sim}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0

# expect STATUS FRAGMENT ARGS...: run with a time limit (a hang is a failure too)
expect() {
	want=$1 frag=$2
	shift 2
	timeout 60 "$SIM" -q "$@" >"$T/out" 2>"$T/err"
	got=$?
	if [ "$got" != "$want" ] || { [ -n "$frag" ] && ! grep -qF -- "$frag" "$T/err"; }; then
		echo "FAIL: inca-sim $* -> exit $got (want $want), stderr:"
		sed 's/^/    /' "$T/err"
		echo "    (expected to contain: $frag)"
		fails=$((fails + 1))
	else
		echo "ok: $* -> $want: $(head -c 160 "$T/err")"
	fi
}

cm() { # cm NAME TEXT: write a connection matrix
	printf '%b' "$2" >"$T/$1"
}

# Buffers below one packet (4096 + 64 bytes): every packet dropped, retransmitted forever.
expect 1 "switch.buffer_bytes = 0 is below one data packet" switch.buffer_bytes=0
expect 1 "switch.buffer_bytes = 4000 is below one data packet (host.mtu_bytes + host.header_bytes = 4160" switch.buffer_bytes=4000
expect 1 "switch.shared_buffer_bytes = 1000 is below one data packet" switch.shared_buffer_bytes=1000
expect 1 "switch.pfc_xoff_bytes + switch.pfc_headroom_bytes = 3000 is below one data packet" \
	switch.pfc=true switch.pfc_xoff_bytes=1000 switch.pfc_xon_bytes=0 switch.pfc_headroom_bytes=2000
# ... but with PFC the egress limit does not apply (lossless admission), so this one runs.
expect 0 "" switch.pfc=true switch.buffer_bytes=0 workload.size_bytes=20000

# Connection matrices: Nodes bounded by and matched against the topology.
cm huge.cm 'Nodes 4294967295\nConnections 1\n0->1 id 1 start 0 size 1000\n'
expect 1 "Nodes 4294967295 is more than the largest fat tree" --cm "$T/huge.cm"
cm big.cm 'Nodes 100000\nConnections 1\n0->1 id 1 start 0 size 1000\n'
expect 1 "Nodes 100000 is not the host count of a full fat tree (k^3/4; topology.k = 0 sizes the tree from Nodes): the nearest are 93312 (k=72) and 101306 (k=74)" --cm "$T/big.cm"
cm n20.cm 'Nodes 20\nConnections 1\n0->1 id 1 start 0 size 1000\n'
expect 1 "the nearest are 16 (k=4) and 54 (k=6)" --cm "$T/n20.cm"
expect 1 "Nodes 20 does not match the topology (16 hosts)" --cm "$T/n20.cm" topology.k=4
cm n16.cm 'Nodes 16\nConnections 1\n0->1 id 1 start 0 size 1000\n'
expect 1 "Nodes 16 does not match the topology (12 hosts)" --cm "$T/n16.cm" \
	topology.type=leafspine topology.tors=4 topology.spines=2 topology.hosts_per_tor=3
expect 0 "" --cm "$T/n16.cm"
cm n24.cm 'Nodes 24\nConnections 1\n0->1 id 1 start 0 size 1000\n'
expect 0 "" --cm "$T/n24.cm" topology.hosts_per_tor=3      # k=4 with 3 hosts per ToR: 24
cm empty.cm ''
expect 1 "empty.cm: no connections" --cm "$T/empty.cm"
cm zero.cm 'Nodes 16\nConnections 0\n'
expect 1 "zero.cm: no connections" --cm "$T/zero.cm"

# Generated workloads.
expect 1 "workload.size_bytes = 0: flows must have 1 byte to 1 TB" workload.size_bytes=0
expect 1 "workload.hosts = 1: permutation needs at least 2 hosts" workload.hosts=1
expect 1 "workload.hosts = 1: alltoall needs at least 2 hosts" workload.type=alltoall workload.hosts=1
expect 1 "workload.hosts = 99 exceeds the 16 hosts of the topology" workload.hosts=99

# Topology and switch parameters.
expect 1 "topology.k = 7: a fat tree needs an even k between 2 and 256" topology.k=7
expect 1 "topology.k = 258: a fat tree needs an even k" topology.k=258
expect 1 "topology.tors and topology.spines must be at least 1" topology.type=leafspine topology.tors=0
expect 1 "switch.ecn_kmin_bytes = 2000000 must be <= switch.ecn_kmax_bytes = 1000" \
	switch.ecn_kmin_bytes=2000000 switch.ecn_kmax_bytes=1000
expect 0 "" switch.ecn=false switch.ecn_kmin_bytes=2000000 switch.ecn_kmax_bytes=1000 workload.size_bytes=20000

# Congestion controls: what they need from the rest of the configuration, and their ranges.
expect 1 "host.cc = dctcp needs switch.ecn = true" host.cc=dctcp switch.ecn=false
expect 1 "dctcp.k_bytes = 2000000 must be below switch.buffer_bytes = 1048576" host.cc=dctcp dctcp.k_bytes=2000000
expect 0 "" host.cc=dctcp dctcp.k_bytes=2000000 switch.pfc=true workload.size_bytes=20000
expect 1 "host.cc = dctcp needs ACKs" host.cc=dctcp host.transport=ideal
expect 1 "dctcp.init_cwnd_bytes must be between 1 and 2^40" host.cc=dctcp dctcp.init_cwnd_bytes=0
expect 1 "dctcp.g must be in (0, 1]" host.cc=dctcp dctcp.g=0
expect 1 "host.cc = hpcc needs ACKs (they carry the INT records back)" host.cc=hpcc host.transport=ideal
expect 1 "hpcc.eta must be in (0, 1]" host.cc=hpcc hpcc.eta=1.5
expect 1 "hpcc.min_rate_mbps must be between 0.001 and 1e9" host.cc=hpcc hpcc.min_rate_mbps=0
expect 1 "host.cc = hpcc cannot be combined with osf.mode" host.cc=hpcc osf.mode=credit
expect 2 "host.cc=cubic: bad value" host.cc=cubic

# Traffic classes (sim_tc.c).
expect 1 "switch.traffic_classes = 0: must be 1 to 8" switch.traffic_classes=0
expect 1 "switch.traffic_classes = 9: must be 1 to 8" switch.traffic_classes=9
expect 1 "switch.dwrr_weights = '3,0': weight 0 of class 1 must be 1 to 1000" \
	switch.traffic_classes=2 switch.scheduler=dwrr switch.dwrr_weights=3,0
expect 0 "" switch.scheduler=dwrr workload.size_bytes=20000     # one class: class keys unused
cm prio.cm 'Nodes 16\nConnections 2\n0->1 id 1 start 0 size 1000 prio 1\n2->1 id 2 start 0 size 1000 prio 2\n'
expect 1 "prio.cm:4: prio 2 is not a traffic class: switch.traffic_classes = 2 (classes 0 to 1)" \
	--cm "$T/prio.cm" switch.traffic_classes=2
expect 0 "" --cm "$T/prio.cm" switch.traffic_classes=3
expect 0 "" --cm "$T/prio.cm"          # one class: prio is read and ignored
# Topology files (topology.type = file): file:line and the reason; relative to the scenario.
printf 'switch s0\nhost a\nlink a s0\nlink a s0\n' >"$T/twice.txt"
expect 1 "twice.txt:4: host 'a' already has a link (line 3): hosts are single-homed" \
	topology.type=file topology.file="$T/twice.txt"
printf 'switch s0\nswitch s1\nhost a\nhost b\nlink a s0\nlink b s0\n' >"$T/apart.txt"
expect 1 "apart.txt:2: switch 's1' is not connected to the rest of the fabric" \
	topology.type=file topology.file="$T/apart.txt"
expect 1 "topology.type = file needs topology.file" topology.type=file
printf '[topology]\ntype = file\nfile = twice.txt\n' >"$T/scen.ini"
expect 1 "$T/twice.txt:4:" "$T/scen.ini"
printf 'switch s0\nhost a\nhost b\nlink b s0\nlink a s0 gbps=25\n' >"$T/star.txt"
here=$(pwd)
SIM=$(cd "$(dirname "$SIM")" && pwd)/$(basename "$SIM")
cd "$T" && expect 0 "" topology.type=file topology.file=star.txt workload.size_bytes=20000 -o "$T/star"
cd "$here"
grep -qF "file = $T/star.txt" "$T/star/params.ini" || { echo "FAIL: params.ini does not name $T/star.txt"; fails=$((fails + 1)); }

# Traces: ports named as in the outputs, files need an output directory.
expect 1 "trace.links: 'nosuch' names no port" trace.links=nosuch -o "$T/tr"
expect 1 "trace: traces are files: set output.dir (or -o DIR)" trace.links=all
expect 1 "trace.pcap_link = tor0 names 4 ports" trace.pcap_link=tor0 -o "$T/tr"

# Scenario files.
printf '[topology\ntype = fattree\n[switch]\nrouting = ecmp\n' >"$T/unclosed.ini"
expect 2 "unclosed.ini:1: syntax error: section header without its closing ']': [topology" "$T/unclosed.ini"
printf '[topology]\nk = 4\njust words\n' >"$T/words.ini"
expect 2 "words.ini:3: syntax error: expected 'key = value'" "$T/words.ini"
printf '[topology]\nkay = 4\n' >"$T/key.ini"
expect 2 "unknown parameter [topology] kay = 4" "$T/key.ini"

if [ "$fails" -ne 0 ]; then
	echo "$fails case(s) failed"
	exit 1
fi
echo "sim_inputs_test: ok"
