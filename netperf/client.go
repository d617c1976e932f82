package netperf

import (
	"cmp"
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

// exchange sends req on the control connection and reads the answer
// into m, which decode reads and returns the serv_errno of: a non-zero
// one is a *RemoteError.
func exchange(ctl net.Conn, m *Message, timeout time.Duration, req interface{ Marshal(*Message) }, decode func(*Message) int32) error {
	req.Marshal(m)
	if _, err := ctl.Write(m[:]); err != nil {
		return fmt.Errorf("netperf: send request: %w", err)
	}
	if err := readMsg(ctl, m, timeout); err != nil {
		return err
	}
	if errno := decode(m); errno != 0 {
		return &RemoteError{errno}
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
		reqSize: cfg.RequestSize, respSize: cfg.ResponseSize,
		recvTimeout: cfg.ReceiveTimeout, dontRoute: !cfg.routingAllowed()}
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
	plan.fill = fl
	timeout := cfg.dataTimeout()
	var m Message
	var dataPort uint32
	var remoteCPU bool
	var err error
	if cfg.Classic {
		dataPort, remoteCPU, err = classicSetup(ctl, &m, cfg, family, &plan, &res)
	} else {
		dataPort, remoteCPU, err = omniSetup(ctl, &m, cfg, family, lsnd, lrcv, plan, &res)
	}
	if err != nil {
		return res, err
	}
	host := cmp.Or(cfg.DataHost, cfg.Host)
	addr := net.JoinHostPort(host, strconv.Itoa(int(dataPort)))
	meter := startCPU(cfg.LocalCPU)
	start := time.Now()
	plan.interim = newInterim(cfg, start)
	var data net.Conn
	var dr clientData
	if cfg.Test.isConnect() {
		// A connection per transaction; the sizes printed are those of a
		// fresh socket, as stock netperf prints them.
		dr, err = runConnectClient(ctx, cfg, addr, plan, start, timeout)
	} else {
		if data, err = openData(ctx, cfg, host, addr, dataPort); err != nil {
			return res, fmt.Errorf("netperf: data connect: %w", err)
		}
		// A signal (ctx) ends the data phase at once, not at the timer.
		stopData := context.AfterFunc(ctx, func() { data.Close() })
		defer func() { stopData(); data.Close() }()
		dr, err = runOneConn(cfg, data, &plan, &lsnd, &lrcv, start, timeout, &res)
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
	res.setData(dr)
	localUsage, localOK := meter.stop()

	if err := readMsg(ctl, &m, timeout); err != nil {
		return res, err
	}
	if plan.keepOpen {
		closeData(data, timeout)
	}
	var remoteUtil float32
	if cfg.Classic {
		remoteUtil, err = classicResults(&m, cfg, &res)
	} else {
		remoteUtil, err = omniResults(&m, cfg, remoteCPU, &res)
	}
	if err != nil {
		return res, err
	}
	units := rates(cfg, &res)
	if localOK {
		res.setLocalCPU(localUsage, units)
	}
	if cfg.RemoteCPU && remoteCPU {
		res.setRemoteCPU(remoteUtil, units)
	}
	return res, nil
}

// setRemoteCPU fills the server's CPU utilisation and service demand.
func (res *Result) setRemoteCPU(util float32, units float64) {
	res.RemoteCPU = float64(util)
	n := int(res.RemoteNumCPUs)
	if n == 0 {
		n = numCPUs()
	}
	res.RemoteServiceDemand = serviceDemand(res.RemoteCPU, n, units)
}

// setLocalCPU fills the local CPU outputs from u and the service demand
// per unit of work (units per second).
func (res *Result) setLocalCPU(u CPUUsage, units float64) {
	res.LocalCPU = float64(u.Util)
	res.LocalNumCPUs, res.LocalPeakCPU = u.NumCPUs, float64(u.PeakUtil)
	res.LocalPeakCPUID = u.PeakCPU
	res.LocalCPUUser, res.LocalCPUSys = float64(u.User), float64(u.System)
	res.LocalCPUIOWait, res.LocalCPUIRQ, res.LocalCPUSoftIRQ = float64(u.IOWait), float64(u.IRQ), float64(u.SoftIRQ)
	res.LocalServiceDemand = serviceDemand(res.LocalCPU, u.NumCPUs, units)
}

// setData fills what the client's own data phase counted.
func (res *Result) setData(dr clientData) {
	res.Elapsed = dr.elapsed
	res.BytesSent, res.BytesReceived, res.Transactions = dr.sent, dr.received, dr.trans
	res.SendCalls, res.SendErrors, res.RecvCalls = dr.sendCalls, dr.sendErrors, dr.recvCalls
	res.RecvTimeouts = dr.recvTimeouts
	res.Latency = dr.lat.stats()
	res.Histogram = dr.lat.histogram()
}

// runOneConn runs the data phase of a test with one data connection (or
// UDP socket), data, and reads its transport outputs into res.
func runOneConn(cfg *Config, data net.Conn, plan *dataPlan, lsnd, lrcv *int32, start time.Time, timeout time.Duration, res *Result) (clientData, error) {
	sock := tuneData(cfg, data, plan, lsnd, lrcv)
	var dr clientData
	var err error
	if cfg.Test.IsUDP() {
		dr, err = runUDPClient(data, *plan, start, timeout)
	} else {
		dr, err = runClientData(data, *plan, start, timeout)
	}
	readTransport(cfg, data, sock, res)
	return dr, err
}

// dataTimeout bounds the data phase and the wait for the results: the
// control timeout, plus the test time and the server's pad for a timed
// test.
func (c *Config) dataTimeout() time.Duration {
	if c.Length > 0 {
		return c.ControlTimeout + time.Duration(c.Length)*time.Second + PadTime
	}
	return c.ControlTimeout
}

// classicSetup sends a classic (nettest_bsd) test request and reads the
// server's setup: the data port and whether it measures its CPU.
func classicSetup(ctl net.Conn, m *Message, cfg *Config, family uint32, plan *dataPlan, res *Result) (uint32, bool, error) {
	req := classicRequest(cfg, family)
	var s ClassicSetup
	if err := exchange(ctl, m, cfg.ControlTimeout, &req, func(m *Message) int32 {
		s.Unmarshal(m, req.Test)
		return s.Errno
	}); err != nil {
		return 0, false, err
	}
	res.RemoteSendBuf, res.RemoteRecvBuf = s.SendBufSize, s.RecvBufSize
	if req.Test == ClassicMaerts {
		res.RemoteSendSize = s.MsgSize
	}
	plan.keepOpen = req.Test == ClassicRR
	return uint32(s.DataPort), s.MeasureCPU != 0, nil
}

// omniSetup sends a DO_OMNI request and reads the server's setup: the
// data port and whether it measures its CPU.
func omniSetup(ctl net.Conn, m *Message, cfg *Config, family uint32, lsnd, lrcv int32, plan dataPlan, res *Result) (uint32, bool, error) {
	req := omniRequest(cfg, family, lsnd, lrcv, plan)
	res.LocalSendWidth, res.LocalRecvWidth = req.SendWidth, req.RecvWidth
	var s OmniSetup
	if err := exchange(ctl, m, cfg.ControlTimeout, &req, func(m *Message) int32 {
		s.Unmarshal(m)
		return s.Errno
	}); err != nil {
		return 0, false, err
	}
	res.RemoteSendWidth, res.RemoteRecvWidth = s.SendWidth, s.RecvWidth
	if cfg.MaxIterations > 1 {
		// As stock: the next iteration asks for this data port again.
		cfg.RemoteDataPort = int(s.DataPort)
	}
	res.RemoteSendBuf, res.RemoteRecvBuf, res.RemoteSendSize = s.SendBufSize, s.RecvBufSize, s.SendSize
	res.RemoteRecvSize = s.ReceiveSize
	return s.DataPort, s.Flags&FlagMeasureCPU != 0, nil
}

// openData opens the data socket of a test with one connection: the TCP
// connection to addr, or the UDP socket towards host:dataPort (kept on
// the link when routing is not allowed).
func openData(ctx context.Context, cfg *Config, host, addr string, dataPort uint32) (net.Conn, error) {
	if !cfg.Test.IsUDP() {
		return cfg.DataDial(ctx, cfg.network("tcp"), addr)
	}
	data, err := udpPeerConn(cfg, cfg.network("udp"), host, dataPort)
	if err == nil && !cfg.routingAllowed() {
		if err = dontRoute(cfg, data.(*udpPeer)); err != nil {
			data.Close()
		}
	}
	return data, err
}

// tuneData applies the local socket options of cfg to the data socket
// (-s/-S sizes, -D, -K, -Y), updates the sizes the test reports and its
// call sizes, and returns the socket under data.
func tuneData(cfg *Config, data net.Conn, plan *dataPlan, lsnd, lrcv *int32) any {
	sock := any(data)
	if u, ok := data.(*udpPeer); ok {
		sock = u.PacketConn // the socket under the adapter
	}
	if cfg.LocalSendBuf >= 0 || cfg.LocalRecvBuf >= 0 {
		setBufSizes(sock, cfg.LocalSendBuf, cfg.LocalRecvBuf)
		if s, r, ok := bufSizes(sock); ok {
			*lsnd, *lrcv = s, r
			plan.sendSize = pickSize(cfg.LocalSendSize, s)
			plan.recvSize = pickSize(cfg.LocalRecvSize, r)
			if cfg.Test == UDPStream {
				plan.sendSize = udpSendSize(cfg.LocalSendSize, s)
			}
		}
	}
	if cfg.LocalSendBuf < 0 && cfg.LocalRecvBuf < 0 {
		if _, ok := sock.(bufferSizer); ok {
			// The userspace stack's sizes; the call sizes stay stock's.
			*lsnd, *lrcv, _ = bufSizes(sock)
		} else if _, ok := sock.(rawConner); !ok {
			*lsnd, *lrcv = 0, 0 // not a socket we know: sizes unknown
		} else if cfg.Test.IsUDP() {
			*lsnd, *lrcv, _ = bufSizes(sock) // a UDP socket's do not grow
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
	return sock
}

// readTransport fills the results' transport outputs off the data socket
// after the data phase: retransmissions, MSS, congestion control (from
// the kernel, or cfg.TransportInfo for another stack's) and the kernel
// interface of its local address.
func readTransport(cfg *Config, data net.Conn, sock any, res *Result) {
	res.LocalRetrans, res.TransportMSS, res.LocalCongControl = -1, -1, "TCP Only"
	_, kernel := sock.(rawConner)
	if !cfg.Test.IsUDP() {
		res.LocalRetrans, res.TransportMSS, res.LocalCongControl = transportInfo(sock)
		if !kernel && cfg.TransportInfo != nil {
			if r, mss, cong, ok := cfg.TransportInfo(data); ok {
				res.LocalRetrans, res.TransportMSS, res.LocalCongControl = int32(r), int32(mss), cong
			}
		}
	}
	if kernel {
		if la, ok := sock.(interface{ LocalAddr() net.Addr }); ok {
			if ap, err := netip.ParseAddrPort(la.LocalAddr().String()); err == nil {
				res.LocalInterface = interfaceOf(ap.Addr().Unmap())
			}
		}
	}
}

// classicResults reads a classic test's results message into res; it
// returns the server's CPU utilisation.
func classicResults(m *Message, cfg *Config, res *Result) (float32, error) {
	var r ClassicResults
	r.Unmarshal(m, classicTest(cfg.Test))
	if r.Errno != 0 {
		return 0, &RemoteError{r.Errno}
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
	res.RemoteNumCPUs, res.RemoteCPUMethod = uint32(r.NumCPUs), uint32(r.CPUMethod)
	return r.CPUUtil, nil
}

// omniResults reads an omni test's results message into res; it returns
// the server's CPU utilisation.
func omniResults(m *Message, cfg *Config, remoteCPU bool, res *Result) (float32, error) {
	var r OmniResults
	r.Unmarshal(m)
	if r.Errno != 0 {
		return 0, &RemoteError{r.Errno}
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
	res.RemoteNumCPUs, res.RemoteCPUMethod = r.NumCPUs, r.CPUMethod
	return r.CPUUtil, nil
}

// rates fills the throughput (and transaction rate) of res in stock's
// units for the test and -f, and returns the work per second service
// demand divides by: KB/s or transactions/s.
func rates(cfg *Config, res *Result) (units float64) {
	secs := res.Elapsed.Seconds()
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
		return res.TransactionRate
	case cfg.bandUnits():
		// nettest_omni.c with libfmt other than 'x': throughput of the
		// server's bytes both ways, service demand per KB of ours.
		res.TransactionRate = float64(res.Transactions) / secs
		res.Throughput = throughputIn(cfg.Units, float64(res.RemoteBytesSent+res.RemoteBytesReceived), secs)
		res.ThroughputUnits = unitsName(cfg.Units) + "/s"
		return float64(res.BytesSent+res.BytesReceived) / 1024 / secs
	case cfg.Test.IsRR():
		res.Throughput = float64(res.Transactions) / secs
		res.TransactionRate = res.Throughput
		res.ThroughputUnits = "Trans/s"
		return res.Throughput
	default:
		res.Throughput = throughputIn(cfg.Units, float64(bytes), secs)
		res.ThroughputUnits = unitsName(cfg.Units) + "/s"
		return float64(bytes) / 1024 / secs
	}
}

// serviceDemand is netperf's calc_service_demand: microseconds of CPU per
// unit (KB or transaction), counting every CPU.
func serviceDemand(util float64, ncpu int, unitsPerSec float64) float64 {
	if unitsPerSec <= 0 || util < 0 {
		return -1
	}
	return util / 100 * float64(ncpu) / unitsPerSec * 1e6
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
