package netperf_test

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/netperf"
)

// TestClientReplay answers our client with the stock netserver's recorded
// replies (only the data port is patched to a live listener) and checks
// the printed output against stock netperf's: identical header lines, the
// same columns, and the columns that come from the server equal to the
// recorded values.
func TestClientReplay(t *testing.T) {
	tests := []struct {
		run     string
		test    netperf.TestType
		cpu     bool
		classic bool
		// remote columns of the first data line: index -> want
		remote map[int]string
	}{
		{"tcp_stream", netperf.TCPStream, false, false, map[int]string{0: "131072"}},
		{"tcp_maerts", netperf.TCPMaerts, false, false, map[int]string{1: "16384", 2: "16384"}},
		{"tcp_stream_cpu", netperf.TCPStream, true, false, map[int]string{0: "131072", 6: "83.28"}},
		{"tcp_rr", netperf.TCPRR, false, false, nil},
		{"tcp_rr_cpu", netperf.TCPRR, true, false, map[int]string{7: "99.75"}},
		{"classic_tcp_stream", netperf.TCPStream, false, true, map[int]string{0: "131072"}},
		{"classic_tcp_maerts", netperf.TCPMaerts, false, true, map[int]string{1: "16384", 2: "16384"}},
		{"classic_tcp_rr", netperf.TCPRR, false, true, nil},
		{"udp_stream", netperf.UDPStream, false, false, nil},
		{"udp_rr", netperf.UDPRR, false, false, nil},
		{"tcp_crr", netperf.TCPCRR, false, false, nil},
		{"tcp_cc", netperf.TCPCC, false, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.run, func(t *testing.T) {
			replies := readVector(t, tc.run+"_server_to_client.hex")
			want := readOutput(t, tc.run)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go fakeNetserver(t, ln, replies, tc.test, tc.classic)
			cfg := loopbackConfig(t, ln.Addr().String(), tc.test, 1)
			cfg.Classic = tc.classic
			cfg.LocalCPU, cfg.RemoteCPU = tc.cpu, tc.cpu
			rep, err := netperf.Run(runCtx(t), cfg)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			var out strings.Builder
			_ = rep.WriteText(&out, true)
			got := strings.Split(out.String(), "\n")
			wl := strings.Split(want, "\n")
			if len(got) != len(wl) {
				t.Fatalf("got %d lines, want %d:\n%s", len(got), len(wl), out.String())
			}
			data := 0
			for i := range wl {
				if len(wl[i]) == 0 || wl[i][0] < '0' || wl[i][0] > '9' {
					if got[i] != wl[i] {
						t.Errorf("line %d:\n got %q\nwant %q", i, got[i], wl[i])
					}
					continue
				}
				gf, wf := strings.Fields(got[i]), strings.Fields(wl[i])
				if len(gf) != len(wf) {
					t.Errorf("line %d: got %d columns %q, want %d %q", i, len(gf), got[i], len(wf), wl[i])
					continue
				}
				if data == 0 {
					for col, w := range tc.remote {
						if gf[col] != w {
							t.Errorf("column %d: got %s, want the recorded %s", col, gf[col], w)
						}
					}
				} else if tc.test == netperf.UDPStream {
					// Line 2: the server's socket size and message count.
					if gf[0] != wf[0] || gf[2] != wf[2] {
						t.Errorf("line %d: got %q, want the recorded size and count of %q", i, got[i], wl[i])
					}
				} else if got[i] != wl[i] { // RR line 2: remote socket sizes
					t.Errorf("line %d: got %q, want %q", i, got[i], wl[i])
				}
				data++
			}
			if tc.test == netperf.TCPStream {
				// STREAM throughput comes from the server's byte count.
				var wantBytes uint64
				if tc.classic {
					var r netperf.ClassicResults
					r.Unmarshal(replies[1], netperf.ClassicStream)
					wantBytes = uint64(r.Bytes)
				} else {
					var r netperf.OmniResults
					r.Unmarshal(replies[1])
					wantBytes = r.BytesReceived
				}
				if rep.Result.RemoteBytesReceived != wantBytes {
					t.Errorf("got remote bytes %d, want recorded %d", rep.Result.RemoteBytesReceived, wantBytes)
				}
			}
		})
	}
}

// fakeNetserver replays recorded replies on one control connection and
// plays a minimal server data phase.
func fakeNetserver(t *testing.T, ln net.Listener, replies []*netperf.Message, test netperf.TestType, classic bool) {
	c, err := ln.Accept()
	if err != nil {
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second)) // the client's run is shorter
	var req netperf.Message
	if _, err := io.ReadFull(c, req[:]); err != nil {
		return
	}
	setup := *replies[0]
	off := 52 // omni data_port
	if classic {
		off = map[netperf.TestType]int{netperf.TCPStream: 32, netperf.TCPMaerts: 32, netperf.TCPRR: 28, netperf.TCPCC: 28}[test]
	}
	if test.IsUDP() {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return
		}
		defer pc.Close()
		binary.BigEndian.PutUint32(setup[off:], uint32(pc.LocalAddr().(*net.UDPAddr).Port))
		c.Write(setup[:])
		pc.SetDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 65536)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil || n == 0 {
				break
			}
			if test == netperf.UDPRR {
				pc.WriteTo(buf[:1], from)
			}
		}
		c.Write(replies[1][:])
		io.Copy(io.Discard, c)
		return
	}
	dl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return
	}
	defer dl.Close()
	binary.BigEndian.PutUint32(setup[off:], uint32(dl.Addr().(*net.TCPAddr).Port))
	c.Write(setup[:])
	if test == netperf.TCPCRR || test == netperf.TCPCC {
		// A connection per transaction until the client's 1 s test ends.
		dl.(*net.TCPListener).SetDeadline(time.Now().Add(1500 * time.Millisecond))
		for {
			d, err := dl.Accept()
			if err != nil {
				break
			}
			if test == netperf.TCPCRR {
				// As stock netserver: the response, then our close at
				// once (the client waits for it).
				d.SetDeadline(time.Now().Add(1500 * time.Millisecond))
				b := make([]byte, 1)
				if _, err := io.ReadFull(d, b); err == nil {
					d.Write(b)
				}
			}
			d.Close()
		}
		c.Write(replies[1][:])
		io.Copy(io.Discard, c)
		return
	}
	d, err := dl.Accept()
	if err != nil {
		return
	}
	d.SetDeadline(time.Now().Add(10 * time.Second))
	switch test {
	case netperf.TCPStream:
		io.Copy(io.Discard, d)
	case netperf.TCPMaerts:
		buf := make([]byte, 16384)
		for end := time.Now().Add(time.Second); time.Now().Before(end); {
			if _, err := d.Write(buf); err != nil {
				break
			}
		}
	case netperf.TCPRR:
		b := make([]byte, 1)
		if classic {
			d.SetReadDeadline(time.Now().Add(1500 * time.Millisecond))
		}
		for {
			if _, err := io.ReadFull(d, b); err != nil {
				break
			}
			d.Write(b)
		}
	}
	d.Close()
	c.Write(replies[1][:])
	io.Copy(io.Discard, c)
}
