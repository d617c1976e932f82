package lsrrate

// The BPF object of the generator and the sink and its Go loader are
// generated from bpf/trafficgen.c by bpf2go and committed, so that building
// needs no C compiler; `make bpf` (the directive below, with Debian's clang
// and libbpf-dev) regenerates them.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -no-strip trafficgen bpf/trafficgen.c
