package virtionet

import (
	"encoding/binary"
	"testing"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// frameSpec describes a TCP frame for TestIsGSOFrame.
type frameSpec struct {
	pushed   bool   // headers pushed as gVisor's TCP does (Data = payload); else Data = the IP packet, as forward's GRO builds it
	v6       bool   // IPv6 (40-byte header), else IPv4
	ipHL     int    // IP header bytes (0: 20 or 40); an IPv4 header's IHL says ihl (0: ipHL)
	ihl      int    //
	tcpLen   int    // TCP header bytes, options included (data offset ipHL+12 says tcpLen/4)
	payload  int    // TCP payload bytes
	ethType  uint16 // 0: the IP version's
	linkLen  int    // 0: 14 (Ethernet); 18 with an 802.1Q tag
	gso      stack.GSO
	noGSOSet bool // gso as given, not filled in
}

// build makes the frame: Ethernet, IP, TCP, payload, GSOOptions.
func (f frameSpec) build() *stack.PacketBuffer {
	if f.ipHL == 0 {
		f.ipHL = header.IPv4MinimumSize
		if f.v6 {
			f.ipHL = header.IPv6MinimumSize
		}
	}
	if f.ihl == 0 {
		f.ihl = f.ipHL
	}
	if f.linkLen == 0 {
		f.linkLen = header.EthernetMinimumSize
	}
	ip := make([]byte, f.ipHL)
	ip[0] = 0x40 | byte(f.ihl/4)
	if f.v6 {
		ip[0] = 0x60
	}
	tcp := make([]byte, f.tcpLen)
	tcp[12] = byte(f.tcpLen/4) << 4
	payload := make([]byte, f.payload)
	for i := range payload {
		payload[i] = 0x11 // a data offset of 4 words (16 bytes) if read as a TCP header
	}
	var pkt *stack.PacketBuffer
	if f.pushed {
		pkt = stack.NewPacketBuffer(stack.PacketBufferOptions{ReserveHeaderBytes: f.linkLen + f.ipHL + f.tcpLen,
			Payload: buffer.MakeWithData(payload)})
		copy(pkt.TransportHeader().Push(f.tcpLen), tcp)
		copy(pkt.NetworkHeader().Push(f.ipHL), ip)
	} else {
		pkt = stack.NewPacketBuffer(stack.PacketBufferOptions{ReserveHeaderBytes: f.linkLen,
			Payload: buffer.MakeWithData(append(append(ip, tcp...), payload...))})
	}
	eth := pkt.LinkHeader().Push(f.linkLen)
	typ := f.ethType
	if typ == 0 {
		typ = uint16(header.IPv4ProtocolNumber)
		if f.v6 {
			typ = uint16(header.IPv6ProtocolNumber)
		}
	}
	binary.BigEndian.PutUint16(eth[f.linkLen-2:], typ)
	if f.linkLen == 18 {
		binary.BigEndian.PutUint16(eth[12:], 0x8100)
	}
	pkt.GSOOptions = f.gso
	if !f.noGSOSet {
		g := &pkt.GSOOptions
		g.Type, g.NeedsCsum, g.CsumOffset, g.L3HdrLen = stack.GSOTCPv4, true, header.TCPChecksumOffset, uint16(f.ipHL)
		if f.v6 {
			g.Type = stack.GSOTCPv6
		}
		if g.MSS == 0 {
			g.MSS = 1000
		}
	}
	return pkt
}

// TestIsGSOFrame is the table of what may leave whole (IsGSOFrame) and
// the header ForPacket then builds. Each row is one of the rules in
// IsGSOFrame's doc; the rows marked "drift" are what link/afpacket's own
// copy (isGSOFrame) got wrong: it did not ask for
// NeedsCsum, and it counted the payload with the minimum TCP header. The
// rows of "gVisor shape" are what both header writers got wrong (this
// package's and link/afpacket's): they read the TCP header from pkt.Data(),
// which for a packet of gVisor's TCP (headers pushed) is the payload, and
// took Data for the whole IP packet.
func TestIsGSOFrame(t *testing.T) {
	for _, c := range []struct {
		name   string
		f      frameSpec
		whole  bool
		hdrLen uint16 // of the header ForPacket builds, when whole
	}{
		{"GRO shape, 12 bytes of options, 3 segments", frameSpec{tcpLen: 32, payload: 3000}, true, 14 + 20 + 32},
		{"gVisor shape (headers pushed), 12 bytes of options, 3 segments", frameSpec{pushed: true, tcpLen: 32, payload: 3000}, true, 14 + 20 + 32},
		{"drift: gVisor shape, payload MSS+8 (two segments)", frameSpec{pushed: true, tcpLen: 32, payload: 1008}, true, 14 + 20 + 32},
		{"drift: GRO shape, options, payload MSS-4 (one segment)", frameSpec{tcpLen: 32, payload: 996}, false, 0},
		{"payload MSS exactly (one segment)", frameSpec{tcpLen: 20, payload: 1000}, false, 0},
		{"payload MSS+1", frameSpec{tcpLen: 20, payload: 1001}, true, 14 + 20 + 20},
		{"drift: no NeedsCsum (checksum full)", frameSpec{tcpLen: 20, payload: 3000, noGSOSet: true,
			gso: stack.GSO{Type: stack.GSOTCPv4, CsumOffset: 16, MSS: 1000, L3HdrLen: 20}}, false, 0},
		{"checksum offset not TCP's", frameSpec{tcpLen: 20, payload: 3000, noGSOSet: true,
			gso: stack.GSO{Type: stack.GSOTCPv4, NeedsCsum: true, CsumOffset: 6, MSS: 1000, L3HdrLen: 20}}, false, 0},
		{"MSS 0", frameSpec{tcpLen: 20, payload: 3000, noGSOSet: true,
			gso: stack.GSO{Type: stack.GSOTCPv4, NeedsCsum: true, CsumOffset: 16, L3HdrLen: 20}}, false, 0},
		{"no GSO", frameSpec{tcpLen: 20, payload: 3000, noGSOSet: true}, false, 0},
		{"gVisor GSO (GSOGvisor)", frameSpec{tcpLen: 20, payload: 3000, noGSOSet: true,
			gso: stack.GSO{Type: stack.GSOGvisor, NeedsCsum: true, CsumOffset: 16, MSS: 1000, L3HdrLen: 20}}, false, 0},
		{"MPLS EtherType", frameSpec{tcpLen: 20, payload: 3000, ethType: 0x8847}, false, 0},
		{"IPv6 EtherType under TCPv4", frameSpec{tcpLen: 20, payload: 3000, ethType: 0x86dd}, false, 0},
		{"802.1Q tag", frameSpec{tcpLen: 20, payload: 3000, linkLen: 18}, false, 0},
		{"IPv4 L3HdrLen below 20", frameSpec{tcpLen: 20, payload: 3000, ipHL: 16, ihl: 16}, false, 0},
		{"IPv4 IHL other than L3HdrLen", frameSpec{tcpLen: 20, payload: 3000, ipHL: 24, ihl: 20}, false, 0},
		{"IPv4 with 4 bytes of IP options", frameSpec{tcpLen: 20, payload: 3000, ipHL: 24}, true, 14 + 24 + 20},
		{"TCP data offset below 5", frameSpec{tcpLen: 16, payload: 3000}, false, 0},
		{"IPv4 packet over 65535 bytes", frameSpec{tcpLen: 20, payload: 0xFFFF - 39}, false, 0},
		{"IPv4 packet of 65535 bytes", frameSpec{tcpLen: 20, payload: 0xFFFF - 40}, true, 14 + 20 + 20},
		{"IPv6, options, gVisor shape", frameSpec{v6: true, pushed: true, tcpLen: 32, payload: 3000}, true, 14 + 40 + 32},
		{"IPv6 with an extension header", frameSpec{v6: true, ipHL: 48, tcpLen: 20, payload: 3000}, true, 14 + 48 + 20},
		{"IPv6 L3HdrLen 20", frameSpec{v6: true, ipHL: 20, tcpLen: 20, payload: 3000}, false, 0},
		{"IPv6 payload of 65535 bytes", frameSpec{v6: true, tcpLen: 20, payload: 0xFFFF - 20}, true, 14 + 40 + 20},
		{"IPv6 payload over 65535 bytes", frameSpec{v6: true, tcpLen: 20, payload: 0xFFFF - 19}, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			pkt := c.f.build()
			defer pkt.DecRef()
			if got := IsGSOFrame(pkt); got != c.whole {
				t.Fatalf("IsGSOFrame = %v, want %v", got, c.whole)
			}
			h := ForPacket(pkt)
			if !c.whole {
				if h != (Hdr{}) {
					t.Errorf("ForPacket = %+v, want the zero header", h)
				}
				return
			}
			g := pkt.GSOOptions
			typ := uint8(GSOTCPv4)
			if c.f.v6 {
				typ = GSOTCPv6
			}
			want := Hdr{Flags: FlagNeedsCsum, GSOType: typ, HdrLen: c.hdrLen, GSOSize: g.MSS,
				CsumStart: uint16(14 + g.L3HdrLen), CsumOffset: 16}
			if h != want {
				t.Errorf("ForPacket = %+v, want %+v", h, want)
			}
		})
	}
}

// TestIsGSOFrameAllocs: the decision allocates nothing (it runs for each
// packet a link writes).
func TestIsGSOFrameAllocs(t *testing.T) {
	pkt := frameSpec{pushed: true, tcpLen: 32, payload: 3000}.build()
	defer pkt.DecRef()
	if n := testing.AllocsPerRun(100, func() { _ = ForPacket(pkt) }); n != 0 {
		t.Errorf("ForPacket allocates %v times, want 0", n)
	}
}
