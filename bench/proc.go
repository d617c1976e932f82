package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProcStats is what one process of a run cost.
type ProcStats struct {
	// Role names the process: "ns0 client", "ns1 lsr", "ns2 netserver".
	Role string `json:"role"`
	// Mplsnode is true for mplsnode processes (the ones the RSS target
	// applies to).
	Mplsnode bool `json:"mplsnode"`
	// UserSeconds and SysSeconds are its CPU time (rusage of the child).
	UserSeconds float64 `json:"user_s"`
	SysSeconds  float64 `json:"sys_s"`
	// PeakRSSKiB is its peak resident set: VmHWM from /proc/PID/status read
	// just before it was stopped, or for a process that exits by itself
	// ru_maxrss (the same high-water mark, kept by the kernel at exit).
	PeakRSSKiB int64 `json:"peak_rss_kib"`
}

// proc is a started child process inside a namespace.
type proc struct {
	role     string
	mplsnode bool
	cmd      *exec.Cmd
	stderr   bytes.Buffer
	stdout   bytes.Buffer
	done     chan struct{}
	waitErr  error
}

// procs tracks the running children so that an interrupt stops them all
// before the namespaces go.
type procs struct {
	mu  sync.Mutex
	set map[*proc]bool
}

func (ps *procs) add(p *proc) {
	ps.mu.Lock()
	if ps.set == nil {
		ps.set = map[*proc]bool{}
	}
	ps.set[p] = true
	ps.mu.Unlock()
}

func (ps *procs) remove(p *proc) {
	ps.mu.Lock()
	delete(ps.set, p)
	ps.mu.Unlock()
}

// killAll stops every tracked process (SIGTERM, then SIGKILL after 3 s).
func (ps *procs) killAll() {
	ps.mu.Lock()
	list := make([]*proc, 0, len(ps.set))
	for p := range ps.set {
		list = append(list, p)
	}
	ps.mu.Unlock()
	for _, p := range list {
		p.stop(3 * time.Second)
	}
}

// start runs argv inside namespace ns (ip netns exec, which execs argv in
// the same process, so the pid and the rusage are argv's own).
func (ps *procs) start(ns, role string, mplsnode bool, env []string, argv ...string) (*proc, error) {
	p := &proc{role: role, mplsnode: mplsnode, done: make(chan struct{})}
	p.cmd = exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if len(env) > 0 {
		p.cmd.Env = append(os.Environ(), env...)
	}
	// Its own process group: a Ctrl-C in the terminal reaches the bench,
	// which then stops the children itself, in order.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", role, err)
	}
	ps.add(p)
	go func() {
		p.waitErr = p.cmd.Wait()
		ps.remove(p)
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to exit by itself, up to timeout (then it is
// stopped), and returns its exit error.
func (p *proc) wait(ctx context.Context, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return p.waitErr
	case <-ctx.Done():
		p.stop(3 * time.Second)
		return ctx.Err()
	case <-t.C:
		p.stop(3 * time.Second)
		return fmt.Errorf("%s: still running after %v", p.role, timeout)
	}
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
func (p *proc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// stopMeasured reads the process's VmHWM, stops it and returns its costs.
func (p *proc) stopMeasured() ProcStats {
	hwm := int64(-1)
	if !p.exited() {
		hwm = vmHWM(p.cmd.Process.Pid)
		p.stop(5 * time.Second)
	}
	st := p.stats()
	if hwm > 0 {
		st.PeakRSSKiB = hwm
	}
	return st
}

// stats returns the costs of an exited process from its rusage.
func (p *proc) stats() ProcStats {
	st := ProcStats{Role: p.role, Mplsnode: p.mplsnode}
	ps := p.cmd.ProcessState
	if ps == nil {
		return st
	}
	st.UserSeconds = ps.UserTime().Seconds()
	st.SysSeconds = ps.SystemTime().Seconds()
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		st.PeakRSSKiB = ru.Maxrss // KiB on Linux
	}
	return st
}

// vmHWM returns the VmHWM of pid in KiB, or -1.
func vmHWM(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return n
				}
			}
		}
	}
	return -1
}

// machineBusy returns the busy CPU time of the whole machine (every state
// of /proc/stat's cpu line except idle and iowait), in seconds. It counts
// what no process is billed for, such as the kernel forwarding in softirq.
func machineBusy() (float64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, errors.New("/proc/stat: no cpu line")
	}
	var busy uint64
	for i, s := range f[1:] {
		if i >= 8 { // guest time is already in user
			break
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		busy += v
	}
	// USER_HZ is 100 on every Linux architecture Go supports.
	return float64(busy) / 100, nil
}
