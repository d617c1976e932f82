package netperf

import (
	"bufio"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stockRequest reads the first client message of a stock capture.
func stockRequest(t *testing.T, run string) *Message {
	t.Helper()
	var f *os.File
	var err error
	for _, d := range []string{"../../shared/netperf/vectors", "/work/shared/netperf/vectors"} {
		if f, err = os.Open(filepath.Join(d, run+"_client_to_server.hex")); err == nil {
			break
		}
	}
	if err != nil {
		t.Skipf("vectors not available: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4096), 1<<20)
	if !sc.Scan() {
		t.Fatalf("%s: empty capture", run)
	}
	b, err := hex.DecodeString(strings.TrimSpace(sc.Text()))
	if err != nil || len(b) != MessageSize {
		t.Fatalf("%s: bad line", run)
	}
	m := new(Message)
	copy(m[:], b)
	return m
}

// TestRequestMatchesStock builds our client's first request for the
// arguments of each capture and requires it byte for byte equal to stock
// netperf's, except the client's own data port (netperf_port, which stock
// knows because it binds its UDP and CRR sockets first): the test type,
// socket type, protocol, direction, flags (ROUTING_ALLOWED cleared for
// UDP_STREAM, CONNECT_TEST for TCP_CRR), sizes and ring widths. (With the
// UDP_STREAM routing flag left set, or TCP_CRR's connect flag missing, it
// fails.)
func TestRequestMatchesStock(t *testing.T) {
	if s, r, ok := kernelDefaultBufSizes(); !ok || s != linuxDefaultSendBuf || r != linuxDefaultRecvBuf {
		t.Skipf("this host's TCP buffer defaults (%d/%d) are not the captures'", s, r)
	}
	if s, r := defaultUDPBufSizes(); s != linuxDefaultUDPBuf || r != linuxDefaultUDPBuf {
		t.Skipf("this host's UDP buffer defaults (%d/%d) are not the captures'", s, r)
	}
	tests := []struct {
		run string
		cfg func(c *Config)
	}{
		{"tcp_stream", nil},
		{"tcp_maerts", func(c *Config) { c.Test = TCPMaerts }},
		{"tcp_rr", func(c *Config) { c.Test = TCPRR }},
		{"tcp_stream_cpu", func(c *Config) { c.LocalCPU, c.RemoteCPU = true, true }},
		{"tcp_stream_opts", func(c *Config) {
			c.LocalSendSize, c.LocalSendBuf, c.LocalRecvBuf = 1400, 65536, 65536
			c.RemoteSendBuf, c.RemoteRecvBuf, c.NoDelay = 131072, 131072, true
		}},
		{"tcp_rr_trans", func(c *Config) { c.Test, c.Length, c.RequestSize, c.ResponseSize = TCPRR, -1000, 32, 64 }},
		{"udp_stream", func(c *Config) { c.Test = UDPStream }},
		{"udp_stream_opts", func(c *Config) { c.Test, c.LocalSendSize, c.Routing = UDPStream, 1024, 1 }},
		{"udp_rr", func(c *Config) { c.Test = UDPRR }},
		{"tcp_crr", func(c *Config) { c.Test = TCPCRR }},
	}
	for _, tc := range tests {
		t.Run(tc.run, func(t *testing.T) {
			want := stockRequest(t, tc.run)
			cfg := NewConfig("127.0.0.1", TCPStream)
			cfg.Length = 2
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			cfg.fill()
			lsnd, lrcv, plan := planFor(&cfg)
			req := omniRequest(&cfg, FamilyIPv4, lsnd, lrcv, plan)
			var got Message
			req.Marshal(&got)
			got.putU32(108, want.u32(108)) // netperf_port: stock's own data port
			for off := 0; off < MessageSize; off += 4 {
				if got.u32(off) != want.u32(off) {
					t.Errorf("offset %d: got %#x, stock sent %#x", off, got.u32(off), want.u32(off))
				}
			}
		})
	}
	t.Run("tcp_cc", func(t *testing.T) {
		want := stockRequest(t, "tcp_cc")
		cfg := NewConfig("127.0.0.1", TCPCC)
		cfg.Length = 2
		cfg.fill()
		req := classicRequest(&cfg, FamilyIPv4)
		var got Message
		req.Marshal(&got)
		if got != *want {
			for off := 0; off < MessageSize; off += 4 {
				if got.u32(off) != want.u32(off) {
					t.Errorf("offset %d: got %#x, stock sent %#x", off, got.u32(off), want.u32(off))
				}
			}
		}
	})
}
