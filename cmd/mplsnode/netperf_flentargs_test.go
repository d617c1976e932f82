package main

import (
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/netperf"
)

// flentCommand is the netperf command line flent 2.1.1's NetperfDemoRunner
// builds (runners.py), for rrul's TCP upload EF and its UDP ping, with
// its extra spaces.
const (
	flentStream = "-P 0 -v 0 -D -0.20 -4 -Y EF,EF -H 10.0.0.2 -p 12865 -t TCP_STREAM -l 60 -F /dev/urandom -f m   --    -H 10.0.0.2 -k THROUGHPUT,LOCAL_CONG_CONTROL,REMOTE_CONG_CONTROL,TRANSPORT_MSS,LOCAL_TRANSPORT_RETRANS,REMOTE_TRANSPORT_RETRANS,LOCAL_SOCKET_TOS,REMOTE_SOCKET_TOS,DIRECTION,ELAPSED_TIME,PROTOCOL,LOCAL_SEND_SIZE,LOCAL_RECV_SIZE,REMOTE_SEND_SIZE,REMOTE_RECV_SIZE,LOCAL_BYTES_SENT,LOCAL_BYTES_RECVD,REMOTE_BYTES_SENT,REMOTE_BYTES_RECVD -K cubic"
	flentUDPRR  = "-P 0 -v 0 -D -0.20 -4  -H 10.0.0.2 -p 12865 -t UDP_RR -l 70 -F /dev/urandom    -- -e 2   -H 10.0.0.2 -k THROUGHPUT,PROTOCOL"
	// flentProbe is what flent runs (and kills) to see whether -D and -e work.
	flentProbe = "-l 1 -D -0.2 -- -e 1"
)

// TestParseFlentCommandLines parses flent's command lines as stock
// netperf's getopt does: -D takes the negative interval, -Y DSCP names,
// -F the fill file, and -e and -K are test-specific options. Checked by
// planting the bug: with -D's value taken only when it starts with a
// digit, flent's command fails with "unknown option -0".
func TestParseFlentCommandLines(t *testing.T) {
	a, err := parseNetperfArgs(strings.Fields(flentStream))
	if err != nil {
		t.Fatalf("flent's TCP_STREAM command: %v", err)
	}
	c := a.cfg
	if c.Interim != 200*time.Millisecond || c.FillFile != "/dev/urandom" || c.Units != 'm' || a.headers || a.verbosity != 0 {
		t.Errorf("globals: interim %v fill %q units %c headers %v -v %d", c.Interim, c.FillFile, c.Units, a.headers, a.verbosity)
	}
	if ef := (netperf.TOS{Value: 0xb8, Set: true}); c.LocalTOS != ef || c.RemoteTOS != ef {
		t.Errorf("-Y EF,EF: %+v %+v, want 0xb8 both", c.LocalTOS, c.RemoteTOS)
	}
	if c.CongControl != "cubic" || c.RemoteCongControl != "cubic" {
		t.Errorf("-K cubic: %q,%q, want cubic both", c.CongControl, c.RemoteCongControl)
	}
	if a.omniMode != netperf.OmniKeyval || !strings.HasPrefix(a.omniSelection, "THROUGHPUT,") {
		t.Errorf("-k: mode %v selection %q", a.omniMode, a.omniSelection)
	}
	a, err = parseNetperfArgs(strings.Fields(flentUDPRR))
	if err != nil {
		t.Fatalf("flent's UDP_RR command: %v", err)
	}
	if a.cfg.ReceiveTimeout != 2*time.Second || a.cfg.Test != netperf.UDPRR {
		t.Errorf("-e 2: %v on %s", a.cfg.ReceiveTimeout, a.cfg.Test)
	}
	if a, err = parseNetperfArgs(strings.Fields(flentProbe)); err != nil || a.cfg.Interim != 200*time.Millisecond {
		t.Errorf("flent's probe %q: %v", flentProbe, err)
	}
	for args, want := range map[string]func(*netperfArgs) bool{
		"-D 0.5,1000":  func(a *netperfArgs) bool { return a.cfg.Interim == 500*time.Millisecond },
		"-D -1 -l 3":   func(a *netperfArgs) bool { return a.cfg.Interim == time.Second && a.cfg.Length == 3 },
		"-D":           func(a *netperfArgs) bool { return a.cfg.Interim == time.Second },
		"-T 0,1":       func(a *netperfArgs) bool { return a.localCPU == 0 && a.remoteCPU == 1 && a.cfg.BindRemote },
		"-T 1":         func(a *netperfArgs) bool { return a.localCPU == 1 && a.remoteCPU == 1 },
		"-Y 0x28,CS1":  func(a *netperfArgs) bool { return a.cfg.LocalTOS.Value == 0x28 && a.cfg.RemoteTOS.Value == 0x20 },
		"-F a,b":       func(a *netperfArgs) bool { return a.cfg.FillFile == "a" && a.cfg.RemoteFillFile == "b" },
		"-- -K reno,x": func(a *netperfArgs) bool { return a.cfg.CongControl == "reno" && a.cfg.RemoteCongControl == "x" },
	} {
		a, err := parseNetperfArgs(strings.Fields(args))
		if err != nil || !want(a) {
			t.Errorf("%q: %v (%+v)", args, err, a)
		}
	}
	for _, bad := range []string{"-D 0", "-D -0", "-Y bogus", "-Y 256", "-T x", "-- -e -1", "-- -e x", "-F a," + strings.Repeat("r", 32), "-- -K " + strings.Repeat("c", 16)} {
		if _, err := parseNetperfArgs(strings.Fields(bad)); err == nil {
			t.Errorf("%q: accepted, want an error", bad)
		}
	}
}
