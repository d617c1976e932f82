package node_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/node"
)

// TestSeedBusyPoll runs 300 one-byte request/response exchanges from our
// host (ns0) to a kernel echo server (ns2) through the LSR, every link of
// both nodes configured with "busy-poll 1000": each echo must come back
// intact, the nodes must have busy-polled, and the LSR's report must
// show its frames delivered by busy polls (a response spun for after its
// request). Planted bug it caught:
// node/convert.go not passing the link's busy-poll to the stack (the
// LSR's busy_polls stayed 0).
func TestSeedBusyPoll(t *testing.T) {
	s := newSeedLinks(t, "busy-poll 1000", nil)
	var ln net.Listener
	if err := s.ns2.Run(func() (err error) {
		ln, err = net.Listen("tcp", "172.16.21.22:0")
		return err
	}); err != nil {
		t.Fatalf("echo server in ns2: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		_, _ = io.Copy(c, c)
	}()
	c := dialFrom(t, s.n0, ln.Addr().String(), time.Minute)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	var req, resp [1]byte
	for i := 0; i < 300; i++ {
		req[0] = byte(i)
		if _, err := c.Write(req[:]); err != nil {
			t.Fatalf("exchange %d: write: %v", i, err)
		}
		if _, err := io.ReadFull(c, resp[:]); err != nil || resp != req {
			t.Fatalf("exchange %d: read %v, %v; want %v", i, resp, err, req)
		}
	}
	// One goroutine of the process spins for every busy-polled link, and
	// both nodes run in this process: the spinner may be the host's link
	// (it spins after each response), taking the LSR's frames too. So
	// the busy polls are counted over both nodes, and the LSR's links
	// must show batches of theirs that a busy poll delivered.
	var polls, hits uint64
	for _, n := range []struct {
		name string
		r    node.Report
	}{{"host", s.n0.Report()}, {"LSR", s.n1.Report()}} {
		for _, l := range n.r.Links {
			polls += l.BusyPolls
			if n.name == "LSR" {
				hits += l.BusyPollHits
			}
			t.Logf("%s %s: busy polls %d, its batches a busy poll delivered %d, %d us spun", n.name, l.Name, l.BusyPolls, l.BusyPollHits, l.BusyPollUS)
		}
	}
	if polls == 0 || hits == 0 {
		t.Errorf("busy polls %d, LSR batches they delivered %d; want both > 0", polls, hits)
	}
}
