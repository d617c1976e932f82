package afpacket_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/link/afpacket"
	"github.com/mplsnode/mplsnode/mplstest"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// TestGSOWholeDecision drives packets through the endpoint's real write
// path (Options.GSOFrames, the PACKET_VNET_HDR socket) and reads, in the
// peer namespace, each frame with the virtio-net header the peer's kernel
// builds from its skb (PACKET_VNET_HDR on the reading socket too): the GSO
// type and size and NEEDS_CSUM show what our header told the kernel. What
// may leave whole is virtionet.IsGSOFrame; the cases are those
// link/afpacket's own drifted copy got wrong, and each fails with it
// planted back:
//
//   - a packet as gVisor's TCP hands it down (headers pushed, Data the
//     payload alone), 12 bytes of TCP options and a payload 30 bytes over
//     the MSS: two segments, so it leaves whole (the drifted copy took
//     Data for the IP packet and wanted MSS+40 bytes: a zero header, a
//     frame over the MTU, EMSGSIZE);
//   - a packet with options and a payload 4 bytes under the MSS, its
//     checksum finished (one segment, as link/mplsendpoint leaves it):
//     a plain frame (the drifted copy counted the minimum TCP header and
//     sent a GSO header saying NEEDS_CSUM);
//   - a packet of two segments whose GSOOptions do not say NeedsCsum (its
//     checksum is full): a plain frame, as it fits the MTU (the drifted
//     copy told the kernel the finished checksum was partial);
//   - and a GSO packet with options as forward's GRO builds it (Data the
//     IP packet): whole, the control.
func TestGSOWholeDecision(t *testing.T) {
	tp := newTopo(t)
	ep := openGSOFrames(t, tp)
	fd := peerSocket(t, tp, true, 200*time.Millisecond)
	waitCarried(t, ep, fd)

	src := netip.MustParseAddr("10.99.1.1")
	dst := netip.MustParseAddr("10.99.1.9")                // nobody's: the peer's kernel drops them
	options := []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2} // NOP NOP timestamps: 12 bytes
	for i, c := range []struct {
		name    string
		pushed  bool // headers pushed (gVisor's TCP), else in Data (GRO)
		opts    []byte
		payload int
		gso     stack.GSO
		whole   bool
	}{
		{"gVisor shape, options, payload MSS+30", true, options, 1448 + 30,
			stack.GSO{Type: stack.GSOTCPv4, NeedsCsum: true, CsumOffset: 16, MSS: 1448, L3HdrLen: 20}, true},
		{"options, one segment (payload MSS-4), checksum finished", false, options, 1000 - 4,
			stack.GSO{Type: stack.GSOTCPv4, NeedsCsum: true, CsumOffset: 16, MSS: 1000, L3HdrLen: 20}, false},
		{"two segments, no NeedsCsum (checksum full)", false, nil, 1200,
			stack.GSO{Type: stack.GSOTCPv4, CsumOffset: 16, MSS: 1000, L3HdrLen: 20}, false},
		{"GRO shape, options, 3 segments", false, options, 3000,
			stack.GSO{Type: stack.GSOTCPv4, NeedsCsum: true, CsumOffset: 16, MSS: 1000, L3HdrLen: 20}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sport := uint16(41000 + i)
			ip := mplstest.IPv4TCP(mplstest.TCP{
				Src: netip.AddrPortFrom(src, sport), Dst: netip.AddrPortFrom(dst, 2000),
				Seq: 1, Flags: header.TCPFlagAck, DF: true, Options: c.opts,
				Payload: bytes.Repeat([]byte{0x11}, c.payload)})
			tcpLen := header.TCPMinimumSize + len(c.opts)
			if c.whole {
				// A partial checksum: the pseudo-header sum, as gVisor's
				// TCP and forward's GRO leave it for the kernel.
				sum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, tcpip.AddrFrom4(src.As4()), tcpip.AddrFrom4(dst.As4()), uint16(len(ip)-header.IPv4MinimumSize))
				binary.BigEndian.PutUint16(ip[header.IPv4MinimumSize+16:], sum)
			}
			var pkt *stack.PacketBuffer
			if c.pushed {
				l4 := header.IPv4MinimumSize + tcpLen
				pkt = stack.NewPacketBuffer(stack.PacketBufferOptions{ReserveHeaderBytes: header.EthernetMinimumSize + l4,
					Payload: buffer.MakeWithData(ip[l4:])})
				copy(pkt.TransportHeader().Push(tcpLen), ip[header.IPv4MinimumSize:l4])
				copy(pkt.NetworkHeader().Push(header.IPv4MinimumSize), ip[:header.IPv4MinimumSize])
				pkt.TransportProtocolNumber = header.TCPProtocolNumber
			} else {
				pkt = stack.NewPacketBuffer(stack.PacketBufferOptions{ReserveHeaderBytes: header.EthernetMinimumSize,
					Payload: buffer.MakeWithData(ip)})
			}
			defer pkt.DecRef()
			pkt.NetworkProtocolNumber = header.IPv4ProtocolNumber
			eth := header.Ethernet(pkt.LinkHeader().Push(header.EthernetMinimumSize))
			eth.Encode(&header.EthernetFields{SrcAddr: ep.LinkAddress(), DstAddr: "\xff\xff\xff\xff\xff\xff", Type: header.IPv4ProtocolNumber})
			pkt.GSOOptions = c.gso
			want := append(append([]byte(nil), eth...), ip...)

			var l stack.PacketBufferList
			l.PushBack(pkt)
			if n, err := ep.WritePackets(l); n != 1 || err != nil {
				t.Fatalf("WritePackets: %d, %v", n, err)
			}
			vh, got := recvVnet(t, fd, sport)
			if got == nil {
				t.Fatalf("no frame arrived in the peer namespace (a %d-byte frame over the 1514-byte MTU behind a zero header: EMSGSIZE?); afpacket stats %+v", len(want), ep.Stats())
			}
			if len(got) != len(want) {
				t.Fatalf("peer read a %d-byte frame, want the %d bytes sent", len(got), len(want))
			}
			cs := header.EthernetMinimumSize + header.IPv4MinimumSize + 16
			if !bytes.Equal(got[:cs], want[:cs]) || !bytes.Equal(got[cs+2:], want[cs+2:]) {
				t.Error("the frame arrived changed")
			}
			const needsCsum, gsoTCPv4 = 1, 1 // VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4
			flags, gsoType := vh[0], vh[1]
			gsoSize, csumStart, csumOff := binary.NativeEndian.Uint16(vh[4:]), binary.NativeEndian.Uint16(vh[6:]), binary.NativeEndian.Uint16(vh[8:])
			if c.whole {
				if gsoType != gsoTCPv4 || gsoSize != c.gso.MSS || flags&needsCsum == 0 || csumStart != 14+20 || csumOff != 16 {
					t.Errorf("peer's virtio-net header: flags %#x, gso type %d, size %d, csum %d+%d; want a TCPv4 GSO frame of MSS %d, NEEDS_CSUM at 34+16",
						flags, gsoType, gsoSize, csumStart, csumOff, c.gso.MSS)
				}
				return
			}
			if gsoType != 0 || flags&needsCsum != 0 {
				t.Errorf("peer's virtio-net header: flags %#x, gso type %d, size %d; want a plain frame (no GSO, no NEEDS_CSUM: its checksum is finished)", flags, gsoType, gsoSize)
			}
			if !bytes.Equal(got, want) || !header.IPv4(got[14:]).IsChecksumValid() {
				t.Error("the plain frame arrived changed")
			}
			tcp := header.TCP(got[14+20:])
			data := got[14+20+tcp.DataOffset():]
			if !tcp.IsChecksumValid(tcpip.AddrFrom4(src.As4()), tcpip.AddrFrom4(dst.As4()), checksum.Checksum(data, 0), uint16(len(data))) {
				t.Error("the plain frame's TCP checksum is not valid")
			}
		})
	}
}

// openGSOFrames opens the endpoint in ns a on va with Options.GSOFrames;
// it is closed when t ends.
func openGSOFrames(t *testing.T, tp topo) *afpacket.Endpoint {
	t.Helper()
	ep, err := openIn(t, tp.a, afpacket.Options{Interface: tp.va, GSOFrames: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	return ep
}

// peerSocket opens, in ns b, a packet socket for the IPv4 frames vb
// receives, with PACKET_VNET_HDR when vnet (each frame read then comes
// after the virtio-net header the peer's kernel builds from its skb), and
// the given receive timeout; it is closed when t ends.
func peerSocket(t *testing.T, tp topo, vnet bool, timeout time.Duration) int {
	t.Helper()
	fd := -1
	if err := tp.b.Run(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_IP)))
		if err != nil {
			return err
		}
		if vnet {
			if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
				return err
			}
		}
		ifi, err := net.InterfaceByName(tp.vb)
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: ifi.Index})
	}); err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	return fd
}

// recvVnet returns the virtio-net header and frame of the next IPv4 TCP
// frame from source port sport that fd reads within 2 seconds; nil frame
// when none came.
func recvVnet(t *testing.T, fd int, sport uint16) ([]byte, []byte) {
	t.Helper()
	buf := make([]byte, 10+1<<16)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("recv in the peer namespace: %v", err)
		}
		f := buf[10:n]
		if len(f) < 14+20+20 || header.IPv4(f[14:]).Protocol() != uint8(header.TCPProtocolNumber) ||
			header.TCP(f[14+20:]).SourcePort() != sport {
			continue
		}
		return buf[:10], f
	}
	return nil, nil
}

// waitCarried sends a small plain frame every 100 ms until the peer's
// socket fd reads it, for up to 5 seconds: the first frames after a veth
// comes up may be dropped (its queueing discipline is the no-op one until
// the kernel's link watch activates the device), and a case must not
// mistake that for a frame the kernel refused.
func waitCarried(t *testing.T, ep *afpacket.Endpoint, fd int) {
	t.Helper()
	const sport = 40999
	ip := mplstest.IPv4TCP(mplstest.TCP{Src: netip.MustParseAddrPort("10.99.1.1:40999"), Dst: netip.MustParseAddrPort("10.99.1.9:2000"),
		Seq: 1, Flags: header.TCPFlagAck})
	buf := make([]byte, 10+1<<16)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{ReserveHeaderBytes: header.EthernetMinimumSize, Payload: buffer.MakeWithData(ip)})
		header.Ethernet(pkt.LinkHeader().Push(header.EthernetMinimumSize)).Encode(&header.EthernetFields{
			SrcAddr: ep.LinkAddress(), DstAddr: "\xff\xff\xff\xff\xff\xff", Type: header.IPv4ProtocolNumber})
		var l stack.PacketBufferList
		l.PushBack(pkt)
		_, _ = ep.WritePackets(l)
		pkt.DecRef()
		for until := time.Now().Add(100 * time.Millisecond); time.Now().Before(until); {
			if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 20_000}); err != nil {
				t.Fatal(err)
			}
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				continue
			}
			if f := buf[10:n]; len(f) >= 14+20+20 && header.IPv4(f[14:]).Protocol() == uint8(header.TCPProtocolNumber) &&
				header.TCP(f[14+20:]).SourcePort() == sport {
				if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200_000}); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
	}
	t.Fatal("no frame crossed the veth within 5 seconds")
}
