package tshark

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
)

// Capture is a tshark capture running inside a namespace until it has
// written Count frames that match its capture filter.
type Capture struct {
	t    testing.TB
	cmd  *exec.Cmd
	file string
	out  Stderr
}

func (c *Capture) stderr() string { return c.out.String() }

// StartCapture starts tshark in ns on dev with a capture (BPF) filter and
// returns once it is capturing (Ready); it stops after count frames.
// The process is killed in t.Cleanup if it is still running.
func StartCapture(t testing.TB, ns *netns.NS, dev, filter string, count int) *Capture {
	t.Helper()
	Need(t)
	c := &Capture{t: t, file: filepath.Join(t.TempDir(), dev+".pcap")}
	c.cmd = exec.Command("ip", "netns", "exec", ns.Name(), "tshark", "-i", dev, "-c", fmt.Sprint(count),
		"-f", filter, "-w", c.file)
	c.cmd.Stderr = &c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			c.cmd.Process.Kill()
			c.cmd.Wait()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for !Ready(c.stderr()) {
		if time.Now().After(deadline) {
			t.Fatalf("tshark did not start: %s", c.stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c
}

// Fields waits (at most 30 s) for the capture to end and returns the given
// fields of each frame, as Fields does.
func (c *Capture) Fields(fields ...string) [][]string {
	c.t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			c.t.Fatalf("tshark: %v: %s", err, c.stderr())
		}
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-done
		c.t.Fatalf("tshark captured too few frames: %s", c.stderr())
	}
	return Fields(c.t, c.file, fields...)
}
