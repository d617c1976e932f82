package mplsendpoint_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/internal/testkit/tshark"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// Deterministic inputs of the golden frames.
var (
	goldenDst1 = netip.MustParseAddr("10.0.0.2") // FIB: label 100
	goldenDst2 = netip.MustParseAddr("10.0.0.3") // FIB: labels 100/200
)

// goldenEndpoint returns an endpoint over a recording Sink (link MTU 1500)
// whose FIB pushes 100 towards goldenDst1 and 100/200 towards goldenDst2,
// uniform TTL model, TC 0.
func goldenEndpoint(t *testing.T) (*mplsendpoint.Endpoint, *mplstest.Sink, *recorder) {
	t.Helper()
	tables := routeTables(t, append(hostRoutes([]mpls.Label{100}, goldenDst1, goldenDst1),
		hostRoutes([]mpls.Label{100, 200}, goldenDst1, goldenDst2)...))
	sink := mplstest.NewSink(1500, macA)
	sink.Record = true
	ep, err := mplsendpoint.New(sink, mplsendpoint.Options{Tables: tables})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	ep.Attach(rec)
	return ep, sink, rec
}

// writeTCP builds a PacketBuffer from the IP packet ip (20-byte IPv4 header
// or 40-byte IPv6 header, then TCP) as gVisor's TCP and IP layers would
// (transport header, network header, payload as data, egress route MACs),
// and pushes it through AddHeader and WritePackets. With g.NeedsCsum the
// TCP checksum field is replaced by the pseudo-header sum, as gVisor's TCP
// leaves it for host GSO.
func writeTCP(ep *mplsendpoint.Endpoint, ip []byte, g stack.GSO) {
	proto, l3 := header.IPv4ProtocolNumber, header.IPv4MinimumSize
	if ip[0]>>4 == 6 {
		proto, l3 = header.IPv6ProtocolNumber, header.IPv6MinimumSize
	}
	seg := append([]byte(nil), ip[l3:]...)
	tcp := header.TCP(seg)
	if g.NeedsCsum {
		var src, dst tcpip.Address
		if proto == header.IPv4ProtocolNumber {
			src, dst = header.IPv4(ip).SourceAddress(), header.IPv4(ip).DestinationAddress()
		} else {
			src, dst = header.IPv6(ip).SourceAddress(), header.IPv6(ip).DestinationAddress()
		}
		tcp.SetChecksum(header.PseudoHeaderChecksum(header.TCPProtocolNumber, src, dst, uint16(len(seg))))
	}
	thl := int(tcp.DataOffset())
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{
		ReserveHeaderBytes: int(ep.MaxHeaderLength()) + l3 + thl,
		Payload:            buffer.MakeWithData(seg[thl:]),
	})
	copy(pkt.TransportHeader().Push(thl), seg)
	copy(pkt.NetworkHeader().Push(l3), ip)
	pkt.NetworkProtocolNumber = proto
	pkt.TransportProtocolNumber = header.TCPProtocolNumber
	pkt.EgressRoute.LocalLinkAddress = macA
	pkt.EgressRoute.RemoteLinkAddress = macB
	pkt.GSOOptions = g
	dst := netip.AddrFrom4(header.IPv4(ip).DestinationAddress().As4())
	if proto == header.IPv6ProtocolNumber {
		dst = netip.AddrFrom16(header.IPv6(ip).DestinationAddress().As16())
	}
	addHeader(ep, pkt, dst)
	var l stack.PacketBufferList
	l.PushBack(pkt)
	ep.WritePackets(l)
	l.DecRef()
}

// goldenCases produce the frames (or, for the ICMP error, the IP packet
// the endpoint hands up to the stack) compared with testdata/golden/*.txt.
// No field is masked: every input is fixed.
var goldenCases = []struct {
	file     string
	linkType uint32 // pcap LINKTYPE for tshark
	// tcp is the IPv4 packet the stack writes, with GSO options gso;
	// icmp says the endpoint answers it with an ICMP error up the stack
	// (the frames checked) and puts nothing on the wire.
	tcp  mplstest.TCP
	gso  stack.GSO
	icmp bool
	// tshark fields and, per frame, the values they must decode to.
	fields []string
	want   []string
}{
	{
		file:     "labelled-syn.txt",
		linkType: linkTypeEthernet,
		tcp: mplstest.TCP{
			Src: netip.AddrPortFrom(addrA4, 40000), Dst: netip.AddrPortFrom(goldenDst1, 80),
			Seq: 1000, Flags: header.TCPFlagSyn, Window: 64240, ID: 1, DF: true,
			Options: []byte{2, 4, 0x05, 0xa8}, // MSS 1448
		},
		fields: []string{"mpls.label", "mpls.exp", "mpls.bottom", "mpls.ttl", "ip.checksum.status", "tcp.checksum.status", "tcp.flags.syn", "tcp.options.mss_val"},
		want:   []string{"100\t0\t1\t64\t1\t1\t1\t1448"},
	},
	{
		// A host-GSO packet of 24 payload bytes with MSS 12: two segments
		// after the push of 100/200.
		file:     "labelled-data.txt",
		linkType: linkTypeEthernet,
		tcp: mplstest.TCP{
			Src: netip.AddrPortFrom(addrA4, 40000), Dst: netip.AddrPortFrom(goldenDst2, 80),
			Seq: 1001, Ack: 5001, Flags: header.TCPFlagAck | header.TCPFlagPsh, Window: 502, ID: 2, DF: true,
			Payload: []byte("0123456789abcdefghijklmn"),
		},
		gso:    stack.GSO{Type: stack.GSOTCPv4, NeedsCsum: true, CsumOffset: 16, MSS: 12, L3HdrLen: header.IPv4MinimumSize},
		fields: []string{"mpls.label", "mpls.bottom", "mpls.ttl", "ip.id", "ip.checksum.status", "tcp.seq_raw", "tcp.flags.push", "tcp.len", "tcp.checksum.status"},
		want: []string{
			"100,200\t0,1\t64,64\t0x0002\t1\t1001\t0\t12\t1",
			"100,200\t0,1\t64,64\t0x0003\t1\t1013\t1\t12\t1",
		},
	},
	{
		// 1500-byte IPv4 DF packet: fits the link without labels, not with
		// label 100, so the endpoint answers "fragmentation needed" with
		// next-hop MTU 1500 - 4.
		file:     "icmp-frag-needed.txt",
		linkType: linkTypeIPv4,
		tcp: mplstest.TCP{
			Src: netip.AddrPortFrom(addrA4, 40000), Dst: netip.AddrPortFrom(goldenDst1, 80),
			Seq: 1001, Ack: 5001, Flags: header.TCPFlagAck, Window: 502, ID: 3, DF: true,
			Payload: make([]byte, 1500-header.IPv4MinimumSize-header.TCPMinimumSize),
		},
		icmp:   true,
		fields: []string{"ip.src", "ip.dst", "icmp.type", "icmp.code", "icmp.mtu", "ip.checksum.status", "icmp.checksum.status"},
		want:   []string{"10.0.0.2,10.0.0.1\t10.0.0.1,10.0.0.2\t3\t4\t1496\t1,1\t1"},
	},
}

// goldenFrames writes tcp with gso through a golden endpoint and returns
// the frames it put on the wire or, with icmp, the ICMP error it
// delivered up (then nothing may be on the wire).
func goldenFrames(t *testing.T, tcp mplstest.TCP, gso stack.GSO, icmp bool) [][]byte {
	ep, sink, rec := goldenEndpoint(t)
	writeTCP(ep, mplstest.IPv4TCP(tcp), gso)
	if !icmp {
		return sink.Frames()
	}
	if n := len(sink.Frames()); n != 0 {
		t.Errorf("got %d frames on the wire, want 0", n)
	}
	return rec.wait(t, "ICMP")
}

func TestGoldenFrames(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.file, func(t *testing.T) {
			got := goldenFrames(t, tc.tcp, tc.gso, tc.icmp)
			path := filepath.Join("testdata", "golden", tc.file)
			if os.Getenv("MPLSENDPOINT_DUMP_GOLDEN") != "" {
				for _, f := range got {
					fmt.Printf("%s %x\n", tc.file, f)
				}
			}
			want, err := readHexDump(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("got %d frames, want %d", len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Errorf("frame %d: got\n%s\nwant\n%s", i, hex.Dump(got[i]), hex.Dump(want[i]))
				}
			}
			checkWithTshark(t, tc.linkType, want, tc.fields, tc.want)
		})
	}
}

// readHexDump reads an annotated hex dump: '#' starts a comment running to
// the end of the line; the rest of each line is whitespace-separated hex
// bytes; a line "---" ends one frame and starts the next.
func readHexDump(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var frames [][]byte
	var cur []byte
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		s := sc.Text()
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s = s[:i]
		}
		s = strings.TrimSpace(s)
		if s == "---" {
			frames = append(frames, cur)
			cur = nil
			continue
		}
		for _, tok := range strings.Fields(s) {
			b, err := hex.DecodeString(tok)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", path, line, err)
			}
			cur = append(cur, b...)
		}
	}
	if len(cur) > 0 {
		frames = append(frames, cur)
	}
	return frames, sc.Err()
}

// pcap link types (https://www.tcpdump.org/linktypes.html).
const (
	linkTypeEthernet = 1
	linkTypeIPv4     = 228
)

// checkWithTshark decodes frames with tshark, an independent dissector, and
// compares the requested fields per frame; skipped without tshark.
func checkWithTshark(t *testing.T, linkType uint32, frames [][]byte, fields, want []string) {
	t.Helper()
	if !tshark.Installed() {
		t.Log("tshark not installed: golden bytes not decoded independently")
		return
	}
	got := tshark.Rows(t, tshark.WritePcap(t, linkType, frames), fields...)
	if len(got) != len(want) {
		t.Fatalf("tshark: got %d lines %q, want %d", len(got), got, len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("tshark frame %d: got %s = %q, want %q", i, strings.Join(fields, ","), got[i], want[i])
		}
	}
}
