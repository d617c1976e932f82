package afpacket_test

import (
	"net"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/mplsnode/mplsnode/internal/testkit/linktest"
	"github.com/mplsnode/mplsnode/link/afpacket"
	"golang.org/x/sys/unix"
)

// TestUnflaggedChecksums injects frames from a packet socket in ns b: the
// kernel computes no checksum for them, so they arrive without
// TP_STATUS_CSUM* flags and, with RXChecksumOffload, are checked in software.
func TestUnflaggedChecksums(t *testing.T) {
	tp := newTopo(t)
	// Quiet ns b's kernel (IPv6 ND/MLD) so that only our frames arrive.
	tp.b.MustExec("sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf."+tp.vb+".disable_ipv6=1")
	ep, err := openIn(t, tp.a, afpacket.Options{Interface: tp.va, RXChecksumOffload: true})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	linktest.NewStack(t, ep, gvisorAddr, false)
	// quiet lets frames already in flight drain: it waits (bounded) for
	// 300 ms without a received frame. Each case starts quiet: the good
	// frame's ICMP port unreachable makes the stack resolve ns b's address,
	// and ns b's ARP reply, arriving during the next case, would count as
	// a delivered frame there.
	quiet := func() {
		for i, last := 0, ep.Stats().RXPackets; i < 20; i++ {
			time.Sleep(300 * time.Millisecond)
			now := ep.Stats().RXPackets
			if now == last {
				break
			}
			last = now
		}
	}
	quiet()

	var fd int
	if err := tp.b.Run(func() error {
		ifi, err := net.InterfaceByName(tp.vb)
		if err != nil {
			return err
		}
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
	}); err != nil {
		t.Fatalf("injector socket: %v", err)
	}
	defer unix.Close(fd)

	for _, tc := range []struct {
		name    string
		corrupt func(frame []byte) // frame[14:] is the IPv4 header, frame[34:] the UDP header
		wantBad uint64
	}{
		{"good UDP", func([]byte) {}, 0},
		{"bad UDP checksum", func(f []byte) { f[34+7] ^= 0x55 }, 1},
		{"bad payload byte", func(f []byte) { f[34+8] ^= 0x01 }, 1},
		{"bad IPv4 header checksum", func(f []byte) { f[14+11] ^= 0x55 }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			quiet()
			before := ep.Stats()
			frame := udpFrame(t, net.HardwareAddr(ep.LinkAddress()))
			tc.corrupt(frame)
			if _, err := unix.Write(fd, frame); err != nil {
				t.Fatalf("inject: %v", err)
			}
			// Wait (bounded) until the frame is counted one way or the other.
			var after afpacket.Stats
			for i := 0; i < 200; i++ {
				after = ep.Stats()
				if after.RXPackets+after.RXBadChecksum > before.RXPackets+before.RXBadChecksum {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if got := after.RXBadChecksum - before.RXBadChecksum; got != tc.wantBad {
				t.Errorf("got RXBadChecksum delta = %d, want %d", got, tc.wantBad)
			}
			// A good frame goes up (and the stack's reply may add an ARP
			// reply from ns b); a bad one must not.
			got := after.RXPackets - before.RXPackets
			if tc.wantBad == 0 && got < 1 {
				t.Errorf("got RXPackets delta = %d, want >= 1", got)
			}
			if tc.wantBad != 0 && got != 0 {
				t.Errorf("got RXPackets delta = %d, want 0", got)
			}
		})
	}
}

// udpFrame builds Ethernet/IPv4/UDP 10.99.1.2:9 -> 10.99.1.1:9 with correct
// checksums (gopacket computes them: an independent oracle).
func udpFrame(t *testing.T, dst net.HardwareAddr) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, DstMAC: dst, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
		SrcIP: kernelAddr.Addr().AsSlice(), DstIP: gvisorAddr.Addr().AsSlice()}
	udp := &layers.UDP{SrcPort: 9, DstPort: 9}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, eth, ip, udp, gopacket.Payload("checksum me")); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
