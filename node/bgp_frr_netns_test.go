package node_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/bgp"
	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/node"
)

// frrDaemon runs one FRR daemon (zebra or bgpd) in ns under its own
// pathspace, killed (by pid) when the test ends.
func frrDaemon(t *testing.T, ns *netns.NS, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name(), "/usr/lib/frr/" + name,
		"-u", "frr", "-g", "frr", "-i", filepath.Join(dir, name+".pid"),
		"--vty_socket", dir, "--log", "stdout", "--log-level", "debugging"}, args...)...)
	out, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		out.Close()
		if t.Failed() {
			b, _ := os.ReadFile(out.Name())
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s log (end):\n%s", name, b)
		}
	})
}

// startFRR skips t unless FRR is installed, then runs zebra and bgpd in
// nsF: AS 65002 with router-id SUBNET.21, one labeled-unicast neighbour
// SUBNET.20 (AS 65001, timers 3 9) and FRR's own network 10.77.0.0/16,
// subnet being the /24's first three octets. It returns the directory of
// FRR's sockets (vtysh --vty_socket).
func startFRR(t *testing.T, nsF *netns.NS, subnet string) string {
	t.Helper()
	if _, err := os.Stat("/usr/lib/frr/bgpd"); err != nil {
		t.Skip("FRR is not installed (Debian package frr)")
	}
	// FRR's daemons run as user frr (zebra refuses root outside group
	// frrvty) and create their sockets and pid files here, so the
	// directory is theirs to write and its parents must be traversable
	// (t.TempDir's parent is not).
	dir, err := os.MkdirTemp("", "mplsnode-frr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "bgpd.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`hostname frr
router bgp 65002
 bgp router-id %[1]s.21
 no bgp ebgp-requires-policy
 no bgp network import-check
 neighbor %[1]s.20 remote-as 65001
 neighbor %[1]s.20 timers 3 9
 address-family ipv4 unicast
  no neighbor %[1]s.20 activate
  network 10.77.0.0/16
 exit-address-family
 address-family ipv4 labeled-unicast
  neighbor %[1]s.20 activate
 exit-address-family
`, subnet)), 0o644); err != nil {
		t.Fatal(err)
	}
	zconf := filepath.Join(dir, "zebra.conf")
	os.WriteFile(zconf, []byte("hostname frr\n"), 0o644)
	zsock := filepath.Join(dir, "zserv.api")
	frrDaemon(t, nsF, dir, "zebra", "-f", zconf, "-z", zsock)
	time.Sleep(time.Second)
	frrDaemon(t, nsF, dir, "bgpd", "-f", conf, "-z", zsock)
	return dir
}

// TestBGPFRR runs a labeled unicast session between the node and FRR's
// bgpd (8.4, with zebra, in its own namespace). This kernel has no MPLS
// routing, so zebra logs "Disabling MPLS support (no kernel support)" and
// fails to install the node's labelled route into the kernel ("lwt
// encapsulation type not supported"), and bgpd advertises its own network
// with implicit null. BGP itself works: FRR's route arrives (label 3) and
// is installed as plain IP towards bgpd; FRR holds the node's network
// with the label the node bound ("Remote label: N").
//
// Bug planted to check the test: pushing the received implicit null
// (route() not skipping label 3) makes the FTN reject the route (label 3
// cannot be pushed) and the route never shows.
func TestBGPFRR(t *testing.T) {
	netns.SkipUnlessRoot(t)
	ns0, nsF := netns.New(t, "f0"), netns.New(t, "ff")
	v0, vF := netns.VethPair(t, ns0, nsF)
	nsF.MustExec("ip", "link", "set", "lo", "up")
	nsF.MustExec("ip", "addr", "add", "172.16.40.21/24", "dev", vF)
	dir := startFRR(t, nsF, "172.16.40")
	n := startNode(t, ns0, "frr.conf", fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.40.20/24 dev %[1]s
bgp as 65001 router-id 172.16.40.20
bgp neighbor 172.16.40.21 remote-as 65002 family ipv4-labeled-unicast hold-time 9
bgp network 10.10.10.10/32
`, v0))
	waitUntil(t, 60*time.Second, "the session with bgpd", func() bool {
		return n.BGP().Neighbors()[0].State == "established"
	})
	vtysh := func(cmd string) string {
		out, _ := nsF.Exec("vtysh", "--vty_socket", dir, "-c", cmd)
		return out
	}
	// FRR advertises its own network with implicit null (3): the node
	// installs a plain IP route towards bgpd, no label pushed.
	want := "10.77.0.0/16 via 172.16.40.21 dev " + v0 + " proto bgp metric 20"
	waitUntil(t, 20*time.Second, "FRR's 10.77.0.0/16 as "+want, func() bool {
		return slices.ContainsFunc(n.Routes(), func(r node.RouteEntry) bool { return r.String() == want })
	})
	if rs := n.BGP().Routes(); !slices.ContainsFunc(rs, func(r bgp.RouteStatus) bool {
		return r.Prefix == "10.77.0.0/16" && slices.Equal(r.Labels, []uint32{3}) && r.Installed
	}) {
		t.Errorf("10.77.0.0/16 not received with label 3: %+v", rs)
	}
	waitUntil(t, 20*time.Second, "our network in FRR's table", func() bool {
		return strings.Contains(vtysh("show bgp ipv4 labeled-unicast 10.10.10.10/32"), "172.16.40.20")
	})
	label := n.BGP().Routes()[0].Labels[0] // 10.10.10.10/32 sorts first
	if out := vtysh("show bgp ipv4 labeled-unicast 10.10.10.10/32"); !strings.Contains(out, fmt.Sprintf("Remote label: %d", label)) {
		t.Errorf("FRR does not show our label %d:\n%s", label, out)
	}
}
