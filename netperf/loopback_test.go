package netperf_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/netperf"
)

func loopbackConfig(t *testing.T, addr string, test netperf.TestType, length int) netperf.Config {
	h, p := hostPort(t, addr)
	cfg := netperf.NewConfig(h, test)
	cfg.Port = p
	cfg.Length = length
	return cfg
}

func runCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestLoopback(t *testing.T) {
	addr, _ := startServer(t, &netperf.Server{})
	tests := []struct {
		name    string
		test    netperf.TestType
		length  int
		classic bool
		cpu     bool
		mod     func(*netperf.Config)
	}{
		{name: "stream", test: netperf.TCPStream, length: 1},
		{name: "stream_cpu", test: netperf.TCPStream, length: 1, cpu: true},
		{name: "stream_opts", test: netperf.TCPStream, length: 1, mod: func(c *netperf.Config) {
			c.LocalSendSize, c.LocalSendBuf, c.LocalRecvBuf = 1400, 65536, 65536
			c.RemoteSendBuf, c.RemoteRecvBuf, c.NoDelay = 131072, 131072, true
		}},
		{name: "stream_bytes", test: netperf.TCPStream, length: -1000000},
		{name: "maerts", test: netperf.TCPMaerts, length: 1},
		{name: "maerts_cpu", test: netperf.TCPMaerts, length: 1, cpu: true},
		{name: "rr", test: netperf.TCPRR, length: 1},
		{name: "rr_cpu", test: netperf.TCPRR, length: 1, cpu: true},
		{name: "rr_trans", test: netperf.TCPRR, length: -1000, mod: func(c *netperf.Config) { c.RequestSize, c.ResponseSize = 32, 64 }},
		{name: "classic_stream", test: netperf.TCPStream, length: 1, classic: true},
		{name: "classic_maerts", test: netperf.TCPMaerts, length: 1, classic: true},
		{name: "classic_rr", test: netperf.TCPRR, length: 1, classic: true, cpu: true},
		{name: "udp_stream", test: netperf.UDPStream, length: 1},
		{name: "udp_stream_m", test: netperf.UDPStream, length: 1, mod: func(c *netperf.Config) { c.LocalSendSize = 1024 }},
		{name: "udp_rr", test: netperf.UDPRR, length: 1, cpu: true},
		{name: "udp_rr_trans", test: netperf.UDPRR, length: -500, mod: func(c *netperf.Config) { c.RequestSize, c.ResponseSize = 32, 1024 }},
		{name: "crr", test: netperf.TCPCRR, length: -200},
		{name: "cc", test: netperf.TCPCC, length: -200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := loopbackConfig(t, addr, tc.test, tc.length)
			cfg.Classic = tc.classic
			cfg.LocalCPU, cfg.RemoteCPU = tc.cpu, tc.cpu
			if tc.mod != nil {
				tc.mod(&cfg)
			}
			rep, err := netperf.Run(runCtx(t), cfg)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			r := rep.Result
			if r.Throughput <= 0 {
				t.Errorf("got throughput %v, want > 0", r.Throughput)
			}
			switch tc.test {
			case netperf.TCPStream:
				if r.RemoteBytesReceived != r.BytesSent {
					t.Errorf("got server bytes_received %d, want client bytes sent %d", r.RemoteBytesReceived, r.BytesSent)
				}
				if tc.length < 0 && r.BytesSent != uint64(-tc.length) {
					t.Errorf("got %d bytes sent, want %d", r.BytesSent, -tc.length)
				}
			case netperf.TCPMaerts:
				// The client may stop on its timer with data in flight.
				if r.BytesReceived == 0 || r.BytesReceived > r.RemoteBytesSent {
					t.Errorf("got client bytes_received %d, server bytes_sent %d: want 0 < received <= sent", r.BytesReceived, r.RemoteBytesSent)
				}
			case netperf.UDPStream:
				// Datagrams may be lost, never invented.
				if r.RemoteBytesReceived == 0 || r.RemoteBytesReceived > r.BytesSent || r.SendCalls == 0 {
					t.Errorf("got %d bytes sent in %d messages, server received %d: want 0 < received <= sent", r.BytesSent, r.SendCalls, r.RemoteBytesReceived)
				}
				if r.RemoteRecvCalls*uint64(r.LocalSendSize) != r.RemoteBytesReceived {
					t.Errorf("server got %d messages, %d bytes: not whole %d-byte messages", r.RemoteRecvCalls, r.RemoteBytesReceived, r.LocalSendSize)
				}
			case netperf.UDPRR:
				// A timed UDP_RR may end with a response in flight: the
				// server counted it, the client's timer did not wait.
				if r.Transactions == 0 || r.RemoteTransactions < r.Transactions || r.RemoteTransactions > r.Transactions+1 {
					t.Errorf("got client transactions %d, server %d: want server = client (+1)", r.Transactions, r.RemoteTransactions)
				}
				if tc.length < 0 && r.Transactions != uint64(-tc.length) {
					t.Errorf("got %d transactions, want %d", r.Transactions, -tc.length)
				}
			case netperf.TCPRR, netperf.TCPCRR, netperf.TCPCC:
				if r.Transactions == 0 || r.RemoteTransactions != r.Transactions {
					t.Errorf("got client transactions %d, server %d: want equal and > 0", r.Transactions, r.RemoteTransactions)
				}
				if tc.length < 0 && r.Transactions != uint64(-tc.length) {
					t.Errorf("got %d transactions, want %d", r.Transactions, -tc.length)
				}
			}
			if tc.cpu {
				if r.LocalCPU < 0 || r.RemoteCPU < 0 || r.LocalServiceDemand < 0 || r.RemoteServiceDemand < 0 {
					t.Errorf("got CPU local %v remote %v sd %v/%v, want all >= 0", r.LocalCPU, r.RemoteCPU, r.LocalServiceDemand, r.RemoteServiceDemand)
				}
				if r.RemoteCPUMethod != netperf.CPUMethodProcStat {
					t.Errorf("got remote cpu method %d, want %d", r.RemoteCPUMethod, netperf.CPUMethodProcStat)
				}
			} else if r.LocalCPU != -1 || r.RemoteCPU != -1 {
				t.Errorf("got CPU %v/%v without -c -C, want -1/-1", r.LocalCPU, r.RemoteCPU)
			}
			if r.RemoteRecvBuf <= 0 || r.RemoteSendBuf <= 0 {
				t.Errorf("got remote socket sizes %d/%d, want > 0", r.RemoteSendBuf, r.RemoteRecvBuf)
			}
			var out strings.Builder
			if err := rep.WriteText(&out, true); err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", out.String())
		})
	}
}

func TestLoopbackIterations(t *testing.T) {
	addr, logs := startServer(t, &netperf.Server{})
	cfg := loopbackConfig(t, addr, netperf.TCPRR, 1)
	cfg.MaxIterations, cfg.MinIterations = 3, 3
	rep, err := netperf.Run(runCtx(t), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := len(rep.Iterations); got != 3 {
		t.Fatalf("got %d iterations, want 3", got)
	}
	for i, it := range rep.Iterations {
		if it.Transactions == 0 || it.Transactions != it.RemoteTransactions {
			t.Errorf("iteration %d: got transactions %d/%d, want equal and > 0", i, it.Transactions, it.RemoteTransactions)
		}
	}
	if got := strings.Count(logs.String(), "omni test done"); got != 3 {
		t.Errorf("got %d tests in server log, want 3 on one connection", got)
	}
	var out strings.Builder
	_ = rep.WriteText(&out, true)
	if !strings.Contains(out.String(), ": +/-2.500% @ 99% conf.  : demo : first burst 0\n") {
		t.Errorf("banner lacks the confidence clause:\n%s", out.String())
	}
}

func TestLoopbackPassphrase(t *testing.T) {
	addr, logs := startServer(t, &netperf.Server{Passphrase: "s3cret"})
	tests := []struct {
		name string
		pass string
		ok   bool
	}{
		{"right", "s3cret", true},
		{"wrong", "wrong", false},
		{"missing", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := loopbackConfig(t, addr, netperf.TCPRR, -100)
			cfg.Passphrase = tc.pass
			rep, err := netperf.Run(runCtx(t), cfg)
			if tc.ok {
				if err != nil || rep.Result.Transactions != 100 {
					t.Fatalf("got err %v, want 100 transactions", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got success with passphrase %q, want an error", tc.pass)
			}
			var re *netperf.RemoteError
			if errors.As(err, &re) {
				t.Errorf("got remote error %v, want the connection closed without reply", err)
			}
		})
	}
	if !strings.Contains(logs.String(), "passphrase mismatch") {
		t.Errorf("server log lacks the passphrase mismatch line:\n%s", logs.String())
	}
}

// TestLoopbackConnectPorts runs TCP_CRR and TCP_CC with a ConnectDial on
// kernel sockets (SO_REUSEADDR, as stock's data sockets) over a port
// range of 40 (the test-specific -p min,max, below the kernel's ephemeral
// ports) for 100 connections: every connection is tried from the port
// after the previous try, wrapping from max-1 to min, so ports whose
// earlier connection sits in TIME_WAIT are used again; a port another
// socket holds is skipped (EADDRINUSE), as stock netperf does. Planted
// bug: the connections dialled with DataDial (the kernel's ephemeral
// ports): none came through ConnectDial and the test failed.
func TestLoopbackConnectPorts(t *testing.T) {
	addr, _ := startServer(t, &netperf.Server{})
	for _, test := range []netperf.TestType{netperf.TCPCRR, netperf.TCPCC} {
		t.Run(string(test), func(t *testing.T) {
			const lo, hi = 20000, 20040
			cfg := loopbackConfig(t, addr, test, -100)
			cfg.ClientPortMin, cfg.ClientPortMax = lo, hi
			var tried []int
			connected := 0
			var mu sync.Mutex
			cfg.ConnectDial = func(ctx context.Context, network, address string, port int) (net.Conn, error) {
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}, Control: reuseAddr}
				c, err := d.DialContext(ctx, network, address)
				mu.Lock()
				tried = append(tried, port)
				if err == nil {
					connected++
				}
				mu.Unlock()
				return c, err
			}
			rep, err := netperf.Run(runCtx(t), cfg)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if rep.Result.Transactions != 100 || connected != 100 {
				t.Fatalf("%d transactions over %d connections, want 100 each", rep.Result.Transactions, connected)
			}
			for i, p := range tried {
				if p < lo || p >= hi {
					t.Fatalf("try %d from port %d, want %d..%d: %v", i+1, p, lo, hi-1, tried)
				}
				if i > 0 && p != tried[i-1]+1 && !(tried[i-1] == hi-1 && p == lo) {
					t.Fatalf("try %d from port %d after %d: want the next port: %v", i+1, p, tried[i-1], tried)
				}
			}
		})
	}
}

// reuseAddr sets SO_REUSEADDR, as stock netperf does on its data sockets.
func reuseAddr(network, address string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	}); err != nil {
		return err
	}
	return serr
}
