package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/nodekit"
	"github.com/mplsnode/mplsnode/internal/testkit/proc"
	"github.com/mplsnode/mplsnode/node"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
)

// channelNode starts an in-process node from conf (parsed as file name),
// its links a0 and b0 on channel endpoints (no root needed), serving its
// control socket until t ends. It returns the socket's path and the two
// endpoints, to inject frames into.
func channelNode(t *testing.T, name, conf string) (path string, a, b *channel.Endpoint) {
	t.Helper()
	a = channel.New(4, 1500, tcpip.LinkAddress("\x02\x00\x00\x00\x01\x01"))
	b = channel.New(4, 1500, tcpip.LinkAddress("\x02\x00\x00\x00\x02\x01"))
	n := nodekit.ChannelNode(t, name, conf, nil, map[string]*channel.Endpoint{"a0": a, "b0": b})
	return serveNode(t, n), a, b
}

// serveNode serves n's control socket until t ends (before n closes, when
// nodekit started n) and returns the socket's path once the socket
// answers.
func serveNode(t *testing.T, n *node.Node) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "n.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.ServeControl(ctx, n, path) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitSocket(t, path)
	return path
}

// writeFile writes text to dir/name and returns the file's path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// startIn starts args in ns (through ip netns exec, which execs them: the
// pid is the command's) with its stderr into logs; it is killed and waited
// for when t ends (unless the test has waited for it).
func startIn(t *testing.T, ns *netns.NS, logs io.Writer, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name()}, args...)...)
	cmd.Stderr = logs
	proc.Start(t, cmd)
	return cmd
}

// configServer starts `mplsnode netserver --config` (port 12865, -v) in
// the namespace prefix+"s", on its veth to the namespace prefix+"c"
// (returned), where the server has 10.N.0.1/24 and fd00:N::1/64 and the
// client's kernel 10.N.0.2/24 and fd00:N::2/64, N being subnet. It returns
// once the server logs that it listens, with the server's logs.
func configServer(t *testing.T, bin, prefix string, subnet int) (cli *netns.NS, logs *lockedBuffer) {
	t.Helper()
	srv := netns.New(t, prefix+"s")
	cli = netns.New(t, prefix+"c")
	vs, vc := netns.VethPair(t, srv, cli)
	cli.MustExec("ip", "addr", "add", fmt.Sprintf("10.%d.0.2/24", subnet), "dev", vc)
	cli.MustExec("ip", "addr", "add", fmt.Sprintf("fd00:%d::2/64", subnet), "dev", vc, "nodad")
	conf := writeFile(t, t.TempDir(), "s.conf", fmt.Sprintf("link add %[1]s type afpacket\naddr add 10.%[2]d.0.1/24 dev %[1]s\naddr add fd00:%[2]d::1/64 dev %[1]s\n", vs, subnet))
	logs = &lockedBuffer{}
	startIn(t, srv, logs, bin, "netserver", "--config", conf, "-p", "12865", "-v")
	waitFor(t, logs, "netserver listening")
	return cli, logs
}

// kernelNetperf runs `mplsnode netperf --kernel args` in ns and returns
// its stdout; it tries up to 10 times, 200 ms apart (the first IPv6 run
// may wait for neighbour discovery), and returns the last try's error.
func kernelNetperf(ns *netns.NS, bin string, args ...string) (out []byte, err error) {
	for try := 0; try < 10; try++ {
		out, err = exec.Command("ip", append([]string{"netns", "exec", ns.Name(), bin, "netperf", "--kernel"}, args...)...).Output()
		if err == nil {
			return out, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return out, err
}

// runExit runs the CLI (in process) with args, fails t unless it exits
// with wantCode, and returns what it wrote to stdout and stderr.
func runExit(t *testing.T, wantCode int, args ...string) (stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), args, &out, &errb); code != wantCode {
		t.Errorf("got exit code %d, want %d (stderr %q)", code, wantCode, errb.String())
	}
	return out.String(), errb.String()
}
