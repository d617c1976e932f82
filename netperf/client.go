package netperf

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"
)

// TestType names a netperf test (-t).
type TestType string

// The tests this package runs.
const (
	TCPStream TestType = "TCP_STREAM"
	TCPMaerts TestType = "TCP_MAERTS"
	TCPRR     TestType = "TCP_RR"
	// TCPCRR opens a connection per transaction (connect, request,
	// response, close).
	TCPCRR TestType = "TCP_CRR"
	// TCPCC opens and closes a connection per transaction, no data; a
	// classic (non-omni) test even in stock's omni build.
	TCPCC     TestType = "TCP_CC"
	UDPStream TestType = "UDP_STREAM"
	UDPRR     TestType = "UDP_RR"
)

// Tests lists the tests Run supports, in netperf's order.
var Tests = []TestType{TCPStream, TCPMaerts, TCPRR, TCPCRR, TCPCC, UDPStream, UDPRR}

// IsRR reports whether t counts transactions (RR, CRR, CC).
func (t TestType) IsRR() bool { return t == TCPRR || t == TCPCRR || t == TCPCC || t == UDPRR }

// namedRR reports whether t's name holds "RR", which makes netsh.c
// default its units to transactions ('x').
func (t TestType) namedRR() bool { return t == TCPRR || t == TCPCRR || t == UDPRR }

// bandUnits reports whether -f chose bits or bytes for an RR test
// (stock's libfmt other than 'x'): TCP_RR's and UDP_RR's "band" titles
// and a throughput of the bytes moved; the migrated tests also take the
// service demand per KB. TCP_CC always counts transactions.
func (c *Config) bandUnits() bool {
	return c.Test.namedRR() && unitsName(c.Units) != ""
}

// IsUDP reports whether t runs over UDP.
func (t TestType) IsUDP() bool { return t == UDPStream || t == UDPRR }

// isConnect reports whether t opens a connection per transaction.
func (t TestType) isConnect() bool { return t == TCPCRR || t == TCPCC }

// TransportInfoFunc reads what a kernel TCP socket's TCP_INFO, TCP_MAXSEG
// and TCP_CONGESTION tell off a connection of another stack, as
// stack.Stack.TransportInfo does.
type TransportInfoFunc func(c net.Conn) (retrans, mss int, cong string, ok bool)

// DialFunc opens a connection, shaped like net.Dialer.DialContext.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// DefaultTestLength is netperf's default -l (seconds).
const DefaultTestLength = 10

// defaultAlignment is the send/recv alignment stock netperf sends; 0 would
// crash a stock netserver.
const defaultAlignment = 8

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

// Result is what one test measured, with every value netperf prints.
type Result struct {
	Test    TestType `json:"test"`
	Classic bool     `json:"classic,omitempty"`
	// Elapsed is the client's own wall-clock test time.
	Elapsed time.Duration `json:"elapsed_ns"`
	// Throughput is 10^6 bits/s (or the -f units) for STREAM/MAERTS,
	// transactions/s for RR; with -f, TCP_RR, TCP_CRR and UDP_RR report
	// the bytes the server moved both ways in the -f units, as stock.
	Throughput float64 `json:"throughput"`
	// TransactionRate is transactions/s of an RR test, whatever -f says.
	TransactionRate float64 `json:"transaction_rate,omitempty"`
	// ThroughputUnits names Throughput's unit.
	ThroughputUnits string `json:"throughput_units"`

	BytesSent           uint64  `json:"bytes_sent"`     // by this client
	BytesReceived       uint64  `json:"bytes_received"` // by this client
	RemoteBytesSent     uint64  `json:"remote_bytes_sent"`
	RemoteBytesReceived uint64  `json:"remote_bytes_received"`
	Transactions        uint64  `json:"transactions,omitempty"`
	RemoteTransactions  uint64  `json:"remote_transactions,omitempty"`
	RemoteElapsed       float64 `json:"remote_elapsed_s"`

	LocalSendBuf  int32 `json:"local_send_socket_size"`
	LocalRecvBuf  int32 `json:"local_recv_socket_size"`
	RemoteSendBuf int32 `json:"remote_send_socket_size"`
	RemoteRecvBuf int32 `json:"remote_recv_socket_size"`
	LocalSendSize int32 `json:"local_send_size"`
	LocalRecvSize int32 `json:"local_recv_size"`
	// RemoteSendSize is the server's per-send size (MAERTS "Send Message Size").
	RemoteSendSize int32 `json:"remote_send_size"`
	RequestSize    int32 `json:"request_size,omitempty"`
	ResponseSize   int32 `json:"response_size,omitempty"`
	NoDelay        bool  `json:"nodelay,omitempty"`

	// CPU utilisation in percent; -1 when not measured.
	LocalCPU  float64 `json:"local_cpu_util"`
	RemoteCPU float64 `json:"remote_cpu_util"`
	// Service demand: us/KB (STREAM/MAERTS) or us/Tr (RR); -1 when unknown.
	LocalServiceDemand  float64 `json:"local_service_demand"`
	RemoteServiceDemand float64 `json:"remote_service_demand"`
	LocalCPUMethod      uint32  `json:"local_cpu_method"`
	RemoteCPUMethod     uint32  `json:"remote_cpu_method"`
	RemoteNumCPUs       uint32  `json:"remote_num_cpus"`
	RemoteCongControl   string  `json:"remote_cong_control,omitempty"`

	// Send and receive calls here (UDP_STREAM: the messages sent), failed
	// sends, messages the server received and the throughput it saw
	// (UDP_STREAM's second result line).
	SendCalls        uint64  `json:"send_calls,omitempty"`
	RecvCalls        uint64  `json:"recv_calls,omitempty"`
	SendErrors       uint64  `json:"send_errors,omitempty"`
	RemoteRecvCalls  uint64  `json:"remote_recv_calls,omitempty"`
	RemoteThroughput float64 `json:"remote_throughput,omitempty"`
	// RecvTimeouts counts UDP_RR responses given up after -e.
	RecvTimeouts uint64 `json:"recv_timeouts,omitempty"`

	// Latency holds the transaction times of RR tests, in microseconds.
	Latency LatencyStats `json:"latency_us"`
	// Histogram holds the same times as netperf's -v 2 histogram; nil
	// outside RR tests.
	Histogram *Histogram `json:"-"`
	// The buffer ring widths of the omni tests: ours as sent in DO_OMNI
	// (stock's send_width, recv_width), the server's as it answered; 0
	// where the direction has none or the test is classic.
	LocalSendWidth, LocalRecvWidth   uint32 `json:"-"`
	RemoteSendWidth, RemoteRecvWidth int32  `json:"-"`
	// Final socket sizes the server reported, its receive size per call,
	// and its send and receive calls.
	RemoteSendBufEnd int32  `json:"remote_send_socket_size_end"`
	RemoteRecvBufEnd int32  `json:"remote_recv_socket_size_end"`
	RemoteRecvSize   int32  `json:"remote_recv_size"`
	RemoteSendCalls  uint64 `json:"remote_send_calls,omitempty"`
	// RemoteRetrans and LocalRetrans are the TCP retransmissions (-1 for
	// UDP or when the socket cannot tell); TransportMSS is the data
	// connection's MSS (-1 unknown); LocalCongControl its congestion
	// control ("TCP Only" for UDP, as netperf).
	RemoteRetrans    int32  `json:"remote_transport_retrans"`
	LocalRetrans     int32  `json:"local_transport_retrans"`
	TransportMSS     int32  `json:"transport_mss"`
	LocalCongControl string `json:"local_cong_control,omitempty"`
	// LocalInterface is the kernel interface holding the data
	// connection's local address ("" on the userspace stack or when none
	// does): LOCAL_INTERFACE_NAME and its driver outputs.
	LocalInterface string `json:"local_interface,omitempty"`
	// LocalCPUNum and RemoteCPUNum are the CPU counts; the peaks are the
	// busiest CPU's utilisation.
	LocalNumCPUs  int     `json:"local_num_cpus,omitempty"`
	LocalPeakCPU  float64 `json:"local_peak_cpu_util,omitempty"`
	RemotePeakCPU float64 `json:"remote_peak_cpu_util,omitempty"`
	// LocalPeakCPUID and RemotePeakCPUID number the busiest CPU (0 when
	// not measured, as netperf's zeroed globals).
	LocalPeakCPUID  int     `json:"local_peak_cpu_id,omitempty"`
	RemotePeakCPUID int     `json:"remote_peak_cpu_id,omitempty"`
	LocalCPUUser    float64 `json:"local_cpu_user,omitempty"`
	LocalCPUSys     float64 `json:"local_cpu_system,omitempty"`
	RemoteCPUUser   float64 `json:"remote_cpu_user,omitempty"`
	RemoteCPUSys    float64 `json:"remote_cpu_system,omitempty"`
	// The rest of netperf's CPU breakdown (percent).
	LocalCPUIOWait   float64 `json:"local_cpu_iowait,omitempty"`
	LocalCPUIRQ      float64 `json:"local_cpu_irq,omitempty"`
	LocalCPUSoftIRQ  float64 `json:"local_cpu_swintr,omitempty"`
	RemoteCPUIOWait  float64 `json:"remote_cpu_iowait,omitempty"`
	RemoteCPUIRQ     float64 `json:"remote_cpu_irq,omitempty"`
	RemoteCPUSoftIRQ float64 `json:"remote_cpu_swintr,omitempty"`
}

// Report is the outcome of Run: every iteration and their mean.
type Report struct {
	Config     Config   `json:"-"`
	Family     uint32   `json:"-"`
	Result     Result   `json:"result"` // the mean over Iterations
	Iterations []Result `json:"iterations"`
	// ConfidenceMet is false when -i ran out of iterations before the
	// confidence interval narrowed to ConfidenceWidth.
	ConfidenceMet bool `json:"confidence_met"`
	// Achieved full-width confidence intervals, percent of the mean.
	ThroughputInterval float64 `json:"throughput_interval_pct"`
	LocalCPUInterval   float64 `json:"local_cpu_interval_pct"`
	RemoteCPUInterval  float64 `json:"remote_cpu_interval_pct"`
	// UUID names this run (the UUID output), a random (version 4) UUID
	// as netperf makes one per run.
	UUID string `json:"uuid"`
	// BannerPrinted says the banner went out before the test (-D prints
	// it ahead of the interim results), so WriteText leaves it out.
	BannerPrinted bool `json:"-"`
}

func (c *Config) fill() {
	if c.Test == "" {
		c.Test = TCPStream
	}
	if unitsName(c.Units) == "" {
		// netsh.c: 'x' (transactions) for a test named *RR*, else 'm'.
		c.Units = 'm'
		if c.Test.namedRR() {
			c.Units = 'x'
		}
	}
	if c.Test == TCPCC {
		c.Classic = true // stock runs TCP_CC with the classic messages
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.Length == 0 {
		c.Length = DefaultTestLength
	}
	if c.Dial == nil {
		var d net.Dialer
		c.Dial = d.DialContext
	}
	if c.DataDial == nil {
		c.DataDial = c.Dial
	}
	if c.ClientPortMin == 0 {
		c.ClientPortMin = DefaultClientPortMin
	}
	if c.ClientPortMax == 0 {
		c.ClientPortMax = DefaultClientPortMax
	}
	if c.ControlTimeout <= 0 {
		c.ControlTimeout = DefaultControlTimeout
	}
	if c.MaxIterations < 1 {
		c.MaxIterations = 1
	}
	if c.MinIterations < 1 || c.MinIterations > c.MaxIterations {
		c.MinIterations = c.MaxIterations
	}
	if c.ConfidenceLevel != 95 {
		c.ConfidenceLevel = 99
	}
	if c.ConfidenceWidth <= 0 {
		c.ConfidenceWidth = 5
	}
	if c.RequestSize <= 0 {
		c.RequestSize = 1
	}
	if c.ResponseSize <= 0 {
		c.ResponseSize = 1
	}
}

// Run connects to the netserver, runs the configured test (repeatedly with
// -i) on one control connection, and returns the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.fill()
	if !slices.Contains(Tests, cfg.Test) {
		return nil, fmt.Errorf("netperf: test %q not supported (%v)", cfg.Test, Tests)
	}
	if cfg.Classic && !slices.Contains(ClassicTests, cfg.Test) {
		return nil, fmt.Errorf("netperf: test %s has no classic (nettest_bsd) form here; classic tests are %v", cfg.Test, ClassicTests)
	}
	ctl, err := cfg.Dial(ctx, cfg.network("tcp"), net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	if err != nil {
		return nil, fmt.Errorf("netperf: establish control: %w", err)
	}
	defer ctl.Close()
	stop := context.AfterFunc(ctx, func() { ctl.Close() })
	defer stop()
	rep := &Report{Config: cfg, Family: familyOf(ctl.RemoteAddr()), UUID: newUUID()}
	if cfg.DataHost != "" {
		if a, err := netip.ParseAddr(cfg.DataHost); err == nil && !a.Unmap().Is4() {
			rep.Family = FamilyIPv6
		}
	}
	if cfg.Passphrase != "" {
		if _, err := ctl.Write(PassphraseMessage(cfg.Passphrase)[:]); err != nil {
			return nil, fmt.Errorf("netperf: send passphrase: %w", err)
		}
	}
	var st confStats
	iter := cfg
	for i := 1; i <= cfg.MaxIterations; i++ {
		res, err := runOne(ctx, ctl, &iter, rep.Family)
		if err != nil {
			return nil, err
		}
		rep.Iterations = append(rep.Iterations, res)
		st.add(res)
		if i >= cfg.MinIterations && st.met(cfg) {
			break
		}
	}
	rep.Result = st.mean(rep.Iterations)
	rep.ConfidenceMet = cfg.MaxIterations == 1 || st.met(cfg)
	rep.ThroughputInterval, rep.LocalCPUInterval, rep.RemoteCPUInterval = st.intervals(cfg)
	// End the session as netperf does: half-close, wait for the server's EOF.
	if cw, ok := ctl.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		_ = ctl.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.Copy(io.Discard, ctl)
	}
	return rep, nil
}

// network is "tcp" or "udp" with the -4/-6 family suffix.
func (c *Config) network(proto string) string {
	switch c.Family {
	case FamilyIPv4:
		return proto + "4"
	case FamilyIPv6:
		return proto + "6"
	}
	return proto
}

func familyOf(a net.Addr) uint32 {
	if ap, err := netip.ParseAddrPort(a.String()); err == nil && !ap.Addr().Unmap().Is4() {
		return FamilyIPv6
	}
	return FamilyIPv4
}

// readMsg reads one control message with a deadline.
func readMsg(ctl net.Conn, m *Message, timeout time.Duration) error {
	_ = ctl.SetReadDeadline(time.Now().Add(timeout))
	if _, err := io.ReadFull(ctl, m[:]); err != nil {
		return fmt.Errorf("netperf: recv_response: %w", err)
	}
	return nil
}

// RemoteError is a non-zero serv_errno from the server.
type RemoteError struct{ Errno int32 }

func (e *RemoteError) Error() string { return fmt.Sprintf("netperf: remote error %d", e.Errno) }

// dataPlan is what the client does on the data connection.
type dataPlan struct {
	test               TestType
	sendSize, recvSize int32
	reqSize, respSize  int32
	length             int
	keepOpen           bool // classic RR: do not half-close before results
	interim            *interimReporter
	fill               *filler       // -F, or the default pattern
	recvTimeout        time.Duration // UDP_RR's -e (0: none)
	dontRoute          bool          // routing not allowed (-R): sends stay on the link
}

// planFor returns the local socket sizes a test starts from (the kernel's
// defaults, as stock netperf reads them off a fresh socket, or -s) and its
// data plan.
func planFor(cfg *Config) (lsnd, lrcv int32, plan dataPlan) {
	lsnd, lrcv = defaultCallSizes()
	if cfg.Test.IsUDP() {
		lsnd, lrcv = defaultUDPBufSizes()
	}
	if cfg.LocalSendBuf >= 0 {
		lsnd = cfg.LocalSendBuf
	}
	if cfg.LocalRecvBuf >= 0 {
		lrcv = cfg.LocalRecvBuf
	}
	plan = dataPlan{test: cfg.Test, length: cfg.Length,
		sendSize: pickSize(cfg.LocalSendSize, lsnd), recvSize: pickSize(cfg.LocalRecvSize, lrcv),
		reqSize: cfg.RequestSize, respSize: cfg.ResponseSize}
	if cfg.Test == UDPStream {
		plan.sendSize = udpSendSize(cfg.LocalSendSize, lsnd)
	}
	return lsnd, lrcv, plan
}

// runOne runs a single test on the control connection.
func runOne(ctx context.Context, ctl net.Conn, cfg *Config, family uint32) (Result, error) {
	res := Result{Test: cfg.Test, Classic: cfg.Classic, NoDelay: cfg.NoDelay,
		LocalCPU: -1, RemoteCPU: -1, LocalServiceDemand: -1, RemoteServiceDemand: -1,
		LocalCPUMethod: CPUMethodProcStat}
	lsnd, lrcv, plan := planFor(cfg)
	fl, ferr := openFiller(cfg.FillFile)
	if ferr != nil {
		return res, ferr
	}
	defer fl.close()
	plan.fill, plan.recvTimeout, plan.dontRoute = fl, cfg.ReceiveTimeout, !cfg.routingAllowed()
	timeout := cfg.ControlTimeout
	if cfg.Length > 0 {
		timeout += time.Duration(cfg.Length)*time.Second + PadTime
	}

	var m Message
	var dataPort uint32
	var remoteCPU bool
	if cfg.Classic {
		req := classicRequest(cfg, family)
		req.Marshal(&m)
		if _, err := ctl.Write(m[:]); err != nil {
			return res, fmt.Errorf("netperf: send request: %w", err)
		}
		if err := readMsg(ctl, &m, cfg.ControlTimeout); err != nil {
			return res, err
		}
		var s ClassicSetup
		s.Unmarshal(&m, req.Test)
		if s.Errno != 0 {
			return res, &RemoteError{s.Errno}
		}
		dataPort, remoteCPU = uint32(s.DataPort), s.MeasureCPU != 0
		res.RemoteSendBuf, res.RemoteRecvBuf = s.SendBufSize, s.RecvBufSize
		if req.Test == ClassicMaerts {
			res.RemoteSendSize = s.MsgSize
		}
		plan.keepOpen = req.Test == ClassicRR
	} else {
		req := omniRequest(cfg, family, lsnd, lrcv, plan)
		res.LocalSendWidth, res.LocalRecvWidth = req.SendWidth, req.RecvWidth
		req.Marshal(&m)
		if _, err := ctl.Write(m[:]); err != nil {
			return res, fmt.Errorf("netperf: send request: %w", err)
		}
		if err := readMsg(ctl, &m, cfg.ControlTimeout); err != nil {
			return res, err
		}
		var s OmniSetup
		s.Unmarshal(&m)
		if s.Errno != 0 {
			return res, &RemoteError{s.Errno}
		}
		dataPort, remoteCPU = s.DataPort, s.Flags&FlagMeasureCPU != 0
		res.RemoteSendWidth, res.RemoteRecvWidth = s.SendWidth, s.RecvWidth
		if cfg.MaxIterations > 1 {
			// As stock: the next iteration asks for this data port again.
			cfg.RemoteDataPort = int(dataPort)
		}
		res.RemoteSendBuf, res.RemoteRecvBuf, res.RemoteSendSize = s.SendBufSize, s.RecvBufSize, s.SendSize
		res.RemoteRecvSize = s.ReceiveSize
	}

	host := cfg.Host
	if cfg.DataHost != "" {
		host = cfg.DataHost
	}
	addr := net.JoinHostPort(host, strconv.Itoa(int(dataPort)))
	meter := startCPU(cfg.LocalCPU)
	start := time.Now()
	plan.interim = newInterim(cfg, start)
	var data net.Conn
	var dr clientData
	var err error
	if cfg.Test.isConnect() {
		// A connection per transaction; the sizes printed are those of a
		// fresh socket, as stock netperf prints them.
		dr, err = runConnectClient(ctx, cfg, addr, plan, start, timeout)
	} else {
		network := cfg.network("tcp")
		if cfg.Test.IsUDP() {
			network = cfg.network("udp")
		}
		if cfg.Test.IsUDP() {
			data, err = udpPeerConn(cfg, network, host, dataPort)
			if err == nil && !cfg.routingAllowed() {
				err = dontRoute(cfg, data.(*udpPeer))
			}
		} else {
			data, err = cfg.DataDial(ctx, network, addr)
		}
		if err != nil {
			return res, fmt.Errorf("netperf: data connect: %w", err)
		}
		defer data.Close()
		// A signal (ctx) ends the data phase at once, not at the timer.
		stopData := context.AfterFunc(ctx, func() { data.Close() })
		defer stopData()
		sock := any(data)
		if u, ok := data.(*udpPeer); ok {
			sock = u.PacketConn // the socket under the adapter
		}
		if cfg.LocalSendBuf >= 0 || cfg.LocalRecvBuf >= 0 {
			setBufSizes(sock, cfg.LocalSendBuf, cfg.LocalRecvBuf)
			if s, r, ok := bufSizes(sock); ok {
				lsnd, lrcv = s, r
				plan.sendSize = pickSize(cfg.LocalSendSize, lsnd)
				plan.recvSize = pickSize(cfg.LocalRecvSize, lrcv)
				if cfg.Test == UDPStream {
					plan.sendSize = udpSendSize(cfg.LocalSendSize, lsnd)
				}
			}
		}
		if cfg.LocalSendBuf < 0 && cfg.LocalRecvBuf < 0 {
			if _, ok := sock.(bufferSizer); ok {
				// The userspace stack's sizes; the call sizes stay stock's.
				lsnd, lrcv, _ = bufSizes(sock)
			} else if _, ok := sock.(rawConner); !ok {
				lsnd, lrcv = 0, 0 // not a socket we know: sizes unknown
			} else if cfg.Test.IsUDP() {
				lsnd, lrcv, _ = bufSizes(sock) // a UDP socket's do not grow
			}
		}
		if cfg.NoDelay {
			if nd, ok := data.(noDelayer); ok {
				_ = nd.SetNoDelay(true)
			}
		}
		if cfg.CongControl != "" && !cfg.Test.IsUDP() {
			setCongestionControl(sock, cfg.CongControl)
		}
		if cfg.LocalTOS.Set {
			setTOS(sock, cfg.LocalTOS.Value)
		}
		if cfg.Test.IsUDP() {
			dr, err = runUDPClient(data, plan, start, timeout)
		} else {
			dr, err = runClientData(data, plan, start, timeout)
		}
		res.LocalRetrans, res.TransportMSS, res.LocalCongControl = -1, -1, "TCP Only"
		if !cfg.Test.IsUDP() {
			res.LocalRetrans, res.TransportMSS, res.LocalCongControl = transportInfo(sock)
			if _, kernel := sock.(rawConner); !kernel && cfg.TransportInfo != nil {
				if r, mss, cong, ok := cfg.TransportInfo(data); ok {
					res.LocalRetrans, res.TransportMSS, res.LocalCongControl = int32(r), int32(mss), cong
				}
			}
		}
		if _, kernel := sock.(rawConner); kernel {
			if la, ok := sock.(interface{ LocalAddr() net.Addr }); ok {
				if ap, err := netip.ParseAddrPort(la.LocalAddr().String()); err == nil {
					res.LocalInterface = interfaceOf(ap.Addr().Unmap())
				}
			}
		}
	}
	plan.interim.final()
	res.LocalSendBuf, res.LocalRecvBuf = lsnd, lrcv
	res.LocalSendSize, res.LocalRecvSize = plan.sendSize, plan.recvSize
	if cfg.Test.IsRR() {
		res.RequestSize, res.ResponseSize = plan.reqSize, plan.respSize
	}
	if err != nil {
		return res, fmt.Errorf("netperf: data phase: %w", err)
	}
	res.Elapsed = dr.elapsed
	res.BytesSent, res.BytesReceived, res.Transactions = dr.sent, dr.received, dr.trans
	res.SendCalls, res.SendErrors, res.RecvCalls = dr.sendCalls, dr.sendErrors, dr.recvCalls
	res.RecvTimeouts = dr.recvTimeouts
	res.Latency = dr.lat.stats()
	res.Histogram = dr.lat.histogram()
	localUsage, localOK := meter.stop()

	if err := readMsg(ctl, &m, timeout); err != nil {
		return res, err
	}
	if plan.keepOpen {
		closeData(data, timeout)
	}
	remoteNumCPUs := uint32(0)
	var remoteUtil float32
	if cfg.Classic {
		var r ClassicResults
		r.Unmarshal(&m, classicTest(cfg.Test))
		if r.Errno != 0 {
			return res, &RemoteError{r.Errno}
		}
		switch cfg.Test {
		case TCPStream:
			res.RemoteBytesReceived, res.RemoteRecvCalls = uint64(r.Bytes), uint64(r.Calls)
		case TCPMaerts:
			res.RemoteBytesSent, res.RemoteSendCalls = uint64(r.Bytes), uint64(r.Calls)
		case TCPRR, TCPCC:
			res.RemoteBytesReceived, res.RemoteTransactions = uint64(r.Bytes), uint64(r.TransReceived)
			res.RemoteRecvCalls = uint64(r.Calls)
		}
		res.RemoteElapsed = float64(r.ElapsedTime)
		remoteUtil, remoteNumCPUs, res.RemoteCPUMethod = r.CPUUtil, uint32(r.NumCPUs), uint32(r.CPUMethod)
	} else {
		var r OmniResults
		r.Unmarshal(&m)
		if r.Errno != 0 {
			return res, &RemoteError{r.Errno}
		}
		res.RemoteBytesReceived, res.RemoteBytesSent = r.BytesReceived, r.BytesSent
		res.RemoteTransactions = uint64(r.TransReceived)
		res.RemoteRecvCalls = uint64(r.RecvCalls)
		res.RemoteSendCalls = uint64(r.SendCalls)
		res.RemoteSendBufEnd, res.RemoteRecvBufEnd = r.SendBufSize, r.RecvBufSize
		res.RemoteRetrans = r.TransportRetrans
		if cfg.RemoteCPU && remoteCPU {
			res.RemoteCPUUser, res.RemoteCPUSys, res.RemotePeakCPU = float64(r.CPUUser), float64(r.CPUSystem), float64(r.PeakCPUUtil)
			res.RemotePeakCPUID = int(r.PeakCPUID)
			res.RemoteCPUIOWait, res.RemoteCPUIRQ, res.RemoteCPUSoftIRQ = float64(r.CPUIOWait), float64(r.CPUIRQ), float64(r.CPUSoftIRQ)
		}
		res.RemoteElapsed = float64(r.ElapsedTime)
		res.RemoteCongControl = r.CongControl
		remoteUtil, remoteNumCPUs, res.RemoteCPUMethod = r.CPUUtil, r.NumCPUs, r.CPUMethod
	}
	res.RemoteNumCPUs = remoteNumCPUs

	secs := res.Elapsed.Seconds()
	var units float64 // KB/s or transactions/s, for service demand
	var bytes uint64
	switch cfg.Test {
	case TCPStream:
		// Stock netperf takes STREAM throughput from the server's count.
		bytes = res.RemoteBytesReceived + res.RemoteBytesSent
	case TCPMaerts:
		bytes = res.BytesReceived
	case UDPStream:
		// Line 1 is what we sent, line 2 what the server received.
		bytes = res.BytesSent
		res.RemoteThroughput = throughputIn(cfg.Units, float64(res.RemoteBytesReceived), secs)
	}
	switch {
	case cfg.bandUnits() && cfg.Classic:
		// nettest_bsd.c's send_tcp_rr: the transaction rate times the
		// bytes of one transaction; service demand still per transaction.
		res.TransactionRate = float64(res.Transactions) / secs
		res.Throughput = throughputIn(cfg.Units, res.TransactionRate*float64(cfg.RequestSize+cfg.ResponseSize), 1)
		res.ThroughputUnits = unitsName(cfg.Units) + "/s"
		units = res.TransactionRate
	case cfg.bandUnits():
		// nettest_omni.c with libfmt other than 'x': throughput of the
		// server's bytes both ways, service demand per KB of ours.
		res.TransactionRate = float64(res.Transactions) / secs
		res.Throughput = throughputIn(cfg.Units, float64(res.RemoteBytesSent+res.RemoteBytesReceived), secs)
		res.ThroughputUnits = unitsName(cfg.Units) + "/s"
		units = float64(res.BytesSent+res.BytesReceived) / 1024 / secs
	case cfg.Test.IsRR():
		res.Throughput = float64(res.Transactions) / secs
		res.TransactionRate = res.Throughput
		res.ThroughputUnits = "Trans/s"
		units = res.Throughput
	default:
		res.Throughput = throughputIn(cfg.Units, float64(bytes), secs)
		res.ThroughputUnits = unitsName(cfg.Units) + "/s"
		units = float64(bytes) / 1024 / secs
	}
	if localOK {
		res.LocalCPU = float64(localUsage.Util)
		res.LocalNumCPUs, res.LocalPeakCPU = localUsage.NumCPUs, float64(localUsage.PeakUtil)
		res.LocalPeakCPUID = localUsage.PeakCPU
		res.LocalCPUUser, res.LocalCPUSys = float64(localUsage.User), float64(localUsage.System)
		res.LocalCPUIOWait, res.LocalCPUIRQ, res.LocalCPUSoftIRQ = float64(localUsage.IOWait), float64(localUsage.IRQ), float64(localUsage.SoftIRQ)
		res.LocalServiceDemand = serviceDemand(res.LocalCPU, localUsage.NumCPUs, units)
	}
	if cfg.RemoteCPU && remoteCPU {
		res.RemoteCPU = float64(remoteUtil)
		n := int(remoteNumCPUs)
		if n == 0 {
			n = numCPUs()
		}
		res.RemoteServiceDemand = serviceDemand(res.RemoteCPU, n, units)
	}
	return res, nil
}

// serviceDemand is netperf's calc_service_demand: microseconds of CPU per
// unit (KB or transaction), counting every CPU.
func serviceDemand(util float64, ncpu int, unitsPerSec float64) float64 {
	if unitsPerSec <= 0 || util < 0 {
		return -1
	}
	return util / 100 * float64(ncpu) / unitsPerSec * 1e6
}

// ClassicTests are the tests Config.Classic runs with nettest_bsd.c's
// messages.
var ClassicTests = []TestType{TCPStream, TCPMaerts, TCPRR, TCPCC}

func classicTest(t TestType) ClassicTest {
	switch t {
	case TCPMaerts:
		return ClassicMaerts
	case TCPRR:
		return ClassicRR
	case TCPCC:
		return ClassicCC
	}
	return ClassicStream
}

func classicRequest(cfg *Config, family uint32) ClassicRequest {
	r := ClassicRequest{
		Test: classicTest(cfg.Test), Affinity: -1,
		SendBufSize: cfg.RemoteSendBuf, RecvBufSize: cfg.RemoteRecvBuf,
		TestLength: int32(cfg.Length), IPFamily: int32(family), Port: int32(cfg.RemoteDataPort),
		CPURate: cfg.RemoteCPURate,
	}
	if cfg.RemoteCPU {
		r.MeasureCPU = 1
	}
	if cfg.NoDelay {
		r.NoDelay = 1
	}
	// The classic protocol encodes "default message size" as 0, not -1.
	switch r.Test {
	case ClassicStream:
		r.ReceiveSize, r.RecvAlign = max(cfg.RemoteRecvSize, 0), defaultAlignment
	case ClassicMaerts:
		r.SendSize, r.SendAlign = max(cfg.RemoteSendSize, 0), defaultAlignment
	case ClassicRR, ClassicCC:
		r.RecvAlign, r.SendAlign = defaultAlignment, defaultAlignment
		r.RequestSize, r.ResponseSize = cfg.RequestSize, cfg.ResponseSize
	}
	return r
}

func omniRequest(cfg *Config, family uint32, lsnd, lrcv int32, plan dataPlan) OmniRequest {
	affinity := int32(-1)
	if cfg.BindRemote {
		affinity = cfg.RemoteAffinity
	}
	r := OmniRequest{
		Affinity: affinity, SendBufSize: cfg.RemoteSendBuf, SendSize: cfg.RemoteSendSize,
		SendAlign: defaultAlignment, RequestSize: -1, RecvBufSize: cfg.RemoteRecvBuf,
		ReceiveSize: cfg.RemoteRecvSize, RecvAlign: defaultAlignment, ResponseSize: -1,
		Flags: FlagRoutingAllowed, TestLength: int32(cfg.Length), CPURate: cfg.RemoteCPURate,
		SendOffset: cfg.RemoteSendOffset, RecvOffset: cfg.RemoteRecvOffset,
		SendDirty: -1, RecvDirty: -1, RecvClean: -1,
		DataPort: uint32(cfg.RemoteDataPort), IPFamily: family, SocketType: 1, Protocol: 6,
		NetperfPort: uint32(cfg.LocalDataPort), SocketPrio: -1, SocketTOS: cfg.RemoteTOS.wire(),
		CongControl: cfg.RemoteCongControl, FillFile: cfg.RemoteFillFile,
	}
	if cfg.RemoteCPU {
		r.Flags |= FlagMeasureCPU
	}
	if cfg.NoDelay {
		r.Flags |= FlagNoDelay
	}
	if a, err := netip.ParseAddr(cfg.LocalDataAddr); err == nil {
		r.NetperfIP = a.Unmap()
	}
	if a, err := netip.ParseAddr(cfg.DataHost); err == nil {
		r.NetserverIP = a.Unmap()
	}
	// The widths are the client's own ring widths, echoed by the server.
	// Stock sizes them from its socket's buffer as Linux reports it after
	// -s, which doubles the request.
	if cfg.LocalSendBuf >= 0 {
		lsnd = 2 * cfg.LocalSendBuf
	}
	if cfg.LocalRecvBuf >= 0 {
		lrcv = 2 * cfg.LocalRecvBuf
	}
	switch cfg.Test {
	case TCPStream:
		r.Direction = DirServerReceives
		r.SendWidth = uint32(width(0, lsnd, plan.sendSize))
	case TCPMaerts:
		r.Direction = DirServerSends
		r.RecvWidth = uint32(width(0, lrcv, plan.recvSize))
	case UDPStream:
		r.Direction = DirServerReceives
		r.SendWidth = uint32(width(0, lsnd, plan.sendSize))
	default: // the request/response tests
		r.Direction = DirServerSends | DirServerReceives
		r.RequestSize, r.ResponseSize = cfg.RequestSize, cfg.ResponseSize
		r.SendWidth, r.RecvWidth = 1, 1
	}
	if cfg.Test.IsUDP() {
		r.SocketType, r.Protocol = SocketDgram, ProtoUDP
	}
	if !cfg.routingAllowed() {
		// Stock clears ROUTING_ALLOWED for UDP_STREAM (-R 1 sets it).
		r.Flags &^= FlagRoutingAllowed
	}
	if cfg.Test == TCPCRR {
		r.Flags |= FlagConnectTest
	}
	return r
}

type clientData struct {
	sent, received, trans uint64
	sendCalls, sendErrors uint64 // send calls (UDP_STREAM: messages sent) and failed sends
	recvCalls             uint64
	recvTimeouts          uint64 // UDP_RR responses given up after -e
	elapsed               time.Duration
	lat                   *latencyHist // transaction times (RR tests)
}

// closeData half-closes the data connection and drains it to the server's
// EOF (stock netperf reads once and leaks the socket; draining avoids RST).
func closeData(c net.Conn, timeout time.Duration) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	_, _ = io.Copy(io.Discard, c)
}

// runClientData runs the client side of the data phase; start is the
// client's clock start (just before connect).
func runClientData(c net.Conn, p dataPlan, start time.Time, timeout time.Duration) (clientData, error) {
	var d clientData
	timed := p.length > 0
	end := start.Add(time.Duration(p.length) * time.Second)
	var limit uint64
	if !timed {
		limit = uint64(-int64(p.length))
	}
	switch {
	case timed && p.test != TCPRR:
		_ = c.SetDeadline(end)
	case timed:
		// RR finishes the transaction in flight when the timer fires, as
		// netperf does, so both sides count the same transactions.
		_ = c.SetDeadline(end.Add(timeout))
	default:
		_ = c.SetDeadline(time.Now().Add(timeout))
	}
	switch p.test {
	case TCPStream:
		buf := make([]byte, p.sendSize)
		p.fill.fill(buf)
		d.lat = new(latencyHist) // the time of each send call, as stock's histogram
		for !timed || time.Now().Before(end) {
			b := buf
			if limit > 0 && limit-d.sent < uint64(len(b)) {
				b = b[:limit-d.sent]
			}
			t0 := time.Now()
			n, err := c.Write(b)
			d.lat.add(time.Since(t0))
			d.sent += uint64(n)
			d.sendCalls++
			p.interim.add(float64(n))
			if err != nil {
				if timed && isTimeout(err) {
					break
				}
				return d, err
			}
			if limit > 0 && d.sent >= limit {
				break
			}
		}
		// The server's EOF ends the test; its byte count is the result.
		_ = c.SetDeadline(time.Time{})
		closeData(c, timeout)
		d.elapsed = time.Since(start)
		return d, nil
	case TCPMaerts:
		buf := make([]byte, p.recvSize)
		d.lat = new(latencyHist) // the time of each receive call
		for {
			t0 := time.Now()
			n, err := c.Read(buf)
			d.received += uint64(n)
			if n > 0 {
				d.recvCalls++
				d.lat.add(time.Since(t0))
			}
			p.interim.add(float64(n))
			if err != nil {
				if err == io.EOF || (timed && isTimeout(err)) {
					break
				}
				return d, err
			}
			if limit > 0 && d.received >= limit {
				break
			}
		}
		d.elapsed = time.Since(start)
		_ = c.SetDeadline(time.Time{})
		closeData(c, timeout)
		return d, nil
	default: // TCP_RR
		req := make([]byte, p.reqSize)
		resp := make([]byte, p.respSize)
		p.fill.fill(req)
		d.lat = new(latencyHist)
		for {
			t0 := time.Now()
			if timed && !t0.Before(end) {
				break
			}
			if _, err := c.Write(req); err != nil {
				return d, err
			}
			d.sent += uint64(len(req))
			d.sendCalls++
			if _, err := io.ReadFull(c, resp); err != nil {
				return d, err
			}
			d.received += uint64(len(resp))
			d.recvCalls++
			d.trans++
			d.lat.add(time.Since(t0))
			p.interim.add(1)
			if limit > 0 && d.trans >= limit {
				break
			}
		}
		d.elapsed = time.Since(start)
		_ = c.SetDeadline(time.Time{})
		if !p.keepOpen {
			closeData(c, timeout)
		}
		return d, nil
	}
}

// confStats accumulates iteration results for netperf's confidence test
// (netlib.c calculate_confidence): population variance, Student's t.
type confStats struct {
	n       int
	sum, sq [3]float64 // throughput, local CPU, remote CPU
}

func (s *confStats) add(r Result) {
	s.n++
	for i, v := range [3]float64{r.Throughput, r.LocalCPU, r.RemoteCPU} {
		s.sum[i] += v
		s.sq[i] += v * v
	}
}

// tTable holds Student's t for 95% and 99% two-sided confidence, by
// degrees of freedom 1..30 (the table netperf uses).
var tTable = map[int][]float64{
	95: {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042},
	99: {63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169, 3.106, 3.055, 3.012, 2.977, 2.947, 2.921, 2.898, 2.878, 2.861, 2.845, 2.831, 2.819, 2.807, 2.797, 2.787, 2.779, 2.771, 2.763, 2.756, 2.750},
}

// intervals returns the full-width confidence intervals in percent of the
// mean: 2 t sqrt(var/(n-1)) / mean. A mean of zero (unmeasured) gives 0.
func (s *confStats) intervals(cfg Config) (tput, lcpu, rcpu float64) {
	if s.n < 2 {
		return 0, 0, 0
	}
	tt := tTable[cfg.ConfidenceLevel]
	t := tt[min(s.n-1, len(tt))-1]
	var out [3]float64
	for i := range out {
		mean := s.sum[i] / float64(s.n)
		v := s.sq[i]/float64(s.n) - mean*mean
		if mean <= 0 || v <= 0 {
			continue
		}
		out[i] = 100 * 2 * t * math.Sqrt(v/float64(s.n-1)) / mean
	}
	return out[0], out[1], out[2]
}

func (s *confStats) met(cfg Config) bool {
	if s.n < 2 {
		return false
	}
	a, b, c := s.intervals(cfg)
	return a <= cfg.ConfidenceWidth && b <= cfg.ConfidenceWidth && c <= cfg.ConfidenceWidth
}

// mean averages the iterations as netperf reports them (mean throughput,
// time, CPU and service demand); sizes come from the last iteration.
func (s *confStats) mean(rs []Result) Result {
	if len(rs) == 0 {
		return Result{}
	}
	m := rs[len(rs)-1]
	if len(rs) == 1 {
		return m
	}
	n := float64(len(rs))
	var el time.Duration
	m.Throughput, m.LocalCPU, m.RemoteCPU, m.LocalServiceDemand, m.RemoteServiceDemand = 0, 0, 0, 0, 0
	m.BytesSent, m.BytesReceived, m.RemoteBytesSent, m.RemoteBytesReceived, m.Transactions, m.RemoteTransactions = 0, 0, 0, 0, 0, 0
	for _, r := range rs {
		el += r.Elapsed
		m.Throughput += r.Throughput / n
		m.LocalCPU += r.LocalCPU / n
		m.RemoteCPU += r.RemoteCPU / n
		m.LocalServiceDemand += r.LocalServiceDemand / n
		m.RemoteServiceDemand += r.RemoteServiceDemand / n
		m.BytesSent += r.BytesSent
		m.BytesReceived += r.BytesReceived
		m.RemoteBytesSent += r.RemoteBytesSent
		m.RemoteBytesReceived += r.RemoteBytesReceived
		m.Transactions += r.Transactions
		m.RemoteTransactions += r.RemoteTransactions
	}
	m.Elapsed = el / time.Duration(len(rs))
	if m.Classic {
		// nettest_bsd.c's -v 2 latency and rate come from the mean
		// transaction rate (thruput); the migrated tests' from the last
		// iteration's transaction_rate, which m keeps.
		m.TransactionRate = 0
		for _, r := range rs {
			m.TransactionRate += r.TransactionRate / n
		}
	}
	return m
}
