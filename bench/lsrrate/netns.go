package lsrrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// nameCounter makes names unique within this process; the pid makes them
// unique across processes.
var nameCounter atomic.Uint32

// uniqueName returns prefix followed by the pid and a counter in base 36,
// at most 15 bytes (IFNAMSIZ less the NUL) for a prefix of up to 4 bytes.
func uniqueName(prefix string) string {
	return prefix + strconv.FormatUint(uint64(os.Getpid()), 36) + "x" +
		strconv.FormatUint(uint64(nameCounter.Add(1)), 36)
}

// cmdTimeout bounds each ip(8) command so a wedged one cannot hang Run.
const cmdTimeout = 10 * time.Second

// ipCmd runs ip(8) with args and returns its combined output; the error
// names the command and carries its output.
func ipCmd(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// namespace is a network namespace Run created (ip netns add).
type namespace struct {
	name string
}

// newNamespace creates a namespace "mn-PREFIX<pid>x<n>" with its loopback up.
func newNamespace(prefix string) (*namespace, error) {
	ns := &namespace{name: "mn-" + uniqueName(prefix)}
	if _, err := ipCmd("netns", "add", ns.name); err != nil {
		return nil, err
	}
	if _, err := ns.ip("link", "set", "lo", "up"); err != nil {
		return nil, errors.Join(err, ns.remove())
	}
	return ns, nil
}

// path is the namespace's file in /run/netns.
func (ns *namespace) path() string { return "/run/netns/" + ns.name }

// ip runs ip(8) inside the namespace (ip -n NAME ...).
func (ns *namespace) ip(args ...string) (string, error) {
	return ipCmd(append([]string{"-n", ns.name}, args...)...)
}

// exec runs a command inside the namespace (ip netns exec).
func (ns *namespace) exec(args ...string) (string, error) {
	return ipCmd(append([]string{"netns", "exec", ns.name}, args...)...)
}

// remove deletes the namespace; devices in it go with it.
func (ns *namespace) remove() error {
	_, err := ipCmd("netns", "delete", ns.name)
	return err
}

// inNamespace runs f on a fresh OS thread that has joined the namespace at
// path, and returns f's error. Sockets f opens belong to that namespace
// for their whole life, whichever thread uses them later. The thread is
// never unlocked, so the Go runtime ends it when f returns instead of
// reusing a thread in a foreign namespace.
func inNamespace(path string, f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- fmt.Errorf("open namespace %s: %w", path, err)
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			done <- fmt.Errorf("setns %s: %w", path, err)
			return
		}
		done <- f()
	}()
	return <-done
}

// ifStats are a network device's kernel counters.
type ifStats struct {
	rxPackets, rxDropped, txPackets, txDropped uint64
}

// deviceStats reads dev's counters in ns with ip -s -j link (sysfs shows
// only the namespace /sys was mounted in).
func (ns *namespace) deviceStats(dev string) (ifStats, error) {
	out, err := ns.ip("-s", "-j", "link", "show", "dev", dev)
	if err != nil {
		return ifStats{}, err
	}
	type dir struct {
		Packets uint64 `json:"packets"`
		Dropped uint64 `json:"dropped"`
	}
	var links []struct {
		Stats *struct {
			RX dir `json:"rx"`
			TX dir `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 || links[0].Stats == nil {
		return ifStats{}, fmt.Errorf("ip -s -j link show %s in %s: no counters in %q (err %v)", dev, ns.name, out, err)
	}
	st := links[0].Stats
	return ifStats{st.RX.Packets, st.RX.Dropped, st.TX.Packets, st.TX.Dropped}, nil
}
