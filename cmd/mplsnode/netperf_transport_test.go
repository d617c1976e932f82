package main

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/netperf"
)

// TestStackTransportOutputs runs TCP_STREAM and TCP_MAERTS between two
// userspace stacks, wired as `netperf --config` and `netserver --config`
// wire them: LOCAL_CONG_CONTROL and REMOTE_CONG_CONTROL name the stacks'
// algorithm (stack.TCPOptions' default, cubic), TRANSPORT_MSS is the one
// the pipe's 1500-byte MTU gives (1500 less the IPv4 and TCP headers),
// LOCAL_TRANSPORT_RETRANS is a count, not -1; -K reno sets both sides'
// algorithm. Checked by planting the
// bug: with the server not asking Server.TransportInfo, both tests fail
// with "output lacks REMOTE_CONG_CONTROL=cubic".
func TestStackTransportOutputs(t *testing.T) {
	a, b := stackPair(t)
	port, logs := startStackServer(t, b)
	for _, c := range []struct {
		test netperf.TestType
		cong string // -K on both sides; "" the stacks' default
	}{{netperf.TCPStream, ""}, {netperf.TCPMaerts, ""}, {netperf.TCPStream, "reno"}} {
		test := c.test
		t.Run(string(test)+"/"+c.cong, func(t *testing.T) {
			cfg := netperf.NewConfig(stackServerV4.String(), test)
			cfg.Port, cfg.Dial, cfg.ListenPacket, cfg.TransportInfo = port, a.DialContext, a.ListenPacket, a.TransportInfo
			cfg.CongControl, cfg.RemoteCongControl = c.cong, c.cong
			cfg.Length = 1
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			rep, err := netperf.Run(ctx, cfg)
			if err != nil {
				t.Fatalf("Run: %v\n%s", err, logs.String())
			}
			var out strings.Builder
			if err := rep.WriteOmni(&out, netperf.OmniKeyval, "LOCAL_CONG_CONTROL,REMOTE_CONG_CONTROL,TRANSPORT_MSS,LOCAL_TRANSPORT_RETRANS,REMOTE_TRANSPORT_RETRANS", false); err != nil {
				t.Fatal(err)
			}
			cong := cmp.Or(c.cong, "cubic")
			want := []string{"LOCAL_CONG_CONTROL=" + cong, "REMOTE_CONG_CONTROL=" + cong, "TRANSPORT_MSS=1460"}
			for _, w := range want {
				if !strings.Contains(out.String(), w+"\n") {
					t.Errorf("output lacks %s:\n%s", w, out.String())
				}
			}
			for _, k := range []string{"LOCAL_TRANSPORT_RETRANS=-1", "REMOTE_TRANSPORT_RETRANS=-1"} {
				if strings.Contains(out.String(), k+"\n") {
					t.Errorf("%s: want a count\n%s", k, out.String())
				}
			}
		})
	}
}

// TestStreamLatencyOutputs runs TCP_STREAM, TCP_MAERTS and UDP_STREAM over
// kernel loopback and asks for -O MEAN_LATENCY,P99_LATENCY,MIN_LATENCY:
// each is the time of one send (MAERTS: receive) call in microseconds, as
// stock's histogram keeps it, so real values: a positive mean, a 99th
// percentile at or above the minimum, none of them -1. Checked by
// planting the bug: with TCP_STREAM's send calls not timed, it fails with
// "latency min -1 mean -1.00 p99 -1 max -1".
func TestStreamLatencyOutputs(t *testing.T) {
	port := startKernelServer(t, "127.0.0.1:0", io.Discard)
	for _, test := range []netperf.TestType{netperf.TCPStream, netperf.TCPMaerts, netperf.UDPStream} {
		t.Run(string(test), func(t *testing.T) {
			cfg := netperf.NewConfig("127.0.0.1", test)
			cfg.Port, cfg.Length = port, 1
			cfg.Routing = 1 // loopback is on-link either way; -R 1 as a user would
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			rep, err := netperf.Run(ctx, cfg)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			l := rep.Result.Latency
			if l.Mean <= 0 || l.P99 < l.Min || l.Min < 0 || l.Max < l.P99 {
				t.Errorf("latency min %d mean %.2f p99 %d max %d: want real call times", l.Min, l.Mean, l.P99, l.Max)
			}
			var out strings.Builder
			if err := rep.WriteOmni(&out, netperf.OmniHuman, "MEAN_LATENCY,P99_LATENCY", true); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if vals := strings.Fields(lines[len(lines)-1]); len(vals) != 2 || vals[0] == "-1.00" || vals[1] == "-1" {
				t.Errorf("-O MEAN_LATENCY,P99_LATENCY printed %q, want values", lines[len(lines)-1])
			}
		})
	}
}

// startKernelServer runs a netperf Server on kernel sockets, control port
// on addr, logging at debug level to logs, until the test ends; it
// returns the port.
func startKernelServer(t *testing.T, addr string, logs io.Writer) int {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return serveNetperf(t, &netperf.Server{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, ln)
}
