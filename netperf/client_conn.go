package netperf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// udpMaxPayload is the largest UDP payload netperf sends by default:
// 65535 less the IPv4 and UDP headers, for both families.
const udpMaxPayload = 0xffff - 28

// udpSendSize is stock's UDP_STREAM message size: -m if given, else the
// send buffer size capped to udpMaxPayload.
func udpSendSize(req, buf int32) int32 {
	if req > 0 {
		return req
	}
	if buf <= 0 {
		return 4096
	}
	return min(buf, udpMaxPayload)
}

// unitsName is what netperf prints for a -f letter ("" when unknown).
func unitsName(u byte) string {
	switch u {
	case 'k':
		return "10^3bits"
	case 'm':
		return "10^6bits"
	case 'g':
		return "10^9bits"
	case 'K':
		return "KBytes"
	case 'M':
		return "MBytes"
	case 'G':
		return "GBytes"
	}
	return ""
}

// throughputIn converts bytes over secs to the -f units.
func throughputIn(u byte, bytes, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	perSec := bytes / secs
	switch u {
	case 'k':
		return perSec * 8 / 1e3
	case 'g':
		return perSec * 8 / 1e9
	case 'K':
		return perSec / 1024
	case 'M':
		return perSec / (1 << 20)
	case 'G':
		return perSec / (1 << 30)
	}
	return perSec * 8 / 1e6
}

// endMarkers is how many empty datagrams end a UDP test (netperf sends
// several in case one is lost).
const endMarkers = 3

// runUDPClient runs UDP_STREAM (send datagrams for the test time or byte
// count) or UDP_RR on a connected UDP socket, then sends the empty
// datagrams that end the server's test.
func runUDPClient(c net.Conn, p dataPlan, start time.Time, timeout time.Duration) (clientData, error) {
	var d clientData
	timed, end, limit := dataSpan(p, start)
	if !timed {
		end = time.Now().Add(timeout)
	}
	defer func() {
		_ = c.SetDeadline(time.Now().Add(timeout))
		for range endMarkers {
			_, _ = c.Write(nil)
		}
	}()
	run := udpRR
	if p.test == UDPStream {
		run = udpStream
	}
	if err := run(c, p, end, limit, &d); err != nil {
		return d, err
	}
	d.elapsed = time.Since(start)
	return d, nil
}

// udpStream sends UDP_STREAM's datagrams until end or limit bytes, timing
// each send call; a failed send is counted and the test goes on, as
// stock's, unless the route is refused.
func udpStream(c net.Conn, p dataPlan, end time.Time, limit uint64, d *clientData) error {
	buf := make([]byte, p.sendSize)
	p.fill.fill(buf)
	_ = c.SetWriteDeadline(end)
	d.lat = new(latencyHist) // the time of each send call
	for time.Now().Before(end) {
		t0 := time.Now()
		n, err := c.Write(buf)
		d.lat.add(time.Since(t0))
		if err != nil {
			if isTimeout(err) {
				break
			}
			if errors.Is(err, net.ErrClosed) {
				return err // closed under us: a signal stopped the test
			}
			if errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH) {
				// As stock's send_data: only ENOBUFS and ENOMEM are
				// failed sends to go on from; SO_DONTROUTE's refusal
				// of an off-link server ends the test.
				if p.dontRoute {
					return fmt.Errorf("%w (routing not allowed: -R 1 allows a gateway)", err)
				}
				return err
			}
			// ENOBUFS, ECONNREFUSED (an ICMP error for an earlier
			// datagram): netperf counts a failed send and goes on.
			d.sendErrors++
			continue
		}
		d.sent += uint64(n)
		d.sendCalls++
		p.interim.add(float64(n))
		if limit > 0 && d.sent >= limit {
			break
		}
	}
	return nil
}

// udpRR runs UDP_RR's transactions until end or limit transactions; a
// lost datagram waits for the end of the test, or with -e for the
// receive timeout.
func udpRR(c net.Conn, p dataPlan, end time.Time, limit uint64, d *clientData) error {
	req := make([]byte, p.reqSize)
	resp := make([]byte, max(p.respSize, udpMaxPayload))
	p.fill.fill(req)
	_ = c.SetDeadline(end)
	d.lat = new(latencyHist)
	for {
		t0 := time.Now()
		if !t0.Before(end) {
			break
		}
		if _, err := c.Write(req); err != nil {
			if isTimeout(err) {
				break
			}
			return err
		}
		d.sent += uint64(len(req))
		d.sendCalls++
		if p.recvTimeout > 0 {
			_ = c.SetReadDeadline(minTime(end, time.Now().Add(p.recvTimeout)))
		}
		n, err := c.Read(resp)
		if err != nil {
			if isTimeout(err) && p.recvTimeout > 0 && time.Now().Before(end) {
				// -e: the response is given up, the interval so far
				// reported and the next request sent, as stock.
				d.recvTimeouts++
				p.interim.reset()
				continue
			}
			if isTimeout(err) {
				break // a lost datagram waits for the end of the test, as stock
			}
			return err
		}
		d.received += uint64(n)
		d.recvCalls++
		if d.countTransaction(p, t0, limit) {
			break
		}
	}
	return nil
}

// runConnectClient runs TCP_CRR (connect, request, response, wait for the
// server's close, close) or TCP_CC (connect, wait for the server's close,
// close) transactions, one connection each, for the test time or count.
func runConnectClient(ctx context.Context, cfg *Config, addr string, p dataPlan, start time.Time, timeout time.Duration) (clientData, error) {
	var d clientData
	timed, end, limit := dataSpan(p, start)
	if !timed {
		end = time.Now().Add(timeout)
	}
	req := make([]byte, p.reqSize)
	resp := make([]byte, p.respSize)
	p.fill.fill(req)
	tctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	d.lat = new(latencyHist)
	ports := &clientPorts{min: cfg.ClientPortMin, max: cfg.ClientPortMax}
	_, sport, _ := net.SplitHostPort(addr)
	serverPort, _ := strconv.Atoi(sport)
	for {
		t0 := time.Now()
		if !t0.Before(end) {
			break
		}
		c, err := dialConnectTest(tctx, cfg, addr, ports, serverPort)
		if err != nil {
			if ctx.Err() == nil && (tctx.Err() != nil || isTimeout(err) || !time.Now().Before(end)) {
				break // the test time ran out while connecting
			}
			return d, fmt.Errorf("connect %s: %w", addr, err)
		}
		stop := context.AfterFunc(ctx, func() { c.Close() }) // a signal ends it at once
		ok, err := connectTransaction(c, p, req, resp, end, &d)
		stop()
		c.Close()
		if err != nil {
			return d, err
		}
		if !ok {
			break
		}
		if d.countTransaction(p, t0, limit) {
			break
		}
	}
	d.elapsed = time.Since(start)
	return d, nil
}

// dialConnectTest opens one connection of a TCP_CRR or TCP_CC test: with
// cfg.ConnectDial from the next of ports, going on to the port after it
// while the kernel (or stack) says the port or its 4-tuple is still in use,
// as stock netperf does; else with cfg.DataDial.
func dialConnectTest(ctx context.Context, cfg *Config, addr string, ports *clientPorts, serverPort int) (net.Conn, error) {
	if cfg.ConnectDial == nil {
		return cfg.DataDial(ctx, "tcp", addr)
	}
	const tries = 64 // then give up: something other than TIME_WAIT is wrong
	var err error
	for range tries {
		var c net.Conn
		if c, err = cfg.ConnectDial(ctx, cfg.network("tcp"), addr, ports.next(serverPort)); err == nil {
			return c, nil
		}
		if !transientBindError(err) {
			break
		}
	}
	return nil, err
}

// connectTransaction runs one CRR or CC transaction on c; ok is false when
// the test time ran out in the middle of it.
func connectTransaction(c net.Conn, p dataPlan, req, resp []byte, end time.Time, d *clientData) (ok bool, err error) {
	_ = c.SetDeadline(end)
	if p.test == TCPCRR {
		if _, err := c.Write(req); err != nil {
			if isTimeout(err) {
				return false, nil
			}
			return false, err
		}
		d.sent += uint64(len(req))
		if _, err := io.ReadFull(c, resp); err != nil {
			if isTimeout(err) {
				return false, nil
			}
			return false, err
		}
		d.received += uint64(len(resp))
	}
	// Wait for the server's close before ours, without a half-close, as
	// stock netperf's send_omni_inner (disconnect_data_socket with
	// initiate 0: a recv that must return 0) and send_tcp_cc do: stock
	// netserver closes after the response (TCP_CC: at once), so the
	// server holds TIME_WAIT. Our FIN goes out only after the server's,
	// so a peer whose TIME_WAIT table is full (it keeps no state for the
	// closed connection) answers it with a RST to a socket already
	// closed. A RST instead of the server's FIN still ends the wait: the
	// server has closed, as the VMWARE_UW branch of stock's legacy
	// send_tcp_conn_rr counts it (stock's omni client exits on it).
	if _, err := io.Copy(io.Discard, c); err != nil {
		if isTimeout(err) {
			return false, nil
		}
		if !errors.Is(err, syscall.ECONNRESET) {
			return false, err
		}
	}
	return true, nil
}

// interimReporter prints netperf's -D interim results while a test runs.
type interimReporter struct {
	w     io.Writer
	every time.Duration
	units byte
	rr    bool
	mode  OmniMode
	last  time.Time
	acc   float64 // bytes, or transactions, since the last report
	count int     // the [n] of the next -k line set
}

// newInterim returns the -D reporter of cfg, nil when -D is off.
func newInterim(cfg *Config, start time.Time) *interimReporter {
	if cfg.Interim <= 0 || cfg.InterimOut == nil {
		return nil
	}
	// Stock counts an RR test's transactions into its interim rate, named
	// "Trans" unless -f chose units: then the count goes through the -f
	// conversion as if it were bytes (calc_thruput_interval), as stock.
	return &interimReporter{w: cfg.InterimOut, every: cfg.Interim, units: cfg.units(),
		rr: cfg.Test.IsRR() && !cfg.bandUnits(), mode: cfg.InterimMode, last: start}
}

// add counts n bytes (or transactions) and prints a line when an interval
// has passed, in stock's words.
func (ir *interimReporter) add(n float64) {
	if ir == nil {
		return
	}
	ir.acc += n
	if now := time.Now(); now.Sub(ir.last) >= ir.every {
		ir.emit(now)
	}
}

// reset prints what the interval so far holds and starts a new one, as
// stock's demo_reset after a UDP_RR receive timeout.
func (ir *interimReporter) reset() {
	if ir != nil {
		ir.emit(time.Now())
	}
}

// final prints the last, shorter interval if it counted anything, as
// stock's demo_interval_final at the end of the data phase.
func (ir *interimReporter) final() {
	if ir != nil && ir.acc > 0 {
		ir.emit(time.Now())
	}
}

// emit prints the interval ending now in the layout of stock's
// demo_interval_display for the output mode.
func (ir *interimReporter) emit(now time.Time) {
	secs := now.Sub(ir.last).Seconds()
	rate, name := 0.0, "Trans"
	if secs > 0 {
		rate = ir.acc / secs
	}
	if !ir.rr {
		rate, name = throughputIn(ir.units, ir.acc, secs), unitsName(ir.units)
	}
	ms := now.UnixMilli()
	end := fmt.Sprintf("%d.%03d", ms/1000, ms%1000)
	switch ir.mode {
	case OmniCSV:
		fmt.Fprintf(ir.w, "%7.2f,%s/s,%.3f,%s\n", rate, name, secs, end)
	case OmniKeyval:
		n := ir.count
		fmt.Fprintf(ir.w, "NETPERF_INTERIM_RESULT[%d]=%.2f\nNETPERF_UNITS[%d]=%s/s\nNETPERF_INTERVAL[%d]=%.3f\nNETPERF_ENDING[%d]=%s\n",
			n, rate, n, name, n, secs, n, end)
		ir.count++
	default:
		fmt.Fprintf(ir.w, "Interim result: %7.2f %s/s over %.3f seconds ending at %s\n", rate, name, secs, end)
	}
	ir.acc, ir.last = 0, now
}

// routingAllowed is stock's routing_allowed: -R 1 or 0, else allowed
// except for UDP_STREAM, which stock keeps on the link unless -R 1.
func (c *Config) routingAllowed() bool {
	if c.Routing != 0 {
		return c.Routing > 0
	}
	return c.Test != UDPStream
}

// dontRoute keeps a UDP data socket on the link, as stock's SO_DONTROUTE
// does: on a kernel socket the option itself (each send off the link
// then fails with ENETUNREACH); on another stack's, the test is refused
// at once when cfg.OnLink says the server is behind a gateway.
func dontRoute(cfg *Config, u *udpPeer) error {
	if _, kernel := u.PacketConn.(rawConner); kernel {
		setDontRoute(u.PacketConn)
		return nil
	}
	if dst := u.to.(*net.UDPAddr).AddrPort().Addr(); cfg.OnLink != nil && !cfg.OnLink(dst) {
		return fmt.Errorf("send to %v: %w (routing not allowed, as stock for %s: -R 1 allows a gateway)", dst, syscall.ENETUNREACH, cfg.Test)
	}
	return nil
}

// udpPeer is an unconnected UDP socket used as a net.Conn to one server:
// Write sends to it, Read takes a datagram from any address, as stock
// netperf's recvfrom does.
type udpPeer struct {
	net.PacketConn
	to net.Addr
}

func (u *udpPeer) Write(b []byte) (int, error) { return u.WriteTo(b, u.to) }
func (u *udpPeer) Read(b []byte) (int, error) {
	n, _, err := u.ReadFrom(b)
	return n, err
}
func (u *udpPeer) RemoteAddr() net.Addr { return u.to }

// udpPeerConn opens the UDP data socket of cfg towards host:port.
func udpPeerConn(cfg *Config, network, host string, port uint32) (net.Conn, error) {
	var to *net.UDPAddr
	if a, err := netip.ParseAddr(host); err == nil {
		to = net.UDPAddrFromAddrPort(netip.AddrPortFrom(a.Unmap(), uint16(port)))
	} else {
		r, err := net.ResolveUDPAddr(network, net.JoinHostPort(host, strconv.Itoa(int(port))))
		if err != nil {
			return nil, err
		}
		to = r
	}
	if network == "udp" {
		network = "udp6"
		if to.AddrPort().Addr().Is4() {
			network = "udp4"
		}
	}
	local := net.JoinHostPort(cfg.LocalDataAddr, strconv.Itoa(cfg.LocalDataPort))
	listen := cfg.ListenPacket
	if listen == nil {
		listen = net.ListenPacket
	}
	pc, err := listen(network, local)
	if err != nil {
		return nil, err
	}
	return &udpPeer{PacketConn: pc, to: to}, nil
}
