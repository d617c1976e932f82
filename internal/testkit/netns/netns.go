// Package netns builds throw-away Linux network namespaces, veth pairs and
// bridges for tests that need the kernel as a peer.
//
// It owns nothing in the product: only tests import it. Every object it
// creates has a name unique to the test process (pid plus a counter) and is
// removed in t.Cleanup, on every exit path, including t.Fatal.
//
// Typical use:
//
//	netns.SkipUnlessRoot(t)
//	a := netns.New(t, "a")
//	b := netns.New(t, "b")
//	va, vb := netns.VethPair(t, a, b)
//	b.MustExec("ip", "addr", "add", "10.99.1.2/24", "dev", vb)
//	err := a.Run(func() error { /* sockets opened here live in a */ return nil })
//
// Commands run with the ip(8) tool from iproute2, which must be installed.
package netns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// maxIfNameLen is IFNAMSIZ (16) less the terminating NUL: the longest
// interface name Linux accepts.
const maxIfNameLen = 15

// counter makes names unique within this process; the pid makes them unique
// across processes that run at the same time.
var counter atomic.Uint32

// SkipUnlessRoot skips the test unless the process can create network
// namespaces (effective uid 0; CAP_NET_ADMIN and CAP_SYS_ADMIN needed) and the
// ip(8) tool is installed.
func SkipUnlessRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) to create network namespaces: run as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs the ip tool from iproute2 in PATH")
	}
}

// Name returns a name unique to this process and call, at most 15 bytes long
// so that it is also a valid interface name: prefix (cut to 5 bytes), then the
// pid and a counter in base 36.
func Name(prefix string) string {
	if len(prefix) > 5 {
		prefix = prefix[:5]
	}
	n := prefix + strconv.FormatUint(uint64(os.Getpid()), 36) + "x" +
		strconv.FormatUint(uint64(counter.Add(1)), 36)
	if len(n) > maxIfNameLen {
		n = n[len(n)-maxIfNameLen:]
	}
	return n
}

// NS is a named network namespace created by New. It is removed when the test
// that created it ends.
type NS struct {
	t    testing.TB
	name string
}

// New creates a network namespace named "mn-<prefix><pid>x<n>" with its
// loopback up, and removes it in t.Cleanup. It fails the test if the
// namespace cannot be created.
func New(t testing.TB, prefix string) *NS {
	t.Helper()
	name := "mn-" + Name(prefix)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	ns := &NS{t: t, name: name}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns delete %s: %v: %s", name, err, out)
		}
	})
	ns.MustExec("ip", "link", "set", "lo", "up")
	return ns
}

// Name returns the namespace's name as ip-netns(8) knows it.
func (ns *NS) Name() string { return ns.name }

// Path returns the namespace's file in /run/netns.
func (ns *NS) Path() string { return "/run/netns/" + ns.name }

// Run calls f on an OS thread that has joined the namespace, and returns f's
// error. Sockets and devices that f creates belong to the namespace for their
// whole life, whichever thread uses them later; goroutines that f starts do
// NOT run in the namespace.
//
// If the thread cannot be moved back to its original namespace, it is not
// unlocked, so the Go runtime ends it instead of reusing it.
func (ns *NS) Run(f func() error) error {
	target, err := unix.Open(ns.Path(), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netns %s: open: %w", ns.name, err)
	}
	defer unix.Close(target)

	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: open own namespace: %w", err)
	}
	defer unix.Close(orig)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns %s: setns: %w", ns.name, err)
	}
	ferr := f()
	if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
		// Leave the thread locked: it dies with this goroutine.
		return errors.Join(ferr, fmt.Errorf("netns %s: setns back: %w", ns.name, err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// Exec runs a command inside the namespace (ip netns exec) and returns its
// combined output.
func (ns *NS) Exec(args ...string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("netns: Exec needs a command")
	}
	full := append([]string{"netns", "exec", ns.name}, args...)
	out, err := exec.Command("ip", full...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("netns %s: %s: %w: %s", ns.name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// MustExec is Exec that fails the test on error. Call it only from the test's
// own goroutine.
func (ns *NS) MustExec(args ...string) string {
	ns.t.Helper()
	out, err := ns.Exec(args...)
	if err != nil {
		ns.t.Fatal(err)
	}
	return out
}

// VethPair creates a veth pair with one end in a and the other in b (both
// brought up, no addresses), and returns the two ends' names. The pair is
// removed in t.Cleanup (and would go with either namespace anyway).
func VethPair(t testing.TB, a, b *NS) (nameA, nameB string) {
	t.Helper()
	nameA, nameB = Name("va"), Name("vb")
	if out, err := exec.Command("ip", "link", "add", nameA, "netns", a.name, "type", "veth",
		"peer", "name", nameB, "netns", b.name).CombinedOutput(); err != nil {
		t.Fatalf("ip link add veth %s/%s: %v: %s", nameA, nameB, err, out)
	}
	t.Cleanup(func() {
		// Deleting one end removes both; it may already be gone with a namespace.
		_ = exec.Command("ip", "-n", a.name, "link", "del", nameA).Run()
	})
	a.MustExec("ip", "link", "set", nameA, "up")
	b.MustExec("ip", "link", "set", nameB, "up")
	return nameA, nameB
}

// Bridge creates a Linux bridge in ns, brings it up, enslaves the given
// interfaces (which must already be in ns) and returns its name.
func Bridge(t testing.TB, ns *NS, members ...string) string {
	t.Helper()
	name := Name("br")
	ns.MustExec("ip", "link", "add", name, "type", "bridge")
	for _, m := range members {
		ns.MustExec("ip", "link", "set", m, "master", name)
	}
	ns.MustExec("ip", "link", "set", name, "up")
	return name
}
