package node_test

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// TestSeedBusyPoll runs 300 one-byte request/response exchanges from our
// host (ns0) to a kernel echo server (ns2) through the LSR, every link of
// both nodes configured with "busy-poll 1000": each echo must come back
// intact, and the LSR's report must show busy polls that delivered
// frames (a response spun for after its request). Planted bug it caught:
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := s.n0.Stack().DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial %s: %v", ln.Addr(), err)
	}
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
	var polls, hits uint64
	for _, l := range s.n1.Report().Links {
		polls += l.BusyPolls
		hits += l.BusyPollHits
		t.Logf("LSR %s: busy polls %d, batches they delivered %d, %d us spun", l.Name, l.BusyPolls, l.BusyPollHits, l.BusyPollUS)
	}
	if polls == 0 || hits == 0 {
		t.Errorf("LSR busy polls %d delivered %d batches; want both > 0", polls, hits)
	}
}
