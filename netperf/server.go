package netperf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// PadTime is netserver's PAD_TIME: a receiving server's timer runs this
// much longer than the test so that the client's own timer ends the test.
const PadTime = 4 * time.Second

// Server defaults.
const (
	// DefaultControlTimeout bounds the wait for the next control message,
	// so a dead client cannot pin a goroutine forever. Stock netperf sends
	// its next request (or EOF) immediately after reading results.
	DefaultControlTimeout = 60 * time.Second
	// DefaultIdleTimeout ends a data phase that has no timer (count-based
	// tests, accept of a count-based test) after this long without progress.
	DefaultIdleTimeout = 30 * time.Second
	// passphraseTimeout is how long netserver -Z waits for the passphrase.
	passphraseTimeout = 20 * time.Second
	// classicRRIdle ends a classic RR test once its timer has passed and the
	// client has stopped sending: the classic client keeps the data
	// connection open until it has the results, so there is no EOF to wait
	// for (stock netserver waits for its full padded timer instead).
	classicRRIdle = time.Second
)

// ListenFunc opens a data listener, with net.Listen's meaning of network
// ("tcp4" or "tcp6") and address ("host:port", host may be empty).
type ListenFunc func(network, address string) (net.Listener, error)

// ListenPacketFunc opens a UDP data socket, with net.ListenPacket's meaning
// of network ("udp4" or "udp6") and address.
type ListenPacketFunc func(network, address string) (net.PacketConn, error)

// Server answers netperf 2.7 clients: omni (DO_OMNI) TCP_STREAM, TCP_MAERTS
// and TCP_RR, the classic DO_TCP_STREAM/MAERTS/RR requests, PASSPHRASE,
// DEBUG, CPU_CALIBRATE and SYSINFO. The zero value serves on kernel sockets.
type Server struct {
	// Listen opens each test's data listener; nil means net.Listen (kernel
	// sockets). A node passes its userspace stack's listen function.
	Listen ListenFunc
	// ListenPacket opens each UDP test's data socket; nil means
	// net.ListenPacket (kernel sockets).
	ListenPacket ListenPacketFunc
	// Passphrase, when non-empty, must be the first message of every
	// control connection (netserver -Z); a mismatch closes the connection.
	Passphrase string
	// Logger receives one line per control connection event; nil means
	// slog.Default().
	Logger *slog.Logger
	// ControlTimeout bounds each control read and write; 0 means
	// DefaultControlTimeout.
	ControlTimeout time.Duration
	// IdleTimeout ends a data phase without a timer after this long without
	// progress; 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// TransportInfo reads a data connection that is not a kernel socket
	// (the userspace stack's) for the results' congestion control and
	// retransmissions; nil: only kernel sockets tell.
	TransportInfo TransportInfoFunc

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

func (s *Server) controlTimeout() time.Duration {
	if s.ControlTimeout > 0 {
		return s.ControlTimeout
	}
	return DefaultControlTimeout
}

func (s *Server) idleTimeout() time.Duration {
	if s.IdleTimeout > 0 {
		return s.IdleTimeout
	}
	return DefaultIdleTimeout
}

func (s *Server) listen(network, addr string) (net.Listener, error) {
	if s.Listen != nil {
		return s.Listen(network, addr)
	}
	return net.Listen(network, addr)
}

// Serve accepts control connections on ln and serves each in its own
// goroutine until ctx is done or ln fails. It closes ln and every open
// control connection before returning, and waits for their goroutines.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
	})
	defer stop()
	defer wg.Wait()
	s.logger().Info("netserver listening", "addr", ln.Addr().String())
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			ln.Close()
			return err
		}
		s.track(c, true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.track(c, false)
			s.ServeConn(ctx, c)
		}()
	}
}

func (s *Server) track(c net.Conn, add bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.conns == nil {
			s.conns = make(map[net.Conn]struct{})
		}
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
	}
}

// ServeConn serves one control connection until the client closes it, sends
// something this server refuses, or a deadline passes. It always closes c.
func (s *Server) ServeConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	log := s.logger().With("client", c.RemoteAddr().String())
	needPass := s.Passphrase != ""
	var m Message
	for tests := 0; ; {
		if ctx.Err() != nil {
			return
		}
		if !s.readControl(c, &m, needPass, log, tests) {
			return
		}
		req, _ := ParseRequest(m[:]) // cannot fail: m is MessageSize bytes
		if needPass {
			if req.Type != TypePassphrase || req.Passphrase != s.Passphrase {
				log.Warn("passphrase mismatch, closing", "type", int32(req.Type))
				return
			}
			needPass = false
			continue
		}
		if !s.serveRequest(c, req, log, &tests) {
			return
		}
	}
}

// readControl reads the next control message into m, within the control
// timeout (the passphrase's, shorter, while needPass); false: the
// connection is to be closed (the client closed it, a short message, a
// failed read), logged with the tests served so far.
func (s *Server) readControl(c net.Conn, m *Message, needPass bool, log *slog.Logger, tests int) bool {
	timeout := s.controlTimeout()
	if needPass {
		timeout = min(timeout, passphraseTimeout)
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	n, err := io.ReadFull(c, m[:])
	switch {
	case err == io.EOF:
		log.Debug("control connection closed by client", "tests", tests)
		return false
	case errors.Is(err, io.ErrUnexpectedEOF):
		log.Warn("short control message, closing", "got_bytes", n, "want_bytes", MessageSize)
		return false
	case err != nil:
		log.Warn("control read failed, closing", "err", err, "got_bytes", n)
		return false
	}
	return true
}

// serveRequest answers one control request (a test counted in *tests);
// false: the connection is to be closed.
func (s *Server) serveRequest(c net.Conn, req Request, log *slog.Logger, tests *int) bool {
	var r Message
	switch req.Type {
	case TypePassphrase:
		// Never reply: the client would take the reply for the next
		// setup response. A server without -Z ignores it.
		return true
	case TypeDoOmni:
		*tests++
		if err := s.runOmni(c, req.Omni, log); err != nil {
			log.Warn("omni test failed, closing", "err", err)
			return false
		}
		return true
	case TypeDoTCPStream, TypeDoTCPMaerts, TypeDoTCPRR, TypeDoTCPCC:
		*tests++
		if err := s.runClassic(c, req.Classic, log); err != nil {
			log.Warn("classic test failed, closing", "err", err)
			return false
		}
		return true
	case TypeDebugOn, TypeDebugOff:
		r.header(TypeDebugOK, 0)
	case TypeCPUCalibrate:
		r.header(TypeCPUCalibrate, 0)
		r.putF32(8, CPUTicksPerSecond)
		r.putI32(12, int32(numCPUs()))
	case TypeDoSysinfo:
		r.header(TypeSysinfoResponse, 0)
		copy(r[8:], ",Deprecated,Deprecated,Deprecated,Deprecated")
	default:
		log.Warn("unknown control message type, closing", "type", int32(req.Type))
		r.header(req.Type, ErrnoUnknownRequest)
		_ = s.reply(c, &r)
		return false
	}
	return s.reply(c, &r) == nil
}

// reply writes one control message with a write deadline.
func (s *Server) reply(c net.Conn, m *Message) error {
	_ = c.SetWriteDeadline(time.Now().Add(s.controlTimeout()))
	_, err := c.Write(m[:])
	return err
}

func numCPUs() int {
	if snap, err := TakeCPUSnapshot(); err == nil {
		return len(snap)
	}
	return 1
}

// errnoOf maps an error to the errno a client sees in serv_errno.
func errnoOf(err error) int32 {
	var en syscall.Errno
	if errors.As(err, &en) {
		return int32(en)
	}
	return ErrnoInvalid
}

// width is netperf's send/recv ring width: echoed when the client gave one,
// else buffer/message + 1.
func width(req uint32, buf, size int32) int32 {
	if req > 0 {
		return int32(req)
	}
	if buf > 0 && size > 0 {
		return buf/size + 1
	}
	return 1
}

// dataListen opens the data listener for family fam on (ip, port) and
// applies the requested socket buffer sizes before any connection arrives.
func (s *Server) dataListen(fam uint32, ip netip.Addr, port uint32, sndbuf, rcvbuf int32) (net.Listener, int32, int32, error) {
	network, addr := dataAddr("tcp", fam, ip, port)
	ln, err := s.listen(network, addr)
	if err != nil {
		return nil, 0, 0, err
	}
	setBufSizes(ln, sndbuf, rcvbuf)
	snd, rcv, _ := bufSizes(ln)
	return ln, snd, rcv, nil
}

// dataAddr is the network (proto with the family's 4 or 6) and the
// address (ip, any when not valid, and port) of a data socket.
func dataAddr(proto string, fam uint32, ip netip.Addr, port uint32) (network, addr string) {
	network = proto + "4"
	if fam == FamilyIPv6 {
		network = proto + "6"
	}
	host := ""
	if ip.IsValid() {
		host = ip.String()
	}
	return network, net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// listenerPort is the port a data listener is bound to. It reads the port
// from the address value, not its string: a userspace-stack listener bound
// to "any" prints its address as ":N", which netip cannot parse (stock
// netperf then got data port 0 and its SYN was reset).
func listenerPort(ln net.Listener) uint32 {
	return addrPort(ln.Addr())
}

// addrPort returns the port of a TCP or UDP address, 0 when there is none.
func addrPort(a net.Addr) uint32 {
	switch a := a.(type) {
	case *net.TCPAddr:
		return uint32(a.Port)
	case *net.UDPAddr:
		return uint32(a.Port)
	}
	if _, p, err := net.SplitHostPort(a.String()); err == nil {
		if n, err := strconv.ParseUint(p, 10, 16); err == nil {
			return uint32(n)
		}
	}
	return 0
}

// runOmni runs one DO_OMNI test: setup response, data phase, results.
func (s *Server) runOmni(ctl net.Conn, r *OmniRequest, log *slog.Logger) error {
	var setup OmniSetup
	var m Message
	if err := r.Validate(); err != nil {
		setup.Errno = ErrnoInvalid
		if r.IPFamily != FamilyIPv4 && r.IPFamily != FamilyIPv6 {
			setup.Errno = ErrnoAFNoSupport
		}
		setup.Marshal(&m)
		_ = s.reply(ctl, &m)
		return fmt.Errorf("invalid DO_OMNI: %w", err)
	}
	// The data socket: a listener for TCP, a bound socket for UDP.
	var ln net.Listener
	var pc net.PacketConn
	var sock any
	var lsnd, lrcv int32
	var err error
	if r.IsUDP() {
		pc, lsnd, lrcv, err = s.dataListenUDP(r.IPFamily, r.NetserverIP, r.DataPort, r.SendBufSize, r.RecvBufSize)
		sock = pc
	} else {
		ln, lsnd, lrcv, err = s.dataListen(r.IPFamily, r.NetserverIP, r.DataPort, r.SendBufSize, r.RecvBufSize)
		sock = ln
	}
	if err != nil {
		setup.Errno = errnoOf(err)
		setup.Marshal(&m)
		_ = s.reply(ctl, &m)
		return fmt.Errorf("data listen: %w", err)
	}
	dataPort := uint32(0)
	if pc != nil {
		defer pc.Close()
		dataPort = addrPort(pc.LocalAddr())
	} else {
		defer ln.Close()
		dataPort = listenerPort(ln)
	}

	spec, setup := omniSpec(r, sock, lsnd, lrcv, dataPort)
	meter := startCPU(r.Flags&FlagMeasureCPU != 0)
	if meter != nil {
		setup.Flags |= FlagMeasureCPU
		setup.CPURate = CPUTicksPerSecond
	}
	setup.Marshal(&m)
	if err := s.reply(ctl, &m); err != nil {
		return fmt.Errorf("send setup response: %w", err)
	}
	var st dataStats
	switch {
	case spec.udp:
		st, err = s.runUDP(pc, spec)
	case spec.connect:
		st, err = s.runConnect(ln, spec)
	default:
		st, err = s.runData(ln, spec, r.Flags&FlagRoutingAllowed != 0)
	}
	if err != nil {
		log.Info("data phase ended early", "err", err)
	}
	if spec.udp {
		st.retrans = -1 // netserver's transport_retrans for a non-TCP socket
	}
	res := omniResultsOf(st, meter)
	res.Marshal(&m)
	if err := s.reply(ctl, &m); err != nil {
		return fmt.Errorf("send results: %w", err)
	}
	log.Info("omni test done", "direction", r.Direction, "rr", spec.rr, "udp", spec.udp, "connect", spec.connect,
		"bytes_received", st.bytesRecv, "bytes_sent", st.bytesSent, "transactions", st.trans,
		"elapsed", st.elapsed.Round(time.Millisecond))
	return nil
}

// omniSpec is the data phase a DO_OMNI request asks for and the setup
// response that answers it, for the data socket sock (its buffer sizes
// lsnd, lrcv) listening on dataPort.
func omniSpec(r *OmniRequest, sock any, lsnd, lrcv int32, dataPort uint32) (dataSpec, OmniSetup) {
	spec := dataSpec{
		udp:        r.IsUDP(),
		connect:    r.Flags&FlagConnectTest != 0,
		sends:      r.Direction&DirServerSends != 0,
		receives:   r.Direction&DirServerReceives != 0,
		rr:         r.IsRR(),
		testLength: r.TestLength,
		noDelay:    r.Flags&FlagNoDelay != 0,
		cong:       r.CongControl,
	}
	if spec.rr {
		spec.recvSize, spec.sendSize = r.RequestSize, r.ResponseSize
	} else {
		csnd, crcv := callSizes(sock, r.IsUDP(), lsnd, lrcv, r.SendBufSize, r.RecvBufSize)
		spec.recvSize = pickSize(r.ReceiveSize, crcv)
		spec.sendSize = pickSize(r.SendSize, csnd)
	}
	setup := OmniSetup{
		RecvBufSize: lrcv,
		ReceiveSize: r.ReceiveSize,
		RecvWidth:   width(r.RecvWidth, lrcv, spec.recvSize),
		SendBufSize: lsnd,
		SendSize:    r.SendSize,
		SendWidth:   width(r.SendWidth, lsnd, spec.sendSize),
		Flags:       r.Flags & FlagNoDelay,
		SoRcvAvoid:  r.SoRcvAvoid,
		SoSndAvoid:  r.SoSndAvoid,
		DataPort:    dataPort,
		SocketPrio:  r.SocketPrio,
		SocketTOS:   r.SocketTOS,
	}
	if spec.receives {
		setup.ReceiveSize = spec.recvSize
	}
	if spec.sends {
		setup.SendSize = spec.sendSize
	}
	return spec, setup
}

// omniResultsOf is the results message of a finished omni data phase.
func omniResultsOf(st dataStats, meter *cpuMeter) OmniResults {
	res := OmniResults{
		BytesReceived:    st.bytesRecv,
		RecvCalls:        st.recvCalls,
		RecvBufSize:      st.rcvbuf,
		BytesSent:        st.bytesSent,
		SendCalls:        st.sendCalls,
		SendBufSize:      st.sndbuf,
		TransReceived:    st.trans,
		ElapsedTime:      float32(st.elapsed.Seconds()),
		TransportRetrans: st.retrans,
		CongControl:      st.cong,
	}
	if u, ok := meter.stop(); ok {
		res.CPUUtil, res.CPUUser, res.CPUSystem = u.Util, u.User, u.System
		res.CPUIOWait, res.CPUIRQ, res.CPUSoftIRQ = u.IOWait, u.IRQ, u.SoftIRQ
		res.CPUMethod, res.NumCPUs = CPUMethodProcStat, uint32(u.NumCPUs)
		res.PeakCPUID, res.PeakCPUUtil = int32(u.PeakCPU), u.PeakUtil
	}
	return res
}

// runClassic runs one classic DO_TCP_STREAM / DO_TCP_MAERTS / DO_TCP_RR.
func (s *Server) runClassic(ctl net.Conn, r *ClassicRequest, log *slog.Logger) error {
	setup := ClassicSetup{Test: r.Test}
	var m Message
	if err := r.Validate(); err != nil {
		setup.Errno = ErrnoInvalid
		setup.Marshal(&m)
		_ = s.reply(ctl, &m)
		return fmt.Errorf("invalid classic request: %w", err)
	}
	ln, lsnd, lrcv, err := s.dataListen(uint32(r.IPFamily), netip.Addr{}, uint32(r.Port), r.SendBufSize, r.RecvBufSize)
	if err != nil {
		setup.Errno = errnoOf(err)
		setup.Marshal(&m)
		_ = s.reply(ctl, &m)
		return fmt.Errorf("data listen: %w", err)
	}
	defer ln.Close()
	spec := classicSpec(r, ln, lsnd, lrcv, &setup)
	setup.RecvBufSize, setup.SendBufSize = lrcv, lsnd
	setup.NoDelay, setup.TestLength = r.NoDelay, r.TestLength
	if r.Test == ClassicCC {
		setup.TestLength = 0 // stock's TCP_CC reply leaves it unset
	}
	setup.SoRcvAvoid, setup.SoSndAvoid = r.SoRcvAvoid, r.SoSndAvoid
	setup.DataPort = int32(listenerPort(ln))
	meter := startCPU(r.MeasureCPU != 0)
	if meter != nil {
		setup.MeasureCPU, setup.CPURate = 1, CPUTicksPerSecond
	}
	setup.Marshal(&m)
	if err := s.reply(ctl, &m); err != nil {
		return fmt.Errorf("send setup response: %w", err)
	}
	var st dataStats
	if spec.connect {
		st, err = s.runConnect(ln, spec)
	} else {
		st, err = s.runData(ln, spec, false)
	}
	if err != nil {
		log.Info("data phase ended early", "err", err)
	}
	res := serverClassicResults(r, st)
	if u, ok := meter.stop(); ok {
		res.CPUUtil, res.CPUMethod, res.NumCPUs = u.Util, int32(CPUMethodProcStat), int32(u.NumCPUs)
	}
	res.Marshal(&m)
	if err := s.reply(ctl, &m); err != nil {
		return fmt.Errorf("send results: %w", err)
	}
	log.Info("classic test done", "test", r.Test, "bytes_received", st.bytesRecv,
		"bytes_sent", st.bytesSent, "transactions", st.trans, "elapsed", st.elapsed.Round(time.Millisecond))
	return nil
}

// classicSpec is the data phase of classic request r on listener ln (its
// socket buffers lsnd, lrcv), and the message size it sets in setup.
func classicSpec(r *ClassicRequest, ln net.Listener, lsnd, lrcv int32, setup *ClassicSetup) dataSpec {
	spec := dataSpec{testLength: r.TestLength, noDelay: r.NoDelay != 0}
	lsndCall, lrcvCall := callSizes(ln, false, lsnd, lrcv, r.SendBufSize, r.RecvBufSize)
	switch r.Test {
	case ClassicStream:
		spec.receives, spec.recvSize = true, pickSize(r.ReceiveSize, lrcvCall)
		setup.MsgSize = spec.recvSize
	case ClassicMaerts:
		spec.sends, spec.sendSize = true, pickSize(r.SendSize, lsndCall)
		setup.MsgSize = spec.sendSize
	case ClassicRR:
		spec.sends, spec.receives, spec.rr = true, true, true
		spec.recvSize, spec.sendSize = r.RequestSize, r.ResponseSize
		spec.classicRR = true
	case ClassicCC:
		spec.sends, spec.receives, spec.rr = true, true, true
		spec.recvSize, spec.sendSize = r.RequestSize, r.ResponseSize
		spec.connect, spec.connectOnly = true, true
	}
	return spec
}

// serverClassicResults is the results message of classic request r from the
// data phase's stats.
func serverClassicResults(r *ClassicRequest, st dataStats) ClassicResults {
	res := ClassicResults{
		Test: r.Test, ElapsedTime: float32(st.elapsed.Seconds()),
		RecvBufSize: st.rcvbuf, SendBufSize: st.sndbuf,
	}
	switch r.Test {
	case ClassicStream:
		res.Bytes, res.Calls = float64(st.bytesRecv), st.recvCalls
	case ClassicMaerts:
		res.Bytes, res.Calls = float64(st.bytesSent), st.sendCalls
	case ClassicRR:
		res.Bytes, res.Calls, res.TransReceived = float64(st.bytesRecv), st.recvCalls, st.trans
	case ClassicCC:
		// As netserver: the bytes a transaction would have moved.
		res.Bytes = float64(uint64(st.trans) * uint64(r.RequestSize+r.ResponseSize))
		res.TransReceived = st.trans
	}
	return res
}
