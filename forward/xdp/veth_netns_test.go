package xdp

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/mpls"
	"golang.org/x/sys/unix"
)

// vethLSR is a three-namespace line a -- l -- b with the program attached
// on l's two veths: frames injected on a's veth cross l inside the kernel
// and are read on b's veth.
type vethLSR struct {
	a, l, b        *netns.NS
	va, la, lb, vb string
	laIdx, lbIdx   int
	laMAC, lbMAC   net.HardwareAddr
	vbMAC          net.HardwareAddr
	prog           *Program
}

func newVethLSR(t *testing.T, model mpls.TTLModel) *vethLSR {
	t.Helper()
	netns.SkipUnlessRoot(t)
	v := &vethLSR{a: netns.New(t, "xa"), l: netns.New(t, "xl"), b: netns.New(t, "xb")}
	v.va, v.la = netns.VethPair(t, v.a, v.l)
	v.lb, v.vb = netns.VethPair(t, v.l, v.b)
	for _, c := range []struct {
		ns  *netns.NS
		dev string
	}{{v.a, v.va}, {v.l, v.la}, {v.l, v.lb}, {v.b, v.vb}} {
		c.ns.MustExec("ip", "link", "set", c.dev, "up")
		c.ns.MustExec("sysctl", "-qw", "net.ipv6.conf."+c.dev+".disable_ipv6=1")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(v.l.Run(func() error {
		for _, x := range []struct {
			dev string
			idx *int
			mac *net.HardwareAddr
		}{{v.la, &v.laIdx, &v.laMAC}, {v.lb, &v.lbIdx, &v.lbMAC}} {
			ifc, err := net.InterfaceByName(x.dev)
			if err != nil {
				return err
			}
			*x.idx, *x.mac = ifc.Index, ifc.HardwareAddr
		}
		return nil
	}))
	must(v.b.Run(func() error {
		ifc, err := net.InterfaceByName(v.vb)
		if err == nil {
			v.vbMAC = ifc.HardwareAddr
		}
		return err
	}))
	p, err := Load(model)
	must(err)
	t.Cleanup(func() { p.Close() })
	must(v.l.Run(func() error {
		for _, l := range []Link{{Name: v.la, Index: v.laIdx, MAC: v.laMAC, MTU: 1500, Ingress: true},
			{Name: v.lb, Index: v.lbIdx, MAC: v.lbMAC, MTU: 1500, Ingress: true}} {
			if err := p.Attach(l); err != nil {
				return err
			}
		}
		return nil
	}))
	v.prog = p
	return v
}

// rawSocket opens an AF_PACKET socket on dev in ns for all ethertypes.
func rawSocket(t *testing.T, ns *netns.NS, dev string) int {
	t.Helper()
	var fd int
	err := ns.Run(func() error {
		ifc, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	return fd
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// receive reads frames on fd until it has n labelled or IP frames or the
// deadline passes, and returns what it saw.
func receive(fd, n int, deadline time.Time) [][]byte {
	var got [][]byte
	buf := make([]byte, 9000)
	for len(got) < n && time.Now().Before(deadline) {
		m, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil || m < 14 {
			continue
		}
		if typ := uint16(buf[12])<<8 | uint16(buf[13]); typ != 0x8847 && typ != 0x0800 {
			continue
		}
		got = append(got, bytes.Clone(buf[:m]))
	}
	return got
}

// TestVethRedirect: frames swapped and popped by the program cross the
// LSR namespace veth to veth and arrive rewritten; with the peer's NAPI
// off (GRO off, no XDP program on it) the kernel cannot take redirected
// frames, which is why egress links are enabled per link (SetEgressOK)
// and frames towards a disabled one are passed up.
func TestVethRedirect(t *testing.T) {
	v := newVethLSR(t, mpls.TTLUniform)
	tx := rawSocket(t, v.a, v.va)
	rx := rawSocket(t, v.b, v.vb)
	// NAPI on the receiving side of the egress veth.
	v.b.MustExec("ethtool", "-K", v.vb, "gro", "on")
	if err := v.prog.SetEgressOK(v.lbIdx, true); err != nil {
		t.Fatal(err)
	}
	if err := v.prog.Sync([]Entry{
		{Label: 100, Action: mpls.ILMSwap, OutLabels: []mpls.Label{200}, Egress: v.lbIdx, NextHopMAC: v.vbMAC},
		{Label: 101, Action: mpls.ILMPopForward, Egress: v.lbIdx, NextHopMAC: v.vbMAC},
	}); err != nil {
		t.Fatal(err)
	}
	ip := ipv4(t, 64, 200)
	const n = 50
	send := func(label mpls.Label) {
		f := frame(v.laMAC, []mpls.Entry{{Label: label, S: true, TTL: 64}}, ip)
		for range n {
			if _, err := unix.Write(tx, f); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(100)
	got := receive(rx, n, time.Now().Add(5*time.Second))
	if len(got) != n {
		t.Fatalf("swap: received %d of %d frames on %s; program counters %v", len(got), n, v.vb, mustCounters(t, v.prog))
	}
	for _, f := range got {
		if !bytes.Equal(f[:6], v.vbMAC) || !bytes.Equal(f[6:12], v.lbMAC) || mpls.DecodeEntry(f[14:]) != (mpls.Entry{Label: 200, S: true, TTL: 63}) || !bytes.Equal(f[18:], ip) {
			t.Fatalf("swapped frame %x", f[:22])
		}
	}
	send(101)
	got = receive(rx, n, time.Now().Add(5*time.Second))
	if len(got) != n {
		t.Fatalf("pop: received %d of %d frames; counters %v", len(got), n, mustCounters(t, v.prog))
	}
	for _, f := range got {
		if f[12] != 0x08 || f[13] != 0 || f[14+8] != 63 || !ipv4ChecksumOK(f[14:34]) {
			t.Fatalf("popped frame %x", f[:34])
		}
	}
	c := mustCounters(t, v.prog)
	if c["swapped"] != n || c["popped_ip"] != n {
		t.Fatalf("counters %v, want swapped and popped_ip %d", c, n)
	}

	// A disabled egress: frames are passed up to the LSR's stack (and so
	// never reach b), counted as egress_down.
	if err := v.prog.SetEgressOK(v.lbIdx, false); err != nil {
		t.Fatal(err)
	}
	send(100)
	if got := receive(rx, 1, time.Now().Add(500*time.Millisecond)); len(got) != 0 {
		t.Fatalf("egress disabled: %d frames still crossed", len(got))
	}
	if c := mustCounters(t, v.prog); c["egress_down"] != n {
		t.Fatalf("counters %v, want egress_down %d", c, n)
	}
}

// TestRedirectCapable: a veth takes redirected frames only while its peer
// runs NAPI (GRO on, or an XDP program); RedirectCapable reads that from
// the kernel's netdev family, so that the node enables an egress link only
// when frames redirected into it arrive. With the peer's GRO off, the
// kernel drops redirected frames (counted as receive drops of the ingress
// veth), which is what SetEgressOK(false) avoids.
func TestRedirectCapable(t *testing.T) {
	v := newVethLSR(t, mpls.TTLUniform)
	tx := rawSocket(t, v.a, v.va)
	rx := rawSocket(t, v.b, v.vb)
	capable := func() bool {
		t.Helper()
		var ok bool
		if err := v.l.Run(func() (err error) { ok, err = RedirectCapable(v.lbIdx); return err }); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	v.b.MustExec("ethtool", "-K", v.vb, "gro", "off")
	if capable() {
		t.Fatalf("%s reported redirect-capable with its peer's GRO off", v.lb)
	}
	if err := v.prog.SetEgressOK(v.lbIdx, true); err != nil {
		t.Fatal(err)
	}
	if err := v.prog.Sync([]Entry{{Label: 100, Action: mpls.ILMSwap, OutLabels: []mpls.Label{200}, Egress: v.lbIdx, NextHopMAC: v.vbMAC}}); err != nil {
		t.Fatal(err)
	}
	f := frame(v.laMAC, []mpls.Entry{{Label: 100, S: true, TTL: 64}}, ipv4(t, 64, 100))
	const n = 20
	for range n {
		if _, err := unix.Write(tx, f); err != nil {
			t.Fatal(err)
		}
	}
	if got := receive(rx, n, time.Now().Add(time.Second)); len(got) != 0 {
		t.Fatalf("%d frames crossed into a veth whose peer has no NAPI: the kernel rule changed, revisit RedirectCapable", len(got))
	}
	v.b.MustExec("ethtool", "-K", v.vb, "gro", "on")
	if !capable() {
		t.Fatalf("%s not redirect-capable with its peer's GRO on", v.lb)
	}
	for range n {
		if _, err := unix.Write(tx, f); err != nil {
			t.Fatal(err)
		}
	}
	if got := receive(rx, n, time.Now().Add(5*time.Second)); len(got) != n {
		t.Fatalf("peer GRO on: %d of %d frames arrived; counters %v", len(got), n, mustCounters(t, v.prog))
	}
}
