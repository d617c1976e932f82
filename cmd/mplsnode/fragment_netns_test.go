package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
)

// TestKernelFragmentsToConfigServer sends UDP_STREAM datagrams of 8000
// bytes from the kernel (netperf --kernel in its namespace) to our
// netserver on the userspace stack over a 1500-byte veth: Linux fragments
// them and computes their checksums (the oracle), the node's link
// endpoint holds each datagram's fragments, verifies the UDP checksum over
// the whole datagram (link/mplsendpoint/fragsum.go) and hands them to
// gVisor, whose socket must receive them (the server's received rate is
// above 0), over IPv4 and IPv6. With every datagram's sum taken as wrong
// (verifyFragmentSum planted to fail) the server's received rate was 0.
func TestKernelFragmentsToConfigServer(t *testing.T) {
	netns.SkipUnlessRoot(t)
	bin, dir := buildBinary(t), t.TempDir()
	nsS, nsC := netns.New(t, "fs"), netns.New(t, "fc")
	vs, vc := netns.VethPair(t, nsS, nsC)
	nsC.MustExec("ip", "addr", "add", "10.79.0.2/24", "dev", vc)
	nsC.MustExec("ip", "addr", "add", "fd00:79::2/64", "dev", vc, "nodad")
	conf := filepath.Join(dir, "s.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("link add %[1]s type afpacket\naddr add 10.79.0.1/24 dev %[1]s\naddr add fd00:79::1/64 dev %[1]s\n", vs)), 0o644); err != nil {
		t.Fatal(err)
	}
	var srvLogs lockedBuffer
	cmd := exec.Command("ip", "netns", "exec", nsS.Name(), bin, "netserver", "--config", conf, "-p", "12865", "-v")
	cmd.Stderr = &srvLogs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitFor(t, &srvLogs, "netserver listening")
	for _, host := range []string{"10.79.0.1", "fd00:79::1"} {
		t.Run(host, func(t *testing.T) {
			var out []byte
			var err error
			for try := 0; try < 10; try++ { // the first IPv6 run may wait for neighbour discovery
				out, err = exec.Command("ip", "netns", "exec", nsC.Name(), bin, "netperf", "--kernel",
					"-H", host, "-l", "1", "-t", "UDP_STREAM", "-P", "0", "--", "-m", "8000").Output()
				if err == nil {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("netperf: %v: %s\nserver: %s", err, out, srvLogs.String())
			}
			lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
			if len(lines) < 2 {
				t.Fatalf("netperf printed %q: want the client's and the server's lines", out)
			}
			f := strings.Fields(lines[1]) // what the server received
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err != nil || v <= 0 {
				t.Errorf("server received rate in %q: want > 0\nserver: %s", out, srvLogs.String())
			}
			t.Logf("%s", out)
		})
	}
}
