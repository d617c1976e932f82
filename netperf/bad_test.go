package netperf_test

import (
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/netperf"
)

// TestBadInput sends each malformed control exchange, checks the server
// closes the connection (after an errno reply where one makes sense) and
// logs it, then checks the same server still serves a full test.
func TestBadInput(t *testing.T) {
	good := readVector(t, "tcp_rr_client_to_server.hex")[0]
	mutate := func(f func(r *netperf.OmniRequest)) []byte {
		var r netperf.OmniRequest
		r.Unmarshal(good)
		f(&r)
		var m netperf.Message
		r.Marshal(&m)
		return m[:]
	}
	garbage := make([]byte, netperf.MessageSize)
	for i := range garbage {
		garbage[i] = byte(i*7 + 3)
	}
	tests := []struct {
		name      string
		send      []byte
		wantErrno int32 // 0: no reply expected
		hangUp    bool  // client closes right after sending
		log       string
	}{
		{name: "garbage", send: garbage, wantErrno: netperf.ErrnoUnknownRequest, log: "unknown control message type"},
		{name: "short", send: good[:100], hangUp: true, log: "short control message"},
		{name: "zero_alignment", send: mutate(func(r *netperf.OmniRequest) { r.SendAlign = 0 }), wantErrno: netperf.ErrnoInvalid, log: "alignment 0"},
		{name: "zero_request_size", send: mutate(func(r *netperf.OmniRequest) { r.Direction = 4; r.RequestSize = -1; r.ReceiveSize = 0 }), wantErrno: netperf.ErrnoInvalid, log: "receive_size 0"},
		{name: "zero_response_size", send: mutate(func(r *netperf.OmniRequest) { r.ResponseSize = 0 }), wantErrno: netperf.ErrnoInvalid, log: "response_size 0"},
		{name: "zero_family", send: mutate(func(r *netperf.OmniRequest) { r.IPFamily = 0 }), wantErrno: netperf.ErrnoAFNoSupport, log: "ipfamily 0"},
		{name: "zero_socket_type", send: mutate(func(r *netperf.OmniRequest) { r.SocketType = 0 }), wantErrno: netperf.ErrnoInvalid, log: "socket_type 0"},
		{name: "all_zero", send: mutate(func(r *netperf.OmniRequest) { *r = netperf.OmniRequest{} }), wantErrno: netperf.ErrnoAFNoSupport, log: "ipfamily 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr, logs := startServer(t, &netperf.Server{})
			c := dialControl(t, addr)
			if _, err := c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			if tc.hangUp {
				c.(*net.TCPConn).CloseWrite()
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			b, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("got %v, want the server to close the connection", err)
			}
			switch {
			case tc.wantErrno == 0 && len(b) != 0:
				t.Errorf("got %d reply bytes, want none", len(b))
			case tc.wantErrno != 0:
				if len(b) != netperf.MessageSize {
					t.Fatalf("got %d reply bytes, want one %d-byte message", len(b), netperf.MessageSize)
				}
				if got := (*netperf.Message)(b).Word1(); got != tc.wantErrno {
					t.Errorf("got serv_errno %d, want %d", got, tc.wantErrno)
				}
			}
			waitLog(t, logs, tc.log)
			checkStillServes(t, addr)
		})
	}
}

// dialControl connects to the server's control port at addr, with a
// deadline 10 s away for everything on the connection; the connection is
// closed when t ends, if the test has not closed it.
func dialControl(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// TestClientVanishes: the client asks for a test, then disappears without
// connecting the data socket; and a client dies mid-test.
func TestClientVanishes(t *testing.T) {
	addr, logs := startServer(t, &netperf.Server{IdleTimeout: time.Second})
	req := readVector(t, "tcp_rr_trans_client_to_server.hex")[0] // -l -1000: no timer
	t.Run("before_data_connect", func(t *testing.T) {
		c := dialControl(t, addr)
		c.Write(req[:])
		io.ReadFull(c, make([]byte, netperf.MessageSize))
		c.Close()
		waitLog(t, logs, "accept data connection")
		checkStillServes(t, addr)
	})
	t.Run("mid_test", func(t *testing.T) {
		c := dialControl(t, addr)
		c.Write(req[:])
		var m netperf.Message
		io.ReadFull(c, m[:])
		var s netperf.OmniSetup
		s.Unmarshal(&m)
		d, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", itoa(s.DataPort)))
		if err != nil {
			t.Fatal(err)
		}
		d.Write(make([]byte, 10)) // half a request of 32 bytes
		d.(*net.TCPConn).SetLinger(0)
		d.Close() // RST
		c.Close()
		waitLog(t, logs, "data phase ended early")
		checkStillServes(t, addr)
	})
	t.Run("silent_control", func(t *testing.T) {
		srvAddr, l2 := startServer(t, &netperf.Server{ControlTimeout: 500 * time.Millisecond})
		c := dialControl(t, srvAddr)
		c.Write(req[:10])
		waitLog(t, l2, "control read failed")
		checkStillServes(t, srvAddr)
	})
}

func itoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

func waitLog(t *testing.T, logs *logBuffer, want string) {
	t.Helper()
	for i := 0; i < 100; i++ {
		if strings.Contains(logs.String(), want) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("server log lacks %q:\n%s", want, logs.String())
}

// checkStillServes runs a short count-based TCP_RR against addr.
func checkStillServes(t *testing.T, addr string) {
	t.Helper()
	cfg := loopbackConfig(t, addr, netperf.TCPRR, -200)
	rep, err := netperf.Run(runCtx(t), cfg)
	if err != nil || rep.Result.Transactions != 200 {
		t.Fatalf("next client: got err %v, want 200 transactions", err)
	}
}

// TestConcurrentClients runs several clients at once against one server.
func TestConcurrentClients(t *testing.T) {
	addr, _ := startServer(t, &netperf.Server{})
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() {
			cfg := loopbackConfig(t, addr, netperf.TCPRR, -500)
			rep, err := netperf.Run(runCtx(t), cfg)
			if err == nil && rep.Result.RemoteTransactions != 500 {
				err = io.ErrShortWrite
			}
			errs <- err
		}()
	}
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Errorf("client: %v", err)
		}
	}
}
