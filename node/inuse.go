package node

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/mplsnode/mplsnode/config"
)

// ErrInUse is wrapped by ListenControl's and ListenMetrics's errors when
// another process (another node, most likely) holds the control socket or
// the metrics address. `mplsnode run` claims both before it opens a link,
// so a second node on the same config refuses to start.
var ErrInUse = errors.New("in use")

// InUseError says who holds a control socket or a metrics address.
type InUseError struct {
	// What is "control socket PATH" or "metrics address ADDR".
	What string
	// PID is the holder's process id; 0 when it could not be found.
	PID int
	// Hint says how to get around it.
	Hint string
}

func (e *InUseError) Error() string {
	who := "another process"
	if e.PID > 0 {
		who = "pid " + strconv.Itoa(e.PID)
		if comm := processName(e.PID); comm != "" {
			who += " (" + comm + ")"
		}
	}
	return fmt.Sprintf("%s is in use by %s, a running node: stop it first, or %s", e.What, who, e.Hint)
}

// Is reports ErrInUse.
func (e *InUseError) Is(target error) bool { return target == ErrInUse }

// processName is /proc/PID/comm, or "".
func processName(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// socketPeerPID returns the pid of the process that listens on the other
// end of c (SO_PEERCRED: the listener's credentials), or 0.
func socketPeerPID(c *net.UnixConn) int {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	pid := 0
	_ = rc.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}

// tcpListenerPID finds the process listening on TCP port (any address) in
// this network namespace: the socket's inode from /proc/net/tcp{,6}, then
// the process holding that inode among /proc/*/fd. 0 when not found (the
// holder is in another namespace, or /proc is not readable).
func tcpListenerPID(port int) int {
	const listen = "0A" // TCP_LISTEN in /proc/net/tcp's st column
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || fs[3] != listen {
				continue
			}
			_, hexPort, ok := strings.Cut(fs[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && int(p) == port {
				inodes["socket:["+fs[9]+"]"] = true
			}
		}
		fh.Close()
	}
	if len(inodes) == 0 {
		return 0
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/fd")
	for _, dir := range procs {
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if link, err := os.Readlink(dir + "/" + fd.Name()); err == nil && inodes[link] {
				pid, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(dir, "/proc/"), "/fd"))
				return pid
			}
		}
	}
	return 0
}

// ListenMetrics listens for ServeMetricsListener on addr (":9477" listens
// on 127.0.0.1 only, as ServeMetrics). An address in use is an
// *InUseError naming the process that holds it, where it can be found.
func ListenMetrics(addr string) (net.Listener, error) {
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		addr = net.JoinHostPort(metricsDefaultHost, port)
	}
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		pid := 0
		if _, p, serr := net.SplitHostPort(addr); serr == nil {
			if port, perr := strconv.Atoi(p); perr == nil {
				pid = tcpListenerPID(port)
			}
		}
		return nil, fmt.Errorf("metrics: %w", &InUseError{What: "metrics address " + addr, PID: pid, Hint: "choose another with --metrics-addr"})
	}
	return nil, fmt.Errorf("metrics: %w", err)
}

// linkClaims holds the abstract sockets that claim a node's links.
type linkClaims []net.Listener

// Close releases the claims.
func (c linkClaims) Close() error {
	for _, ln := range c {
		ln.Close()
	}
	return nil
}

// claimLinks claims the interfaces names for this process: it binds the
// abstract Unix socket "@mplsnode/link/NAME" for each. Abstract socket
// names and interface names are both scoped by the network namespace, so
// two nodes on one interface collide here, before either opens it, while
// nodes in other namespaces do not; the kernel releases a claim when its
// process exits, however it exits. A claimed name is an *InUseError
// naming the holder's pid (SO_PEERCRED).
func claimLinks(names []string) (linkClaims, error) {
	var claims linkClaims
	for _, name := range names {
		addr := "@mplsnode/link/" + name
		ln, err := net.Listen("unix", addr)
		if err != nil {
			claims.Close()
			if !errors.Is(err, syscall.EADDRINUSE) {
				return nil, fmt.Errorf("claim link %s: %w", name, err)
			}
			pid := 0
			if c, derr := net.Dial("unix", addr); derr == nil {
				pid = socketPeerPID(c.(*net.UnixConn))
				c.Close()
			}
			return nil, &InUseError{What: "link " + name, PID: pid, Hint: "give this node other links"}
		}
		// Answer (and drop) the holder queries of nodes that fail.
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		claims = append(claims, ln)
	}
	return claims, nil
}

// CheckLinksFree reports whether another node of this network namespace
// holds an interface cfg's links would open (an *InUseError naming it),
// without keeping a claim: New claims them for good. `mplsnode run` asks
// before it creates its capture file, so a refused start leaves no file.
func CheckLinksFree(cfg *config.Config) error {
	names := make([]string, 0, len(cfg.Links))
	for _, l := range cfg.Links {
		names = append(names, l.Name)
	}
	claims, err := claimLinks(names)
	if err != nil {
		return err
	}
	return claims.Close()
}
