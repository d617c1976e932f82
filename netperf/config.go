package netperf

import (
	"io"
	"net/netip"
	"time"
)

// Config describes one netperf run. Sizes of -1 mean "default", as in
// netperf; NewConfig returns a Config with every size at -1.
type Config struct {
	// Dial opens the control connection; nil means a kernel net.Dialer.
	Dial DialFunc
	// DataDial opens the data connection; nil means Dial. The CLI binds it
	// to the test-specific -L/-P local address.
	DataDial DialFunc
	// ListenPacket opens the UDP tests' data socket, unconnected as stock
	// netperf's, so that a response from another address of the server
	// (a netserver replies from its route's source) still counts; nil
	// means net.ListenPacket. The address is the -L/-P local address.
	ListenPacket ListenPacketFunc
	// Host and Port of the netserver control socket (-H, -p).
	Host string
	Port int
	// Test is -t; empty means TCP_STREAM.
	Test TestType
	// Length is -l: >0 seconds, <0 -N transactions (RR) or -N bytes
	// (STREAM/MAERTS), 0 means DefaultTestLength.
	Length int
	// LocalCPU (-c) and RemoteCPU (-C) request CPU measurement.
	LocalCPU, RemoteCPU bool
	// Passphrase is -Z.
	Passphrase string
	// Classic speaks the pre-omni messages of a netperf built with
	// --enable-omni=no instead of DO_OMNI.
	Classic bool
	// MaxIterations and MinIterations are -i max,min: more than one runs the
	// test repeatedly on one control connection until the confidence level
	// is met. 0 means 1.
	MaxIterations, MinIterations int
	// ConfidenceLevel (95 or 99) and ConfidenceWidth (percent, full width)
	// are -I; zero means 99 and 5.
	ConfidenceLevel int
	ConfidenceWidth float64

	// Test-specific options (after --).

	// LocalSendSize and RemoteSendSize are -m local,remote.
	LocalSendSize, RemoteSendSize int32
	// LocalRecvSize and RemoteRecvSize are -M local,remote.
	LocalRecvSize, RemoteRecvSize int32
	// LocalSendBuf and LocalRecvBuf are -s send,recv (local SO_SNDBUF/RCVBUF).
	LocalSendBuf, LocalRecvBuf int32
	// RemoteSendBuf and RemoteRecvBuf are -S send,recv.
	RemoteSendBuf, RemoteRecvBuf int32
	// RequestSize and ResponseSize are -r req,resp (TCP_RR; default 1,1).
	RequestSize, ResponseSize int32
	// NoDelay is -D: TCP_NODELAY on both data sockets.
	NoDelay bool
	// DataHost is the test-specific -H: where the data connection goes
	// (and what the server binds); empty means Host.
	DataHost string
	// LocalDataAddr is the test-specific -L, reported to the server and in
	// the banner; DataDial must actually bind it.
	LocalDataAddr string
	// LocalDataPort and RemoteDataPort are -P local,remote.
	LocalDataPort, RemoteDataPort int
	// LocalHost is the global -L: the control connection's local name,
	// which stock also takes as the data connection's without a
	// test-specific -L or -H (the banner's "from" name, SOURCE_ADDR).
	LocalHost string
	// LocalDataFamily and RemoteDataFamily are the data families the
	// test-specific -4, -6 and -L/-H name,family named (FamilyUnspec:
	// none); reported as SOURCE_FAMILY and DEST_FAMILY.
	LocalDataFamily, RemoteDataFamily uint32
	// ConnectDial opens each connection of TCP_CRR and TCP_CC from the
	// local port stock netperf would use (consecutive ports from a random
	// start in ClientPortMin..ClientPortMax, see clientPorts); nil means
	// DataDial with whatever port it binds.
	ConnectDial PortDialFunc
	// ClientPortMin and ClientPortMax are the test-specific -p min,max:
	// the local port range of ConnectDial; 0 means DefaultClientPortMin
	// and DefaultClientPortMax.
	ClientPortMin, ClientPortMax int
	// Family is -4, -6 or -H host,family: the address family of the
	// control and data connections (FamilyUnspec: the host's).
	Family uint32
	// RemoteCPURate is -C rate, sent to the server (stock netserver skips
	// its calibration with it).
	RemoteCPURate float32
	// RemoteSendOffset and RemoteRecvOffset are the global -O offsets.
	RemoteSendOffset, RemoteRecvOffset uint32
	// Histogram makes the output that of a netperf built with
	// --enable-histogram (the captured stock build was not): " : histogram"
	// in the banner and, with -v 2, the histogram of transaction times.
	Histogram bool
	// ResultBrand is the global -B tag: appended to the result line when
	// headers are off (-P 0) and reported as RESULT_BRAND.
	ResultBrand string
	// CommandLine is the command line as typed, words joined by spaces
	// (COMMAND_LINE, as netperf prints its argv).
	CommandLine string
	// LocalSendOffset and LocalRecvOffset are the global -o offsets; Go's
	// buffers have no alignment to offset, so they are only reported
	// (LOCAL_SEND_OFFSET, LOCAL_RECV_OFFSET).
	LocalSendOffset, LocalRecvOffset int32
	// Routing is -R: 1 allowed, -1 SO_DONTROUTE on the server's data
	// socket, 0 the test's default (allowed, except UDP_STREAM).
	Routing int
	// Interim is -D: print an interim result this often during the test
	// to InterimOut (0: none), in the layout of InterimMode (0: stock's
	// "Interim result:" line; OmniCSV and OmniKeyval as stock prints them
	// under -o and -k: the NETPERF_INTERIM_RESULT[n]= lines flent reads).
	// A negative -D is stock's "always timestamp" demo mode; ours always
	// timestamps, so both signs report alike.
	Interim     time.Duration
	InterimOut  io.Writer
	InterimMode OmniMode
	// FillFile is the global -F: the data buffers are filled from this
	// file (read again from its start at its end) instead of netperf's
	// default pattern. RemoteFillFile, -F local,remote, is sent to the
	// server (at most 31 bytes).
	FillFile, RemoteFillFile string
	// ReceiveTimeout is UDP_RR's -e: a response not received in this
	// time is given up and the next request sent, as stock (0: wait until
	// the test ends).
	ReceiveTimeout time.Duration
	// CongControl and RemoteCongControl are -K local,remote: the TCP
	// congestion control algorithm of our data socket and the one asked
	// of the server ("" leaves the default).
	CongControl, RemoteCongControl string
	// TransportInfo reads a data connection that is not a kernel socket
	// (the userspace stack's): its retransmissions, MSS and congestion
	// control (LOCAL_TRANSPORT_RETRANS, TRANSPORT_MSS, LOCAL_CONG_CONTROL);
	// ok false when it cannot tell. nil: only kernel sockets tell.
	TransportInfo TransportInfoFunc
	// OnLink tells, for a data socket that is not a kernel socket (where
	// SO_DONTROUTE does it), whether an address is reached without a
	// gateway, as stack.Stack.OnLink does: a UDP_STREAM without -R 1 (or
	// any UDP test with -R 0) to an address it is false for is refused
	// with "network is unreachable", as stock's SO_DONTROUTE socket is.
	// nil: not checked.
	OnLink func(netip.Addr) bool
	// LocalTOS and RemoteTOS are the global -Y local,remote: the IP TOS
	// (IPv6 traffic class) of our data socket and the one asked of the
	// server's.
	LocalTOS, RemoteTOS TOS
	// RemoteAffinity is the CPU netserver is asked to bind to when
	// BindRemote (-T ,rcpu); mplsnode netserver does not bind.
	RemoteAffinity int32
	BindRemote     bool
	// Units is netperf's -f: 'k', 'm', 'g' for 10^3, 10^6, 10^9 bits/s;
	// 'K', 'M', 'G' for 2^10, 2^20, 2^30 bytes/s; 'x' transactions. 0
	// means stock's default: 'x' for TCP_RR, TCP_CRR and UDP_RR, else 'm'.
	Units byte
	// ControlTimeout bounds control-message reads beyond the test length;
	// 0 means DefaultControlTimeout.
	ControlTimeout time.Duration
}

// NewConfig returns a Config for test against host with netperf's defaults.
func NewConfig(host string, test TestType) Config {
	return Config{
		Host: host, Port: DefaultPort, Test: test, Length: DefaultTestLength,
		LocalSendSize: -1, RemoteSendSize: -1, LocalRecvSize: -1, RemoteRecvSize: -1,
		LocalSendBuf: -1, LocalRecvBuf: -1, RemoteSendBuf: -1, RemoteRecvBuf: -1,
		RequestSize: 1, ResponseSize: 1,
	}
}
