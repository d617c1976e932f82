package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/node"
)

// TestRunSIGHUP runs the seed topology's LSR (ns1) as an `mplsnode run`
// process and reloads it with SIGHUP while 64 MiB cross it: once with a
// good file, then with broken ones (a syntax error, a reserved label, an
// address change that needs a restart), each rejected with its error
// naming the line while the old tables keep forwarding; a new connection
// after the rejections crosses too. SIGTERM then stops it with exit 0.
func TestRunSIGHUP(t *testing.T) {
	netns.SkipUnlessRoot(t)
	s := newSeedProc(t, buildBinary(t), "h", seedOptions{})
	good := s.conf1 + "-f mpls route add 300 via inet 172.16.21.22\n"
	broken := []struct {
		name, text, want string
	}{
		{"syntax", good + "-f mpls route add 400 vya inet 172.16.21.22\n", `ns1.conf:7:23: unknown word \"vya\"`},
		{"reserved label", good + "-f mpls route add 3 via inet 172.16.21.22\n", "ns1.conf:7:19: incoming label 3 (implicit null) is reserved"},
		{"restart needed", strings.Replace(good, "172.16.21.21/24", "172.16.21.23/24", 1), "ns1.conf:4:1: address 172.16.21.23/24 changed: a restart is needed"},
	}
	const size = 64 << 20
	step, rejected := 0, 0
	var hitsBefore uint64
	el := s.transfer(t, size, 2*time.Minute, func(sent int64) {
		switch {
		case step == 0 && sent >= size/4: // a good reload: one more label route
			s.lsr.writeConf(good)
			s.lsr.signal(syscall.SIGHUP)
			waitFor(t, &s.lsr.logs, `"msg":"node reloaded"`)
			step++
		case step >= 1 && step <= len(broken) && sent >= int64(step+1)*size/8+size/4:
			b := broken[step-1]
			if step == 1 {
				hitsBefore = ilmHits(s.lsr.mustReport())
			}
			s.lsr.writeConf(b.text)
			s.lsr.signal(syscall.SIGHUP)
			rejected++
			waitForCount(t, &s.lsr.logs, `"msg":"reload rejected; the old tables stay"`, rejected)
			step++
		}
	})
	t.Logf("64 MiB with 1 good and %d broken reloads: %v (%.0f Mbit/s)", rejected, el, mbits(size, el))
	if rejected != len(broken) {
		t.Fatalf("%d broken reloads sent, want %d", rejected, len(broken))
	}
	logs := s.lsr.logs.String()
	for _, b := range broken {
		if !strings.Contains(logs, b.want) {
			t.Errorf("the rejected %s reload does not say %q:\n%s", b.name, b.want, logs)
		}
	}
	if after := ilmHits(s.lsr.mustReport()); after <= hitsBefore {
		t.Errorf("LSR ILM hits %d before the broken reloads, %d after: label 100 stopped forwarding", hitsBefore, after)
	}
	// The old tables serve new connections too.
	s.transfer(t, 1<<20, time.Minute, nil)
	if err := s.lsr.stop(); err != nil {
		t.Errorf("mplsnode run after SIGTERM: %v (want exit 0)\n%s", err, s.lsr.logs.String())
	}
}

// ilmHits sums the ILM hits of a report's links.
func ilmHits(r node.Report) uint64 {
	var n uint64
	for _, l := range r.Links {
		n += l.ILMHits
	}
	return n
}
