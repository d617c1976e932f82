package node_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/node"
)

// The environment of TestControlChildProcess: the control socket's path
// and how many more descriptors the child may open once it listens.
const (
	controlChildSocketEnv = "MPLSNODE_TEST_CONTROL_CHILD_SOCKET"
	controlChildFreeEnv   = "MPLSNODE_TEST_CONTROL_CHILD_FREE_FDS"
)

// TestControlChildProcess is not a test: TestControlSocketBoundsConnections
// and TestControlSocketSurvivesEMFILE run the test binary with only it, as
// a child that serves a node's control socket under a low limit of open
// files (RLIMIT_NOFILE), so that the real accept4 fails with EMFILE in the
// real listener. It prints "ready LIMIT FREE" once it serves, "report
// JSON" (its node.ControlReport) for each line "report" on its stdin, and
// "stopped: ERR" when ServeControlListener returns (on its own: the bug;
// or once its stdin closes: the end).
func TestControlChildProcess(t *testing.T) {
	path := os.Getenv(controlChildSocketEnv)
	if path == "" {
		t.Skip("helper process of the control socket limit tests; runs only when they start it")
	}
	free, err := strconv.Atoi(os.Getenv(controlChildFreeEnv))
	if err != nil {
		t.Fatal(err)
	}
	n := obsNode(t)
	ln, err := node.ListenControl(path)
	if err != nil {
		t.Fatal(err)
	}
	// Each line "report" on stdin is answered with a line "report JSON"
	// of n.ControlReport(); EOF ends the child.
	stdinClosed := make(chan struct{})
	go func() {
		defer close(stdinClosed)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "report" {
				b, _ := json.Marshal(n.ControlReport())
				fmt.Printf("report %s\n", b)
			}
		}
	}()
	// Every descriptor the child needs is open now; leave it free more.
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	names, err := dir.Readdirnames(-1)
	own := int(dir.Fd())
	dir.Close()
	if err != nil {
		t.Fatal(err)
	}
	var fds []int
	for _, name := range names {
		if fd, err := strconv.Atoi(name); err == nil && fd != own {
			fds = append(fds, fd)
		}
	}
	// New descriptors take the lowest free numbers below the limit.
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = uint64(len(fds) + free)
	below := 0
	for _, fd := range fds {
		if uint64(fd) < lim.Cur {
			below++
		}
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- node.ServeControlListener(ctx, n, ln) }()
	fmt.Printf("ready %d %d\n", lim.Cur, int(lim.Cur)-below)
	select {
	case err := <-done:
		fmt.Printf("stopped: %v\n", err)
		<-stdinClosed
	case <-stdinClosed:
		cancel()
		fmt.Printf("stopped: %v\n", <-done)
	}
}

// controlChild is a running TestControlChildProcess.
type controlChild struct {
	path    string
	free    int // descriptors the child can still open
	pid     int
	stdin   io.Writer
	reports chan string

	mu  sync.Mutex
	out bytes.Buffer // its stdout and stderr
}

func (c *controlChild) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// stopped reports whether the child's control loop returned.
func (c *controlChild) stopped() bool { return strings.Contains(c.output(), "stopped:") }

func (c *controlChild) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(b)
}

// startControlChild starts TestControlChildProcess with free descriptors
// to spare and waits until it serves; the cleanup stops it and checks the
// loop ran to the end.
func startControlChild(t *testing.T, free int) *controlChild {
	t.Helper()
	c := &controlChild{path: filepath.Join(t.TempDir(), "c.sock")}
	cmd := exec.Command(os.Args[0], "-test.run=^TestControlChildProcess$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), controlChildSocketEnv+"="+c.path, controlChildFreeEnv+"="+strconv.Itoa(free))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = c
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.pid, c.stdin, c.reports = cmd.Process.Pid, stdin, make(chan string, 4)
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(c, line)
			if strings.HasPrefix(line, "ready ") {
				ready <- line
			}
			if r, ok := strings.CutPrefix(line, "report "); ok {
				c.reports <- r
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("control child: %v; its output:\n%s", err, c.output())
			}
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Errorf("control child did not stop within 15 s of its stdin closing; its output:\n%s", c.output())
		}
		if out := c.output(); !strings.Contains(out, "stopped: <nil>") {
			t.Errorf("the child's control loop did not end cleanly; its output:\n%s", out)
		}
	})
	select {
	case line := <-ready:
		var limit int
		if _, err := fmt.Sscanf(line, "ready %d %d", &limit, &c.free); err != nil {
			t.Fatalf("control child said %q: %v", line, err)
		}
		t.Logf("control child %d: RLIMIT_NOFILE %d, %d descriptors free", c.pid, limit, c.free)
	case <-time.After(30 * time.Second):
		t.Fatalf("control child not ready within 30 s; its output:\n%s", c.output())
	}
	return c
}

// report returns the child's node.ControlReport.
func (c *controlChild) report(t *testing.T) node.ControlReport {
	t.Helper()
	if _, err := io.WriteString(c.stdin, "report\n"); err != nil {
		t.Fatalf("asking the control child for its report: %v", err)
	}
	var r node.ControlReport
	select {
	case line := <-c.reports:
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("control child's report %q: %v", line, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("control child sent no report within 10 s; its output:\n%s", c.output())
	}
	return r
}

// openIdle opens k connections to path that send nothing; they close at
// the end of the test.
func openIdle(t *testing.T, path string, k int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, k)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	d := net.Dialer{Timeout: 5 * time.Second}
	for range k {
		c, err := d.Dial("unix", path)
		if err != nil {
			t.Fatalf("connection %d of %d: %v (socket file: %v)", len(conns)+1, k, err, statErr(path))
		}
		c.SetDeadline(time.Now().Add(time.Minute))
		conns = append(conns, c)
	}
	return conns
}

// askStats sends `stats` and decodes the answer, all within timeout.
func askStats(path string, timeout time.Duration) (node.Report, error) {
	var r node.Report
	d := net.Dialer{Timeout: timeout}
	c, err := d.Dial("unix", path)
	if err != nil {
		return r, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, "stats\n"); err != nil {
		return r, err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return r, fmt.Errorf("after %q: %w", b, err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("answer %q: %w", b, err)
	}
	return r, nil
}

// TestControlSocketBoundsConnections guards the bound on concurrent
// control connections (node.MaxControlConns) and the idle deadline
// (without them idle clients exhaust the node's descriptors, accept4
// fails with EMFILE and the control socket stops). The node
// runs in a child that can open MaxControlConns+16 more descriptors; the
// test opens 40 idle connections more than that. The bounded server
// never holds more than MaxControlConns of them, so it never runs out
// (accept_errors stays 0); `stats`, queued behind them, is still answered
// once the idle ones are closed by the idle deadline; and once the idle
// clients are gone, new clients are answered at once. Without the bound
// the child hits EMFILE (accept_errors > 0, or, with the old loop, the
// socket is gone); without the idle deadline `stats` waits in vain.
func TestControlSocketBoundsConnections(t *testing.T) {
	c := startControlChild(t, node.MaxControlConns+16)
	idle := openIdle(t, c.path, c.free+40)

	// stats must be answered within what `mplsnode stats` waits (5 s),
	// with a margin.
	start := time.Now()
	if _, err := askStats(c.path, 4*time.Second); err != nil {
		t.Fatalf("stats with %d idle clients (%d over the bound) waiting: %v; socket file: %v; child output:\n%s",
			len(idle), len(idle)-node.MaxControlConns, err, statErr(c.path), c.output())
	}
	r := c.report(t)
	t.Logf("stats answered after %v with %d idle clients: control %+v", time.Since(start).Round(time.Millisecond), len(idle), r)
	if r.AcceptErrors != 0 {
		t.Errorf("accept failed %d times: the node ran out of descriptors, so the bound of %d connections did not hold", r.AcceptErrors, node.MaxControlConns)
	}
	if r.Busy == 0 {
		t.Errorf("busy is 0 with %d clients connected at once, want > 0 (the bound is %d)", len(idle), node.MaxControlConns)
	}
	// stats came after len(idle) idle clients; it got a connection once
	// that many minus MaxControlConns-1 had been closed idle.
	if want := uint64(len(idle) - node.MaxControlConns + 1); r.ClosedIdle < want {
		t.Errorf("closed_idle = %d when stats was served behind %d idle clients, want >= %d", r.ClosedIdle, len(idle), want)
	}

	for _, ic := range idle {
		ic.Close()
	}
	// The idle clients are gone: new ones are served at once, well within
	// the idle deadline (2 s) that had to free the slots above.
	for i := range 5 {
		if _, err := askStats(c.path, 1500*time.Millisecond); err != nil {
			t.Fatalf("stats %d after the idle clients closed: %v; child output:\n%s", i+1, err, c.output())
		}
	}
	if c.stopped() {
		t.Errorf("the control loop stopped; child output:\n%s", c.output())
	}
}

// TestControlSocketSurvivesEMFILE guards the accept loop against
// temporary accept errors (ending the loop on the first EMFILE removes
// the socket file and leaves `mplsnode stats` dead until a restart). The node runs in a child that can open only a few more
// descriptors, fewer than MaxControlConns; idle clients use them up, so
// the real accept4 fails with EMFILE. The loop must go on: the child's
// loop has not returned, the socket file is still there, and once the
// idle clients close, `stats` is answered and counts the accept failures.
func TestControlSocketSurvivesEMFILE(t *testing.T) {
	c := startControlChild(t, 6)
	if c.free >= node.MaxControlConns {
		t.Fatalf("child has %d descriptors free, want fewer than the bound %d", c.free, node.MaxControlConns)
	}
	idle := openIdle(t, c.path, c.free+16)
	// Let accept4 fail with EMFILE a few times (it retries after 5, 10,
	// 20, 40 ... ms).
	time.Sleep(300 * time.Millisecond)
	if c.stopped() {
		t.Fatalf("the control loop stopped at EMFILE; socket file: %v; child output:\n%s", statErr(c.path), c.output())
	}
	if err := statErr(c.path); err != nil {
		t.Fatalf("socket file after EMFILE: %v", err)
	}
	for _, ic := range idle {
		ic.Close()
	}
	if _, err := askStats(c.path, 10*time.Second); err != nil {
		t.Fatalf("stats after EMFILE: %v; socket file: %v; child output:\n%s", err, statErr(c.path), c.output())
	}
	if r := c.report(t); r.AcceptErrors == 0 {
		t.Errorf("accept_errors is 0: accept never failed, so the test did not exercise EMFILE (%d idle clients, %d descriptors free)", len(idle), c.free)
	}
	if _, err := askStats(c.path, 5*time.Second); err != nil {
		t.Errorf("second stats after EMFILE: %v", err)
	}
	if err := statErr(c.path); err != nil {
		t.Errorf("socket file after EMFILE: %v", err)
	}
}

// statErr is os.Stat's error for path.
func statErr(path string) error {
	_, err := os.Stat(path)
	return err
}
