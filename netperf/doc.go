// Package netperf owns the netperf 2.x control protocol and its data phases
// for TCP_STREAM, TCP_MAERTS and TCP_RR: the 656-byte control messages
// (omni and classic), a netserver-compatible Server and a netperf-compatible
// client (Run), and the stock netperf result tables.
//
// The package is transport-agnostic: the Server takes a net.Listener for the
// control port and a Listen function for data sockets, the client takes a
// DialFunc, so the same code runs over kernel sockets and over mplsnode's
// userspace stack. It must not import gVisor. Kernel-only extras (socket
// buffer sizes, TCP_NODELAY, congestion-control name) are applied only when
// a connection exposes syscall.Conn.
//
// The wire format follows /work/shared/netperf/netperf-protocol.md (netperf
// 2.7.1): fixed 656-byte messages, big-endian 32-bit words, floats as their
// big-endian IEEE-754 bit patterns, strings raw after a per-message cutoff.
package netperf
