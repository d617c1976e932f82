// Package bench owns the seed-topology bench (`make bench`): the three
// namespaces of the 2016 netdev thread (ns0 pushes label 100, ns1 pops, ns2
// serves),
// built once per topology kind with unique names and removed on every exit
// path, and every configuration of the issue measured side by side in one
// run with the project's own netperf: kernel to kernel, stock gVisor,
// mplsnode without and with labels, 3 labels and IPv6, TAP in a bridge, the
// GSO modes, TCP_MAERTS and TCP_RR, and (through bench/lsrrate) the LSR
// forwarding rate.
//
// Configurations are interleaved (A B C ... A B C ...) over rounds; each run
// starts its own processes (LSR, netserver, client) so that their CPU
// seconds (user/sys, from the rusage of the child) and the peak RSS of every
// mplsnode process belong to that run alone. Results are summarised as
// medians with min-max, written as a Markdown table (results.md), a JSON
// file with every raw run (results.json) and a bar chart (results.png,
// results.svg), and checked against the target ratios (bench/README.md).
//
// Only the bench imports this package (bench/cmd/seedbench); nothing in the
// library depends on it. It needs root: it creates network namespaces and
// veths and opens AF_PACKET sockets.
package bench
