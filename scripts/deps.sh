#!/usr/bin/env bash
# deps.sh installs what mplsnode's build, tests and demo need and a clean
# Debian machine lacks. It is idempotent: each package is installed only when
# the command or module it provides is missing. Go modules come from the Go
# module proxy through `go mod download`.
#
# Usage: scripts/deps.sh [bpf]
# With bpf it also installs what `make bpf` needs to regenerate the committed
# BPF objects (clang, llvm, libbpf-dev, bpftool).
set -euo pipefail

need=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }

# iproute2 (ip, tc), ethtool and tshark are the network tests' tools and
# oracles; python3-scapy crafts hostile frames from outside our code.
have_cmd ip || need+=(iproute2)
have_cmd ethtool || need+=(ethtool)
have_cmd tshark || need+=(tshark)
/usr/bin/python3 -c 'import scapy' >/dev/null 2>&1 || need+=(python3-scapy)
# setpriv runs the non-root node test (TestSeedNonRoot); systemd-analyze
# verifies dist/systemd's unit; zsh loads the zsh completion script.
have_cmd setpriv || need+=(util-linux)
have_cmd systemd-analyze || need+=(systemd)
have_cmd zsh || need+=(zsh)
# gobgpd (with its gobgp CLI) is the BGP peer the bgp tests speak to.
have_cmd gobgpd || need+=(gobgpd)
# FRR's bgpd is the second, independent BGP peer (TestBGPFRR).
[[ -x /usr/lib/frr/bgpd ]] || need+=(frr)
# flent (with ping for its ICMP series) drives `mplsnode netperf` as its
# netperf binary against `mplsnode netserver` (TestFlent).
have_cmd flent || need+=(flent)
have_cmd ping || need+=(iputils-ping)
have_cmd traceroute || need+=(traceroute)
if [[ ${1:-} == bpf ]]; then
	have_cmd clang || need+=(clang)
	have_cmd llvm-strip || need+=(llvm)
	[[ -f /usr/include/bpf/bpf_helpers.h ]] || need+=(libbpf-dev)
	have_cmd bpftool || need+=(bpftool)
fi

if ((${#need[@]})); then
	if [[ $(id -u) -ne 0 ]]; then
		echo "deps: missing Debian packages: ${need[*]} (run as root to install them)" >&2
	else
		echo "deps: installing ${need[*]}" >&2
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
	fi
fi

go mod download
