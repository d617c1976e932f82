package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/link/pipe"

	"github.com/mplsnode/mplsnode/netperf"
	"github.com/mplsnode/mplsnode/stack"
)

// The --config netserver and client run on the userspace stack. These tests
// put them on two stacks joined by an in-process wire (no root needed):
// client stack A (172.16.30.1, fd00:30::1), server stack B (172.16.30.2,
// fd00:30::2), the server listening on "any", as `netserver --config` does.

var (
	stackClientV4 = netip.MustParseAddr("172.16.30.1")
	stackServerV4 = netip.MustParseAddr("172.16.30.2")
	stackClientV6 = netip.MustParseAddr("fd00:30::1")
	stackServerV6 = netip.MustParseAddr("fd00:30::2")
)

// stackPair builds the two stacks.
func stackPair(t *testing.T) (client, server *stack.Stack) {
	t.Helper()
	la, lb := pipe.New(tcpip.LinkAddress("\x02\x00\x00\x00\x30\x01"), tcpip.LinkAddress("\x02\x00\x00\x00\x30\x02"), 1500)
	mk := func(name string, ep *pipe.Endpoint, v4, v6 netip.Addr) *stack.Stack {
		s, err := stack.New(stack.Config{
			Links: []stack.Link{{Name: name, Kind: stack.LinkEndpoint, Endpoint: ep}},
			Addresses: []stack.Address{
				{Link: name, Prefix: netip.PrefixFrom(v4, 24)},
				{Link: name, Prefix: netip.PrefixFrom(v6, 64)},
			},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatalf("stack.New(%s): %v", name, err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	server = mk("b0", lb, stackServerV4, stackServerV6)
	client = mk("a0", la, stackClientV4, stackClientV6)
	return client, server
}

// stackServerAddr is the server stack's address of family fam
// (netperf.FamilyIPv4 or netperf.FamilyIPv6).
func stackServerAddr(fam uint32) netip.Addr {
	if fam == netperf.FamilyIPv6 {
		return stackServerV6
	}
	return stackServerV4
}

// startStackServer runs a netperf Server on srv's stack, control port on
// "any" (both families), data listeners from the stack, as `netserver
// --config` wires it. It returns the control port and the server's log.
func startStackServer(t *testing.T, srv *stack.Stack) (int, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	s := &netperf.Server{
		Listen:        srv.Listen,
		ListenPacket:  srv.ListenPacket,
		TransportInfo: srv.TransportInfo,
		Logger:        slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	ln, err := srv.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	return serveNetperf(t, s, ln), logs
}

// serveNetperf serves netperf's control connections of s on ln until t
// ends, when Serve must return nil within 30 s; it returns ln's port.
func serveNetperf(t *testing.T, s *netperf.Server, ln net.Listener) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("Serve did not return")
		}
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// stockVectors is the folder of stock netperf 2.7.1's captures: ../shared
// beside the checkout (as in CI), or /work/shared.
func stockVectors(t *testing.T) string {
	for _, d := range []string{"../../../shared/netperf/vectors", "/work/shared/netperf/vectors"} {
		if _, err := os.Stat(d); err == nil {
			return d
		}
	}
	t.Skip("stock netperf vectors not available")
	return ""
}

// stockMessages reads the control messages of one capture.
func stockMessages(t *testing.T, name string) []*netperf.Message {
	t.Helper()
	f, err := os.Open(filepath.Join(stockVectors(t), name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*netperf.Message
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		b, err := hex.DecodeString(line)
		if err != nil || len(b) != netperf.MessageSize {
			t.Fatalf("%s: bad line", name)
		}
		m := new(netperf.Message)
		copy(m[:], b)
		out = append(out, m)
	}
	return out
}

// setFamily rewrites a captured DO_OMNI's ipfamily word (offset 92): the
// stock client sends 6 when it talks IPv6, nothing else changes.
func setFamily(m *netperf.Message, fam uint32) {
	m[92], m[93], m[94], m[95] = 0, 0, 0, byte(fam)
}

// dialFunc opens a connection, as net.Dialer.DialContext.
type dialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// connectTransactions is how many connections a replayed TCP_CRR or
// TCP_CC makes: the capture's -l 2 is rewritten to -l -20 (count-based),
// so the server ends on the count instead of its padded 6 s timer.
const connectTransactions = 20

// stockPlay plays the stock client's part of one omni test whose setup
// reply gave port: the data phase, then the results. It checks what the
// server reported against what it did.
func stockPlay(t *testing.T, ctx context.Context, dial dialFunc, ctl net.Conn, srvIP netip.Addr, req *netperf.OmniRequest, port uint32) netperf.OmniResults {
	t.Helper()
	to := net.JoinHostPort(srvIP.String(), strconv.Itoa(int(port)))
	var sent, recvd, trans uint64
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	switch {
	case req.IsUDP():
		sent, recvd, trans = playUDP(t, dctx, dial, to, req)
	case req.Flags&netperf.FlagConnectTest != 0:
		trans = playConnect(t, dctx, dial, to, int(req.RequestSize), int(req.ResponseSize))
		sent, recvd = trans*uint64(req.RequestSize), trans*uint64(req.ResponseSize)
	default:
		sent, recvd, trans = playTCP(t, dctx, dial, to, req)
	}
	var m netperf.Message
	_ = ctl.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(ctl, m[:]); err != nil {
		t.Fatalf("read results: %v", err)
	}
	var res netperf.OmniResults
	res.Unmarshal(&m)
	if res.Errno != 0 {
		t.Fatalf("results: errno %d", res.Errno)
	}
	switch {
	case req.IsUDP() && req.IsRR():
		if uint64(res.TransReceived) != trans || res.BytesReceived != sent {
			t.Errorf("results: server counted %d transactions, %d bytes; we made %d, sent %d", res.TransReceived, res.BytesReceived, trans, sent)
		}
	case req.IsUDP():
		// Datagrams may be lost, never invented.
		if res.BytesReceived == 0 || res.BytesReceived > sent || uint64(res.RecvCalls)*1000 != res.BytesReceived {
			t.Errorf("results: server received %d bytes in %d calls; we sent %d in 1000-byte datagrams", res.BytesReceived, res.RecvCalls, sent)
		}
	case req.Direction == netperf.DirServerReceives:
		if res.BytesReceived != sent {
			t.Errorf("results: server received %d bytes, we sent %d", res.BytesReceived, sent)
		}
	case req.Direction == netperf.DirServerSends:
		if res.BytesSent < recvd || recvd == 0 {
			t.Errorf("results: server sent %d bytes, we received %d", res.BytesSent, recvd)
		}
	default:
		if uint64(res.TransReceived) != trans || res.BytesReceived != sent || res.BytesSent != recvd {
			t.Errorf("results: server counted %d transactions, %d/%d bytes; we made %d, %d/%d", res.TransReceived, res.BytesReceived, res.BytesSent, trans, sent, recvd)
		}
	}
	if req.IsUDP() && res.TransportRetrans != -1 {
		t.Errorf("results: transport_retrans %d for UDP, want -1 as stock", res.TransportRetrans)
	}
	return res
}

// dialData opens the data socket of a test (network tcp or udp) to the
// server's data port to, its deadline within from now.
func dialData(t *testing.T, ctx context.Context, dial dialFunc, network, to string, within time.Duration) net.Conn {
	t.Helper()
	c, err := dial(ctx, network, to)
	if err != nil {
		t.Fatalf("%s data socket to %s: %v", network, to, err)
	}
	_ = c.SetDeadline(time.Now().Add(within))
	return c
}

// playTCP plays a STREAM, MAERTS or RR data phase on one connection.
func playTCP(t *testing.T, ctx context.Context, dial dialFunc, to string, req *netperf.OmniRequest) (sent, recvd, trans uint64) {
	t.Helper()
	data := dialData(t, ctx, dial, "tcp", to, 30*time.Second)
	defer data.Close()
	switch req.Direction {
	case netperf.DirServerReceives:
		buf := make([]byte, 16384)
		for i := 0; i < 64; i++ {
			n, err := data.Write(buf)
			sent += uint64(n)
			if err != nil {
				t.Fatalf("data write: %v", err)
			}
		}
	case netperf.DirServerSends:
		// Read until the server's timer ends the test (it closes first,
		// so its side of the connection goes to TIME_WAIT).
		n, err := io.Copy(io.Discard, data)
		if err != nil {
			t.Fatalf("data read: %v", err)
		}
		recvd = uint64(n)
	default:
		q, r := make([]byte, req.RequestSize), make([]byte, req.ResponseSize)
		for ; trans < 50; trans++ {
			if _, err := data.Write(q); err != nil {
				t.Fatalf("rr write: %v", err)
			}
			if _, err := io.ReadFull(data, r); err != nil {
				t.Fatalf("rr read: %v", err)
			}
			sent += uint64(len(q))
			recvd += uint64(len(r))
		}
	}
	data.(interface{ CloseWrite() error }).CloseWrite()
	_, _ = io.Copy(io.Discard, data)
	return sent, recvd, trans
}

// playUDP plays UDP_STREAM (64 datagrams of 1000 bytes) or UDP_RR (50
// transactions), then the empty datagrams that end the test.
func playUDP(t *testing.T, ctx context.Context, dial dialFunc, to string, req *netperf.OmniRequest) (sent, recvd, trans uint64) {
	t.Helper()
	c := dialData(t, ctx, dial, "udp", to, 20*time.Second)
	defer c.Close()
	if req.IsRR() {
		q, r := make([]byte, req.RequestSize), make([]byte, 65535)
		for ; trans < 50; trans++ {
			if _, err := c.Write(q); err != nil {
				t.Fatalf("udp rr write: %v", err)
			}
			n, err := c.Read(r)
			if err != nil || n != int(req.ResponseSize) {
				t.Fatalf("udp rr read: %d bytes, %v; want %d", n, err, req.ResponseSize)
			}
			sent += uint64(len(q))
			recvd += uint64(n)
		}
	} else {
		buf := make([]byte, 1000)
		for i := 0; i < 64; i++ {
			if _, err := c.Write(buf); err != nil {
				t.Fatalf("udp write: %v", err)
			}
			sent += uint64(len(buf))
			time.Sleep(time.Millisecond) // no receive buffer overflow
		}
	}
	// The first ends the test; the server may be gone for the others
	// (ECONNREFUSED), as stock ignores.
	if _, err := c.Write(nil); err != nil {
		t.Fatalf("end-of-test datagram: %v", err)
	}
	c.Write(nil)
	c.Write(nil)
	return sent, recvd, trans
}

// playConnect makes connectTransactions connections: TCP_CRR (request,
// response, half-close, drain) or, with reqSize 0, TCP_CC (wait for the
// server's close).
func playConnect(t *testing.T, ctx context.Context, dial dialFunc, to string, reqSize, respSize int) (trans uint64) {
	t.Helper()
	for ; trans < connectTransactions; trans++ {
		c, err := dial(ctx, "tcp", to)
		if err != nil {
			t.Fatalf("connection %d to %s: %v", trans, to, err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if reqSize > 0 {
			if _, err := c.Write(make([]byte, reqSize)); err != nil {
				t.Fatalf("crr write: %v", err)
			}
			if _, err := io.ReadFull(c, make([]byte, respSize)); err != nil {
				t.Fatalf("crr read: %v", err)
			}
			c.(interface{ CloseWrite() error }).CloseWrite()
		}
		if n, err := io.Copy(io.Discard, c); err != nil || n != 0 {
			t.Fatalf("connection %d: got %d bytes, %v; want the server's close", trans, n, err)
		}
		c.Close()
	}
	return trans
}

// replayRun is one stock capture to replay: its client messages, played
// repeat times on one control connection.
type replayRun struct {
	run    string
	repeat int
}

// stockReplayRuns are the captures replayed against both servers.
var stockReplayRuns = []replayRun{
	{"tcp_stream", 1}, {"tcp_maerts", 1}, {"tcp_rr", 1}, {"tcp_rr_iter3", 1},
	{"tcp_stream_ci", 1}, {"tcp_stream_opts", 1},
	// -i 3,3 -I 99,5: iterations 2 and 3 ask for the data port of the
	// first, which our server closed first (TIME_WAIT): the stack's
	// listeners need address reuse (without it: errno 98).
	{"tcp_maerts", 3},
	{"udp_stream", 1}, {"udp_stream_opts", 1}, {"udp_rr", 1}, {"udp_rr_v6", 1},
	{"tcp_crr", 1}, {"tcp_cc", 1},
}

// replayStock replays one capture against the server at srvIP:port.
func replayStock(t *testing.T, dial dialFunc, srvIP netip.Addr, port int, tc replayRun, fam uint32, logs *lockedBuffer) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctl, err := dial(ctx, "tcp", net.JoinHostPort(srvIP.String(), strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("control connect: %v", err)
	}
	defer ctl.Close()
	var msgs []*netperf.Message
	for range tc.repeat {
		msgs = append(msgs, stockMessages(t, tc.run+"_client_to_server.hex")...)
	}
	var prevPort uint32
	for i, m := range msgs {
		m := *m
		if m.Type() == netperf.TypeDoTCPCC {
			replayClassicCC(t, ctx, dial, ctl, srvIP, &m, fam)
			continue
		}
		setFamily(&m, fam)
		var req netperf.OmniRequest
		req.Unmarshal(&m)
		if req.DataPort != 0 || (tc.repeat > 1 && i > 0) {
			// Iterations 2+ ask for the previous data port again.
			req.DataPort = prevPort
		}
		if req.NetserverIP.IsValid() {
			req.NetserverIP = srvIP // the capture's -- -H named its server
		}
		if req.Flags&netperf.FlagConnectTest != 0 {
			req.TestLength = -connectTransactions
		}
		if req.Direction == netperf.DirServerSends && req.TestLength > 1 {
			req.TestLength = 1 // MAERTS runs the server's timer: 1 s will do
		}
		req.Marshal(&m)
		if _, err := ctl.Write(m[:]); err != nil {
			t.Fatal(err)
		}
		var r netperf.Message
		_ = ctl.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadFull(ctl, r[:]); err != nil {
			t.Fatalf("message %d: read setup: %v\n%s", i, err, logs.String())
		}
		var s netperf.OmniSetup
		s.Unmarshal(&r)
		if s.Errno != 0 || s.DataPort == 0 {
			t.Fatalf("message %d: setup errno %d, data port %d; want 0 and a port\n%s", i, s.Errno, s.DataPort, logs.String())
		}
		if req.DataPort != 0 && s.DataPort != req.DataPort {
			t.Errorf("message %d: data port %d, want the requested %d", i, s.DataPort, req.DataPort)
		}
		if s.RecvBufSize <= 0 || s.SendBufSize <= 0 {
			t.Errorf("message %d: socket sizes send %d recv %d, want > 0", i, s.SendBufSize, s.RecvBufSize)
		}
		if req.RecvBufSize > 0 && s.RecvBufSize < req.RecvBufSize {
			t.Errorf("message %d: recv socket size %d, want at least the requested %d (-S)", i, s.RecvBufSize, req.RecvBufSize)
		}
		if req.Direction == netperf.DirServerSends && s.SendSize != 16384 {
			t.Errorf("message %d: MAERTS send size %d, want stock's 16384", i, s.SendSize)
		}
		prevPort = s.DataPort
		stockPlay(t, ctx, dial, ctl, srvIP, &req, s.DataPort)
	}
}

// replayClassicCC plays a classic DO_TCP_CC: stock runs TCP_CC with it even
// in the omni build.
func replayClassicCC(t *testing.T, ctx context.Context, dial dialFunc, ctl net.Conn, srvIP netip.Addr, m *netperf.Message, fam uint32) {
	t.Helper()
	var req netperf.ClassicRequest
	if err := req.Unmarshal(m); err != nil || req.Test != netperf.ClassicCC {
		t.Fatalf("not a TCP_CC request: %v", err)
	}
	req.IPFamily = int32(fam)
	req.TestLength = -connectTransactions
	req.Marshal(m)
	if _, err := ctl.Write(m[:]); err != nil {
		t.Fatal(err)
	}
	var r netperf.Message
	_ = ctl.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(ctl, r[:]); err != nil {
		t.Fatalf("read setup: %v", err)
	}
	var s netperf.ClassicSetup
	s.Unmarshal(&r, netperf.ClassicCC)
	if r.Type() != netperf.TypeTCPCCResponse || s.Errno != 0 || s.DataPort == 0 || s.RecvBufSize <= 0 || s.SendBufSize <= 0 {
		t.Fatalf("setup: type %d errno %d port %d sizes %d/%d; want 301, 0, a port, sizes", r.Type(), s.Errno, s.DataPort, s.SendBufSize, s.RecvBufSize)
	}
	trans := playConnect(t, ctx, dial, net.JoinHostPort(srvIP.String(), strconv.Itoa(int(s.DataPort))), 0, 0)
	if _, err := io.ReadFull(ctl, r[:]); err != nil {
		t.Fatalf("read results: %v", err)
	}
	var res netperf.ClassicResults
	res.Unmarshal(&r, netperf.ClassicCC)
	if res.Errno != 0 || uint64(res.TransReceived) != trans || uint64(res.Bytes) != 2*trans {
		t.Errorf("results: errno %d, %d transactions, %v bytes; want 0, %d, %d (netserver counts request+response sizes)", res.Errno, res.TransReceived, res.Bytes, trans, 2*trans)
	}
}

// TestStackServerStockClient replays stock netperf's captured requests
// against the --config server (userspace stack, listening on "any") from
// another userspace stack, over IPv4 and IPv6. Every setup reply carries a
// real data port (stock leaves the request's server address zero; the
// listener's address then printed as ":N" and the server answered port 0:
// planting that parse back makes every case fail at "data port 0") and the
// socket sizes the stack uses (they were 0; planting that fails
// tcp_stream_opts).
func TestStackServerStockClient(t *testing.T) {
	a, b := stackPair(t)
	port, logs := startStackServer(t, b)
	for _, fam := range []uint32{netperf.FamilyIPv4, netperf.FamilyIPv6} {
		srvIP := stackServerAddr(fam)
		for _, tc := range stockReplayRuns {
			t.Run(tc.run+"x"+strconv.Itoa(tc.repeat)+"/"+map[uint32]string{4: "ipv4", 6: "ipv6"}[fam], func(t *testing.T) {
				replayStock(t, a.DialContext, srvIP, port, tc, fam, logs)
			})
		}
	}
}

// TestKernelServerStockClient replays the same captures against the
// --kernel server on loopback, IPv4 and IPv6.
func TestKernelServerStockClient(t *testing.T) {
	logs := &lockedBuffer{}
	port := startKernelServer(t, ":0", logs)
	var d net.Dialer
	for _, fam := range []uint32{netperf.FamilyIPv4, netperf.FamilyIPv6} {
		srvIP := netip.MustParseAddr("127.0.0.1")
		if fam == netperf.FamilyIPv6 {
			if l6, err := net.Listen("tcp6", "[::1]:0"); err != nil {
				t.Logf("no IPv6 loopback: %v", err)
				continue
			} else {
				l6.Close()
			}
			srvIP = netip.IPv6Loopback()
		}
		for _, tc := range stockReplayRuns {
			t.Run(tc.run+"x"+strconv.Itoa(tc.repeat)+"/"+map[uint32]string{4: "ipv4", 6: "ipv6"}[fam], func(t *testing.T) {
				replayStock(t, d.DialContext, srvIP, port, tc, fam, logs)
			})
		}
	}
}

// TestStackClientAndServer runs our client on one userspace stack against
// the --config server on the other, every test, IPv4 and IPv6: counts
// agree with the server's and the printed socket sizes are the stack's
// (they printed 0).
func TestStackClientAndServer(t *testing.T) {
	a, b := stackPair(t)
	port, logs := startStackServer(t, b)
	for _, fam := range []uint32{netperf.FamilyIPv4, netperf.FamilyIPv6} {
		srvIP := stackServerAddr(fam)
		for _, test := range netperf.Tests {
			t.Run(string(test)+"/"+map[uint32]string{4: "ipv4", 6: "ipv6"}[fam], func(t *testing.T) {
				cfg := netperf.NewConfig(srvIP.String(), test)
				cfg.Port, cfg.Dial, cfg.ListenPacket = port, a.DialContext, a.ListenPacket
				cfg.Length = 1
				if test == netperf.TCPCRR || test == netperf.TCPCC {
					cfg.Length = -100 // the server would answer after its padded timer
				}
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				rep, err := netperf.Run(ctx, cfg)
				if err != nil {
					t.Fatalf("Run: %v\n%s", err, logs.String())
				}
				r := rep.Result
				switch {
				case test == netperf.TCPStream:
					if r.BytesSent == 0 || r.RemoteBytesReceived != r.BytesSent {
						t.Errorf("sent %d bytes, server received %d", r.BytesSent, r.RemoteBytesReceived)
					}
				case test == netperf.TCPMaerts:
					if r.BytesReceived == 0 || r.BytesReceived > r.RemoteBytesSent {
						t.Errorf("received %d bytes, server sent %d", r.BytesReceived, r.RemoteBytesSent)
					}
				case test == netperf.UDPStream:
					if r.RemoteBytesReceived == 0 || r.RemoteBytesReceived > r.BytesSent {
						t.Errorf("sent %d bytes, server received %d", r.BytesSent, r.RemoteBytesReceived)
					}
				default:
					if r.Transactions == 0 || r.RemoteTransactions < r.Transactions || r.RemoteTransactions > r.Transactions+1 {
						t.Errorf("%d transactions here, %d at the server", r.Transactions, r.RemoteTransactions)
					}
				}
				if r.LocalSendBuf <= 0 || r.LocalRecvBuf <= 0 || r.RemoteSendBuf <= 0 || r.RemoteRecvBuf <= 0 {
					t.Errorf("socket sizes local %d/%d remote %d/%d, want > 0", r.LocalSendBuf, r.LocalRecvBuf, r.RemoteSendBuf, r.RemoteRecvBuf)
				}
				var out strings.Builder
				_ = rep.WriteText(&out, true)
				t.Logf("\n%s", out.String())
			})
		}
	}
}
