#!/usr/bin/env bash
# demo.sh: the seed topology (shared/seeds/000_*.txt, netdev 2016) with
# mplsnode carrying TCP over MPLS.
#
#   ns0: mplsnode host (netperf client on the userspace stack), pushes label
#        100 towards 10.10.10.10
#   ns1: mplsnode LSR, pops 100 and forwards to ns2; forwards the plain
#        return path
#   ns2: the Linux kernel, with 10.10.10.10 on lo, running our netserver on
#        kernel sockets
#
# It runs a TCP_STREAM without labels (to 172.16.21.22) and with label 100
# (to 10.10.10.10), a UDP_RR over the LSP, prints the netperf result lines
# and the TCP_STREAM ratio, then
# where the frames went (the LSR's counters). Namespaces are named uniquely
# and removed on every exit, Ctrl-C included.
set -euo pipefail

SECONDS_PER_TEST=${DEMO_SECONDS:-10}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/bin/mplsnode

if [[ $(id -u) -ne 0 ]]; then
	echo "make demo needs root: it creates network namespaces and veth pairs and opens" >&2
	echo "AF_PACKET sockets (CAP_NET_ADMIN, CAP_NET_RAW). Run: sudo make demo" >&2
	exit 2
fi

step() { printf '\033[1m==> %s\033[0m\n' "$*"; }

id=$$
NS0=mpdemo${id}-0 NS1=mpdemo${id}-1 NS2=mpdemo${id}-2
TMP=$(mktemp -d /tmp/mplsnode-demo.XXXXXX)
pids=()

cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for ns in "$NS0" "$NS1" "$NS2"; do ip netns del "$ns" 2>/dev/null || true; done
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'echo; echo "interrupted: cleaning up" >&2; exit 130' INT TERM HUP
# A closed stdout (make demo | head) must still clean up.
trap 'exit 141' PIPE

nsx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

step "building the seed topology: $NS0 -- $NS1 -- $NS2"
for ns in "$NS0" "$NS1" "$NS2"; do
	ip netns add "$ns"
	nsx "$ns" ip link set lo up
	# The topology is IPv4: without this the kernels' IPv6 router
	# solicitations and MLD reports reach mplsnode and count as IP drops
	# (invalid_destination), which would hide a real loss in the noise.
	nsx "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
# The veths are created inside the namespaces, so their seed names never
# clash with another run's.
ip link add virt01 netns "$NS0" type veth peer name virt10 netns "$NS1"
ip link add virt12 netns "$NS1" type veth peer name virt21 netns "$NS2"
nsx "$NS0" ip link set virt01 up
nsx "$NS1" ip link set virt10 up
nsx "$NS1" ip link set virt12 up
nsx "$NS2" ip link set virt21 up
# ns2 is the kernel's: the TCP peer, exactly as in the seed script. ns0 and
# ns1 give their addresses to mplsnode (the kernel there holds none).
nsx "$NS2" ip addr add 172.16.21.22/24 dev virt21
nsx "$NS2" ip addr add 10.10.10.10/32 dev lo
nsx "$NS2" ip route add 172.16.20.0/24 via 172.16.21.21

step "starting mplsnode LSR in $NS1 and netserver (kernel sockets) in $NS2"
# ip itself goes to the background (not the nsx function, whose subshell
# would be the pid killed, leaving mplsnode running in a deleted namespace).
ip netns exec "$NS1" "$BIN" run -c "$ROOT/examples/seed/ns1.conf" --control-socket "$TMP/ns1.sock" \
	--log-level warn >"$TMP/ns1.log" 2>&1 &
pids+=($!)
ip netns exec "$NS2" "$BIN" netserver --kernel -p 12865 >"$TMP/ns2.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do
	[[ -S $TMP/ns1.sock ]] && nsx "$NS2" ss -ltn 2>/dev/null | grep -q ':12865' && break
	sleep 0.1
done
if ! [[ -S $TMP/ns1.sock ]]; then
	echo "the LSR did not start:" >&2
	cat "$TMP/ns1.log" >&2
	exit 1
fi

run_netperf() { # label host
	local label=$1 host=$2
	step "TCP_STREAM $label: ns0 -> $host for ${SECONDS_PER_TEST}s"
	nsx "$NS0" "$BIN" netperf --config "$ROOT/examples/seed/ns0.conf" -H "$host" \
		-l "$SECONDS_PER_TEST" -t TCP_STREAM -c -C | tee "$TMP/$label.out"
}
failed=0
run_netperf plain 172.16.21.22 || failed=1
run_netperf mpls 10.10.10.10 || failed=1
step "UDP_RR with label 100: ns0 -> 10.10.10.10 for ${SECONDS_PER_TEST}s (request/response datagrams over the LSP)"
nsx "$NS0" "$BIN" netperf --config "$ROOT/examples/seed/ns0.conf" -H 10.10.10.10 \
	-l "$SECONDS_PER_TEST" -t UDP_RR || failed=1

# The throughput is the fifth column of the result line (the last line
# whose first field is a number).
tput() { awk '$1 ~ /^[0-9]+$/ && NF >= 5 { v = $5 } END { print v }' "$1"; }
plain=$(tput "$TMP/plain.out")
mpls=$(tput "$TMP/mpls.out")

step "result"
printf '  without labels (172.16.21.22): %10s Mbit/s\n' "$plain"
printf '  with label 100 (10.10.10.10):  %10s Mbit/s\n' "$mpls"
awk -v a="$mpls" -v b="$plain" 'BEGIN { if (b > 0) printf "  ratio MPLS / plain:            %10.2f   (Linux 2016: 0.0001 without mpls_gso, 0.36 with the fix)\n", a / b }'

step "where the frames went: the LSR in $NS1"
"$BIN" stats --socket "$TMP/ns1.sock"
step "drops at the LSR (every counter above must be zero)"
if ! "$BIN" stats --socket "$TMP/ns1.sock" --drops; then
	echo "the LSR dropped frames: see the counters above and docs/METRICS.md" >&2
	failed=1
fi
exit $failed
