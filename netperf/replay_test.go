package netperf_test

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/netperf"
)

// ctlExchange sends m and, when want, reads one reply.
func ctlExchange(t *testing.T, c net.Conn, m *netperf.Message, want bool) *netperf.Message {
	t.Helper()
	if _, err := c.Write(m[:]); err != nil {
		t.Fatalf("write request: %v", err)
	}
	if !want {
		return nil
	}
	r := new(netperf.Message)
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(c, r[:]); err != nil {
		t.Fatalf("read reply: %v", err)
	}
	return r
}

// TestServerReplay feeds each captured client message stream to our server,
// plays the client's part of the data phase and checks every reply field
// the stock client reads.
func TestServerReplay(t *testing.T) {
	tests := []struct {
		run  string
		pass string // server -Z
	}{
		{"tcp_stream", ""}, {"tcp_stream_cpu", ""}, {"tcp_stream_opts", ""},
		{"tcp_maerts", ""}, {"tcp_maerts_cpu", ""},
		{"tcp_rr", ""}, {"tcp_rr_cpu", ""}, {"tcp_rr_trans", ""}, {"tcp_rr_iter3", ""},
		{"tcp_rr_explicit_v4", ""}, {"tcp_rr_explicit_v6", ""},
		{"passphrase", "s3cret"}, {"passphrase_wrong", "s3cret"}, // the client sent "wrong"
		{"classic_tcp_stream", ""}, {"classic_tcp_stream_cpu", ""}, {"classic_tcp_maerts", ""}, {"classic_tcp_rr", ""},
	}
	for _, tc := range tests {
		t.Run(tc.run, func(t *testing.T) {
			t.Parallel()
			if strings.Contains(tc.run, "v6") {
				if ln, err := net.Listen("tcp6", "[::1]:0"); err != nil {
					t.Skipf("no IPv6 loopback: %v", err)
				} else {
					ln.Close()
				}
			}
			msgs := readVector(t, tc.run+"_client_to_server.hex")
			addr, logs := startServer(t, &netperf.Server{Passphrase: tc.pass})
			ctl, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer ctl.Close()
			for i, m := range msgs {
				req, err := netperf.ParseRequest(m[:])
				if err != nil {
					t.Fatalf("message %d: %v", i, err)
				}
				switch {
				case req.Type == netperf.TypePassphrase:
					ctlExchange(t, ctl, m, false)
				case tc.run == "passphrase_wrong":
					ctlExchange(t, ctl, m, false)
					_ = ctl.SetReadDeadline(time.Now().Add(10 * time.Second))
					if n, err := ctl.Read(make([]byte, 1)); err == nil {
						t.Fatalf("got %d bytes after a wrong passphrase, want the connection closed", n)
					}
					if !strings.Contains(logs.String(), "passphrase mismatch") {
						t.Errorf("no log line for the wrong passphrase:\n%s", logs.String())
					}
				case req.Omni != nil:
					replayOmni(t, ctl, m, req.Omni)
				case req.Classic != nil:
					replayClassic(t, ctl, m, req.Classic)
				}
			}
		})
	}
}

func dataDial(t *testing.T, ctl net.Conn, ip string, port uint32) net.Conn {
	t.Helper()
	if ip == "" {
		ip, _, _ = net.SplitHostPort(ctl.RemoteAddr().String())
	}
	c, err := net.Dial("tcp", net.JoinHostPort(ip, strconv.Itoa(int(port))))
	if err != nil {
		t.Fatalf("data connect to port %d: %v", port, err)
	}
	return c
}

// playData plays the client's data phase; it returns bytes sent, bytes
// received and transactions.
func playData(t *testing.T, c net.Conn, dir string, req, resp int) (sent, recvd, trans uint64) {
	t.Helper()
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	switch dir {
	case "stream":
		buf := make([]byte, 10000)
		for i := 0; i < 20; i++ {
			n, err := c.Write(buf)
			sent += uint64(n)
			if err != nil {
				t.Fatalf("data write: %v", err)
			}
		}
		c.(*net.TCPConn).CloseWrite()
		n, _ := io.Copy(io.Discard, c)
		recvd = uint64(n)
	case "maerts":
		n, err := io.Copy(io.Discard, c)
		if err != nil {
			t.Fatalf("data read: %v", err)
		}
		recvd = uint64(n)
	case "rr":
		q, r := make([]byte, req), make([]byte, resp)
		for trans = 0; trans < 50; trans++ {
			if _, err := c.Write(q); err != nil {
				t.Fatalf("rr write: %v", err)
			}
			if _, err := io.ReadFull(c, r); err != nil {
				t.Fatalf("rr read: %v", err)
			}
			sent += uint64(req)
			recvd += uint64(resp)
		}
		c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, c)
	}
	return
}

func replayOmni(t *testing.T, ctl net.Conn, m *netperf.Message, r *netperf.OmniRequest) {
	reply := ctlExchange(t, ctl, m, true)
	var s netperf.OmniSetup
	s.Unmarshal(reply)
	if got := reply.Type(); got != netperf.TypeOmniResponse {
		t.Errorf("setup: got type %d, want %d", got, netperf.TypeOmniResponse)
	}
	if s.Errno != 0 || s.DataPort == 0 {
		t.Fatalf("setup: got errno %d port %d, want 0 and a port", s.Errno, s.DataPort)
	}
	if r.DataPort != 0 && s.DataPort != r.DataPort {
		t.Errorf("setup: got data port %d, want the requested %d", s.DataPort, r.DataPort)
	}
	if s.RecvBufSize <= 0 || s.SendBufSize <= 0 {
		t.Errorf("setup: got socket sizes send %d recv %d, want > 0", s.SendBufSize, s.RecvBufSize)
	}
	if r.RecvBufSize > 0 && s.RecvBufSize < r.RecvBufSize {
		t.Errorf("setup: got recv_buf_size %d, want >= requested %d", s.RecvBufSize, r.RecvBufSize)
	}
	if got, want := s.Flags&netperf.FlagMeasureCPU, r.Flags&netperf.FlagMeasureCPU; got != want {
		t.Errorf("setup: got MEASURE_CPU %#x, want %#x", got, want)
	}
	if got, want := s.Flags&netperf.FlagNoDelay, r.Flags&netperf.FlagNoDelay; got != want {
		t.Errorf("setup: got NO_DELAY %#x, want %#x", got, want)
	}
	if r.Flags&netperf.FlagMeasureCPU != 0 && s.CPURate != netperf.CPUTicksPerSecond {
		t.Errorf("setup: got cpu_rate %v, want %v", s.CPURate, netperf.CPUTicksPerSecond)
	}
	dir := map[uint32]string{4: "stream", 2: "maerts", 6: "rr"}[r.Direction]
	switch dir {
	case "stream":
		if s.ReceiveSize <= 0 {
			t.Errorf("setup: got receive_size %d, want > 0", s.ReceiveSize)
		}
	case "maerts":
		if s.SendSize <= 0 {
			t.Errorf("setup: got send_size %d, want > 0", s.SendSize)
		}
	case "rr":
		if s.ReceiveSize != r.RequestSize || s.SendSize != r.ResponseSize {
			t.Errorf("setup: got sizes %d,%d, want %d,%d", s.ReceiveSize, s.SendSize, r.RequestSize, r.ResponseSize)
		}
	}
	ip := ""
	if r.NetserverIP.IsValid() {
		ip = r.NetserverIP.String()
	}
	sent, recvd, trans := playData(t, dataDial(t, ctl, ip, s.DataPort), dir, int(r.RequestSize), int(r.ResponseSize))

	reply = new(netperf.Message)
	_ = ctl.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(ctl, reply[:]); err != nil {
		t.Fatalf("read results: %v", err)
	}
	var res netperf.OmniResults
	res.Unmarshal(reply)
	if res.Errno != 0 {
		t.Errorf("results: got errno %d, want 0", res.Errno)
	}
	if res.BytesReceived != sent || res.BytesSent != recvd {
		t.Errorf("results: got bytes received %d sent %d, want %d and %d", res.BytesReceived, res.BytesSent, sent, recvd)
	}
	if dir == "rr" && uint64(res.TransReceived) != trans {
		t.Errorf("results: got trans_received %d, want %d", res.TransReceived, trans)
	}
	if res.ElapsedTime <= 0 {
		t.Errorf("results: got elapsed %v, want > 0", res.ElapsedTime)
	}
	if r.Flags&netperf.FlagMeasureCPU != 0 {
		if res.CPUMethod != netperf.CPUMethodProcStat || res.NumCPUs == 0 || res.CPUUtil < 0 || res.CPUUtil > 100 {
			t.Errorf("results: got cpu method %d ncpu %d util %v, want 8, >0, 0..100", res.CPUMethod, res.NumCPUs, res.CPUUtil)
		}
	} else if res.CPUMethod != 0 {
		t.Errorf("results: got cpu method %d without -C, want 0", res.CPUMethod)
	}
	if r.Flags&netperf.FlagRoutingAllowed != 0 && res.CongControl == "" {
		t.Errorf("results: got no cong_control, want the kernel's algorithm")
	}
}

func replayClassic(t *testing.T, ctl net.Conn, m *netperf.Message, r *netperf.ClassicRequest) {
	reply := ctlExchange(t, ctl, m, true)
	var s netperf.ClassicSetup
	s.Unmarshal(reply, r.Test)
	if s.Errno != 0 || s.DataPort == 0 {
		t.Fatalf("setup: got errno %d port %d, want 0 and a port", s.Errno, s.DataPort)
	}
	if s.RecvBufSize <= 0 || s.SendBufSize <= 0 {
		t.Errorf("setup: got socket sizes %d/%d, want > 0", s.SendBufSize, s.RecvBufSize)
	}
	if got, want := s.MeasureCPU, r.MeasureCPU; got != want {
		t.Errorf("setup: got measure_cpu %d, want %d", got, want)
	}
	if s.TestLength != r.TestLength {
		t.Errorf("setup: got test_length %d, want echo %d", s.TestLength, r.TestLength)
	}
	dir := map[netperf.ClassicTest]string{netperf.ClassicStream: "stream", netperf.ClassicMaerts: "maerts", netperf.ClassicRR: "rr"}[r.Test]
	if dir != "rr" && s.MsgSize <= 0 {
		t.Errorf("setup: got message size %d, want > 0", s.MsgSize)
	}
	data := dataDial(t, ctl, "", uint32(s.DataPort))
	var sent, recvd, trans uint64
	if dir == "rr" {
		// The classic RR client keeps the data connection open until it
		// has the results.
		q, rr := make([]byte, r.RequestSize), make([]byte, r.ResponseSize)
		for ; trans < 50; trans++ {
			data.Write(q)
			if _, err := io.ReadFull(data, rr); err != nil {
				t.Fatalf("rr read: %v", err)
			}
			sent += uint64(len(q))
		}
		defer data.Close()
	} else {
		sent, recvd, trans = playData(t, data, dir, 0, 0)
	}
	reply = new(netperf.Message)
	_ = ctl.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(ctl, reply[:]); err != nil {
		t.Fatalf("read results: %v", err)
	}
	var res netperf.ClassicResults
	res.Unmarshal(reply, r.Test)
	want := sent
	if dir == "maerts" {
		want = recvd
	}
	if res.Errno != 0 || uint64(res.Bytes) != want {
		t.Errorf("results: got errno %d bytes %v, want 0 and %d", res.Errno, res.Bytes, want)
	}
	if dir == "rr" && uint64(res.TransReceived) != trans {
		t.Errorf("results: got trans %d, want %d", res.TransReceived, trans)
	}
	if r.MeasureCPU != 0 && (res.CPUMethod != int32(netperf.CPUMethodProcStat) || res.NumCPUs <= 0) {
		t.Errorf("results: got cpu method %d ncpu %d, want 8 and > 0", res.CPUMethod, res.NumCPUs)
	}
}

// readOutput returns a stock netperf output without the capture's rc line.
func readOutput(t *testing.T, run string) string {
	b, err := os.ReadFile(filepath.Join(vectorsDir, "decoded", run+".netperf_output.txt"))
	if err != nil {
		t.Skipf("vectors not available: %v", err)
	}
	return strings.TrimSuffix(string(b), "netperf rc=0\n")
}
