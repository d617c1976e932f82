// Package netperf owns the netperf 2.x control protocol and its data phases:
// TCP_STREAM, TCP_MAERTS, TCP_RR, TCP_CRR, UDP_STREAM and UDP_RR over the
// omni messages (DO_OMNI) and TCP_STREAM, TCP_MAERTS, TCP_RR and TCP_CC over
// the classic ones; a netserver-compatible Server, a netperf-compatible
// client (Run), and stock netperf's printed output (the result tables, the
// omni output selectors -o/-O/-k, the confidence-interval warning).
//
// The package is transport-agnostic: the Server takes a net.Listener for the
// control port and Listen/ListenPacket functions for data sockets, the
// client takes a DialFunc and a ListenPacketFunc, so the same code runs over
// kernel sockets and over mplsnode's userspace stack. It must not import
// gVisor. Socket options are applied through syscall.Conn on kernel sockets
// and through SetReadBuffer/SetWriteBuffer/BufferSizes/SetNoDelay methods on
// others (the userspace stack's); what such a socket cannot do itself
// (TCP_INFO's retransmissions and MSS, SO_DONTROUTE) comes from
// Config.TransportInfo, Server.TransportInfo and Config.OnLink, which a
// node fills from its stack.
//
// The interim results of -D (Config.Interim) take the layout of the
// output mode as stock's demo_interval_display prints them: under -k the
// NETPERF_INTERIM_RESULT[n]=, NETPERF_UNITS[n]=, NETPERF_INTERVAL[n]= and
// NETPERF_ENDING[n]= lines flent parses.
//
// The wire format is netperf 2.7.1's (src/netlib.h and src/nettest_omni.c
// in the public source): fixed 656-byte messages, big-endian 32-bit words,
// floats as their big-endian IEEE-754 bit patterns, strings raw after a
// per-message cutoff. The tests replay captured messages of stock 2.7.1
// (TCP, UDP, connection tests, output selectors) against it.
//
// Where no capture shows a behaviour, the public netperf source is the
// reference: TCP_CRR and TCP_CC connect from consecutive client ports
// (Config.ConnectDial, nettest_omni.c's pick_next_port_number), the server
// closes each of their connections first, right after the response
// (recv_omni's close_data_socket, recv_tcp_conn_rr, recv_tcp_cc), and the
// client closes only once its recv has returned 0 (send_omni_inner's
// disconnect_data_socket, send_tcp_cc), a
// histogram-enabled build (Config.Histogram; the captured one was not)
// adds at -v 2 the histogram of transaction times (Report.WriteHistogram,
// netlib.c's HIST_report), -v 2 below the classic tables adds the migrated tests'
// alignment/offset/calls blocks (Report.WriteVerbose), -v 0 prints each
// test's tput_fmt_0/cpu_fmt_0 (Report.WriteTerse), and the omni output
// names take their headers and defaults from print_omni_init_list and
// netsh.c (stock's "Deprecated" for the system, interface, driver and
// security names, which ours replaces only with what this host can tell).
package netperf
