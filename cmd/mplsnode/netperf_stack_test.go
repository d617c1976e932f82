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

// startStackServer runs a netperf Server on srv's stack, control port on
// "any" (both families), data listeners from the stack, as `netserver
// --config` wires it. It returns the control port and the server's log.
func startStackServer(t *testing.T, srv *stack.Stack) (int, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	s := &netperf.Server{
		Listen:       srv.Listen,
		ListenPacket: srv.ListenPacket,
		Logger:       slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	ln, err := srv.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	port := int(ln.Addr().(*net.TCPAddr).Port)
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
	return port, logs
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

// stockPlay plays the stock client's part of one test whose setup reply
// gave port: the data phase on A, then the results. It returns what the
// server reported.
func stockPlay(t *testing.T, ctx context.Context, a *stack.Stack, ctl net.Conn, srvIP netip.Addr, req *netperf.OmniRequest, port uint32) netperf.OmniResults {
	t.Helper()
	to := net.JoinHostPort(srvIP.String(), strconv.Itoa(int(port)))
	var sent, recvd, trans uint64
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	data, err := a.DialContext(dctx, "tcp", to)
	if err != nil {
		t.Fatalf("data connect to %s: %v", to, err)
	}
	_ = data.SetDeadline(time.Now().Add(30 * time.Second))
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
		}
	}
	data.(interface{ CloseWrite() error }).CloseWrite()
	_, _ = io.Copy(io.Discard, data)
	data.Close()
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
	switch req.Direction {
	case netperf.DirServerReceives:
		if res.BytesReceived != sent {
			t.Errorf("results: server received %d bytes, we sent %d", res.BytesReceived, sent)
		}
	case netperf.DirServerSends:
		if res.BytesSent < recvd || recvd == 0 {
			t.Errorf("results: server sent %d bytes, we received %d", res.BytesSent, recvd)
		}
	default:
		if uint64(res.TransReceived) != trans {
			t.Errorf("results: server counted %d transactions, we made %d", res.TransReceived, trans)
		}
	}
	return res
}

// TestStackServerStockClient replays stock netperf's captured requests
// against the --config server (userspace stack, listening on "any") from
// another userspace stack, over IPv4 and IPv6: every setup reply carries a
// real data port (stock leaves the request's server address zero; the
// listener's address then printed as ":N" and the server answered port 0:
// planting that parse back makes every case fail at "data port 0") and the
// socket sizes the stack uses (they were 0).
func TestStackServerStockClient(t *testing.T) {
	a, b := stackPair(t)
	port, logs := startStackServer(t, b)
	for _, fam := range []uint32{netperf.FamilyIPv4, netperf.FamilyIPv6} {
		srvIP := stackServerV4
		if fam == netperf.FamilyIPv6 {
			srvIP = stackServerV6
		}
		for _, tc := range []struct {
			run    string
			repeat int // play the capture's requests this many times
		}{
			{"tcp_stream", 1}, {"tcp_maerts", 1}, {"tcp_rr", 1}, {"tcp_rr_iter3", 1},
			{"tcp_stream_ci", 1}, {"tcp_stream_opts", 1},
			// -i 3,3 -I 99,5: iterations 2 and 3 ask for the data port of
			// the first, which our server closed first (TIME_WAIT): the
			// stack's listeners need address reuse (without it: errno 98).
			{"tcp_maerts", 3},
		} {
			run := tc.run
			t.Run(run+"x"+strconv.Itoa(tc.repeat)+"/"+map[uint32]string{4: "ipv4", 6: "ipv6"}[fam], func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				ctl, err := a.DialContext(ctx, "tcp", net.JoinHostPort(srvIP.String(), strconv.Itoa(port)))
				if err != nil {
					t.Fatalf("control connect: %v", err)
				}
				defer ctl.Close()
				var prevPort uint32
				var msgs []*netperf.Message
				for range tc.repeat {
					msgs = append(msgs, stockMessages(t, run+"_client_to_server.hex")...)
				}
				for i, m := range msgs {
					m := *m
					setFamily(&m, fam)
					var req netperf.OmniRequest
					req.Unmarshal(&m)
					if req.DataPort != 0 || (tc.repeat > 1 && i > 0) {
						// Iterations 2+ ask for the previous data port again.
						req.DataPort = prevPort
						req.Marshal(&m)
					}
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
					if req.RecvBufSize > 0 && s.RecvBufSize != req.RecvBufSize {
						t.Errorf("message %d: recv socket size %d, want the requested %d (-S)", i, s.RecvBufSize, req.RecvBufSize)
					}
					if req.Direction == netperf.DirServerSends && s.SendSize != 16384 {
						t.Errorf("message %d: MAERTS send size %d, want stock's 16384", i, s.SendSize)
					}
					prevPort = s.DataPort
					stockPlay(t, ctx, a, ctl, srvIP, &req, s.DataPort)
				}
			})
		}
	}
}
