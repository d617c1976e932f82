package afpacket_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/link/afpacket"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// scapyPython is the Debian python3 that has python3-scapy.
const scapyPython = "/usr/bin/python3"

// frameCatcher is a dispatcher that hands every frame whose bytes 12..13
// are one of the wanted ethertypes to a channel (the kernel's own
// traffic, if any, is ignored).
type frameCatcher struct {
	want map[uint16]bool
	ch   chan []byte
}

func (c *frameCatcher) DeliverNetworkPacket(_ tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	b := pkt.Data().AsRange().ToSlice()
	if len(b) < 14 || !c.want[uint16(b[12])<<8|uint16(b[13])] {
		return
	}
	select {
	case c.ch <- b:
	default:
	}
}

func (c *frameCatcher) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// TestRingReceiveVLANTag sends, with python3-scapy from the kernel side
// of a veth, frames carrying one VLAN tag (802.1Q, TPID 0x8100, and
// 802.1ad, TPID 0x88a8) with PCP, DEI and VLAN id all non-zero, and
// receives them through the endpoint in each receive mode (the TPACKET_V2
// frame ring, the TPACKET_V3 block ring, recvmmsg). The receiving kernel
// takes the tag out of the frame (skb_vlan_untag) and hands it over in
// tp_vlan_tci / tp_vlan_tpid (PACKET_AUXDATA for recvmmsg); the endpoint
// must put it back exactly as it was on the wire: the frame delivered
// equals, byte for byte, the frame scapy built and sent (IEEE 802.1Q §9:
// TPID then TCI = PCP(3) DEI(1) VID(12), network byte order, here
// 81 00 b1 23 for PCP 5, DEI 1, VID 0x123).
//
// Guards link/afpacket/ring.go writing the tag back in host byte order
// (mutants w01, w01b). Checked by planting the bug: with the block ring's
// binary.BigEndian.PutUint16(fh[start+14:], tci) changed to
// binary.NativeEndian, "block ring/802.1Q" fails with "tag bytes 8100
// 23b1, want 8100 b123 (TPID, TCI: PCP 5 DEI 1 VID 0x123)" (and 802.1ad
// with 88a8 23b1); the frame ring's (buf[start+14:]) likewise fails in
// "frame ring/802.1Q" and "frame ring/802.1ad".
func TestRingReceiveVLANTag(t *testing.T) {
	tp := newTopo(t)
	if err := exec.Command(scapyPython, "-c", "import scapy.all").Run(); err != nil {
		t.Skipf("needs python3-scapy (Debian package; scripts/deps.sh installs it) to craft frames: %v", err)
	}
	tp.a.MustExec("sysctl", "-qw", "net.ipv6.conf."+tp.va+".disable_ipv6=1")
	tp.b.MustExec("sysctl", "-qw", "net.ipv6.conf."+tp.vb+".disable_ipv6=1")

	modes := []struct {
		name string
		opts afpacket.Options
		want afpacket.Mode
	}{
		{"frame ring", afpacket.Options{Mode: afpacket.ModeRing, RXRingFrames: 64}, afpacket.ModeRing},
		{"block ring", afpacket.Options{Mode: afpacket.ModeRing, RXRing: afpacket.RXRingBlock, RingBlockSize: 16 << 10, RingBlocks: 4, RingBlockTimeout: 1}, afpacket.ModeRing},
		{"recvmmsg", afpacket.Options{Mode: afpacket.ModeMMsg}, afpacket.ModeMMsg},
	}
	tags := []struct {
		name  string
		scapy string // the tag layer
		tpid  uint16
		tci   uint16 // PCP 5, DEI 1, VID 0x123, as IEEE 802.1Q lays it out
	}{
		{"802.1Q", "Dot1Q(prio=5, id=1, vlan=0x123, type=0x88b5)", 0x8100, 0xb123},
		{"802.1ad", "Dot1AD(prio=5, id=1, vlan=0x123, type=0x88b5)", 0x88a8, 0xb123},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			opts := m.opts
			opts.Interface = tp.va
			rx, err := openIn(t, tp.a, opts)
			if err != nil {
				t.Fatalf("afpacket.New(%+v): %v", opts, err)
			}
			t.Cleanup(func() { rx.Close(); rx.Wait() })
			if rx.Mode() != m.want {
				t.Fatalf("endpoint runs %v, want %v (fallback: %s)", rx.Mode(), m.want, rx.FallbackReason())
			}
			c := &frameCatcher{want: map[uint16]bool{0x8100: true, 0x88a8: true, 0x88b5: true}, ch: make(chan []byte, 16)}
			rx.Attach(c)
			for _, tg := range tags {
				t.Run(tg.name, func(t *testing.T) {
					sent := scapySend(t, tp.b.Name(), tp.vb, tg.scapy)
					// What the specification says the tag is, independent
					// of scapy: TPID, then the TCI in network order.
					if len(sent) < 18 || uint16(sent[12])<<8|uint16(sent[13]) != tg.tpid || uint16(sent[14])<<8|uint16(sent[15]) != tg.tci {
						t.Fatalf("scapy built % x: not the tag this test means (TPID %#04x TCI %#04x)", sent, tg.tpid, tg.tci)
					}
					timer := time.NewTimer(5 * time.Second)
					defer timer.Stop()
					select {
					case got := <-c.ch:
						if !bytes.Equal(got[12:16], sent[12:16]) {
							t.Errorf("tag bytes %x %x, want %x %x (TPID, TCI: PCP 5 DEI 1 VID 0x123)", got[12:14], got[14:16], sent[12:14], sent[14:16])
						}
						if !bytes.Equal(got, sent) {
							t.Errorf("frame delivered\n% x\nwant (as sent)\n% x", got, sent)
						}
					case <-timer.C:
						t.Fatalf("no tagged frame delivered within 5 s; endpoint stats %+v", rx.Stats())
					}
				})
			}
		})
	}
}

// scapySend builds Ether()/tag/payload with scapy in namespace ns, sends
// it once on dev and returns the bytes it sent.
func scapySend(t *testing.T, ns, dev, tag string) []byte {
	t.Helper()
	script := `import sys
from scapy.all import Ether, Dot1Q, Dot1AD, Raw, sendp
f = Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:02")/` + tag + `/Raw(bytes(range(46)))
b = bytes(f)
sendp(f, iface=sys.argv[1], verbose=False)
print(b.hex())
`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", ns, scapyPython, "-c", script, dev).CombinedOutput()
	if err != nil {
		t.Fatalf("scapy: %v: %s", err, out)
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		t.Fatalf("scapy printed nothing")
	}
	b, err := hex.DecodeString(lines[len(lines)-1])
	if err != nil {
		t.Fatalf("scapy output %q: %v", out, err)
	}
	return b
}
