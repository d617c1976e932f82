package lspping_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/internal/testkit/tshark"
	"github.com/mplsnode/mplsnode/lspping"
	"github.com/mplsnode/mplsnode/mpls"
)

// linkTypeRaw is pcap's LINKTYPE_RAW: records are IP packets.
const linkTypeRaw = 101

var (
	src    = netip.MustParseAddr("172.16.20.20")
	dst127 = netip.MustParseAddr("127.0.0.1")
)

// request is a request with every TLV and sub-TLV the package writes.
func request() *lspping.Message {
	d := lspping.NewDDMap(1500, netip.MustParseAddr("172.16.21.22"),
		[]lspping.DSLabel{{Entry: mpls.Entry{Label: 200, S: true}, Protocol: lspping.ProtoStatic}})
	d.Flags = lspping.DSFlagInterface
	mp := lspping.Bitmask(netip.MustParseAddr("127.0.0.0"), 32, func(i int) bool { return i%2 == 0 })
	d.Multipath = &mp
	return &lspping.Message{Version: 1, Flags: lspping.FlagValidateFEC, Type: lspping.Request,
		ReplyMode: lspping.ReplyUDP, Handle: 0x01020304, Seq: 7, Sent: 0xe9d1a2b3_80000000,
		HasFECStack: true, FECs: []lspping.FEC{
			{Type: lspping.FECLDPIPv4, Prefix: netip.MustParsePrefix("10.10.10.10/32")},
			{Type: lspping.FECBGPIPv4, Prefix: netip.MustParsePrefix("10.1.0.0/16")},
			{Type: lspping.FECGenericIPv4, Prefix: netip.MustParsePrefix("192.0.2.0/24")},
			{Type: lspping.FECLDPIPv6, Prefix: netip.MustParsePrefix("2001:db8::1/128")},
			{Type: lspping.FECBGPIPv6, Prefix: netip.MustParsePrefix("2001:db8:1::/48")},
			{Type: lspping.FECGenericIPv6, Prefix: netip.MustParsePrefix("2001:db8::/32")},
			{Type: lspping.FECNil, Label: 100},
		},
		DDMaps: []lspping.DDMap{d},
		Pad:    &lspping.Pad{Action: lspping.PadCopy, Len: 12},
	}
}

// reply is a reply with an Interface and Label Stack and an Errored TLVs
// TLV.
func reply() *lspping.Message {
	m := &lspping.Message{Version: 1, Type: lspping.Reply, ReplyMode: lspping.ReplyUDP,
		Code: lspping.CodeLabelSwitched, Subcode: 1, Handle: 9, Seq: 1, Sent: 1 << 32, Received: 2 << 32,
		DDMaps: []lspping.DDMap{
			lspping.NewDDMap(1496, netip.MustParseAddr("172.16.21.22"), []lspping.DSLabel{{Entry: mpls.Entry{Label: 3, S: true}, Protocol: lspping.ProtoStatic}}),
			lspping.NewDDMap(1496, netip.MustParseAddr("172.16.22.22"), []lspping.DSLabel{{Entry: mpls.Entry{Label: 300, S: true}, Protocol: lspping.ProtoStatic}}),
		},
		Interface: &lspping.InterfaceLabelStack{AddrType: lspping.AddrIPv4Numbered, Addr: netip.MustParseAddr("172.16.20.21"),
			Interface: netip.MustParseAddr("172.16.20.21"), Labels: []mpls.Entry{{Label: 100, TTL: 1, S: true}}},
		HasErrored: true, Errored: []lspping.TLV{{Type: 0x7777, Value: []byte{1, 2, 3, 4}}},
	}
	return m
}

// The golden request: the Target FEC Stack and the DDMAP, byte by byte,
// each group commented with what tshark's mpls-echo dissector reads there.
const goldenRequest = "" +
	"0001 0001" + // Version: 1, Global Flags: Validate FEC Stack
	"01 02 00 00" + // Message Type: request, Reply Mode: IPv4/IPv6 UDP, Return Code 0, Subcode 0
	"01020304 00000007" + // Sender's Handle, Sequence Number: 7
	"e9d1a2b3 80000000 00000000 00000000" + // Timestamp Sent, Timestamp Received
	"0001 0074" + // Target FEC Stack, Length: 116
	"0001 0005 0a0a0a0a 20 000000" + // LDP IPv4 prefix 10.10.10.10/32, Padding: 000000
	"000c 0005 0a010000 10 000000" + // BGP labeled IPv4 prefix 10.1.0.0/16
	"000e 0005 c0000200 18 000000" + // Generic IPv4 prefix 192.0.2.0/24
	"0002 0011 20010db8000000000000000000000001 80 000000" + // LDP IPv6 prefix 2001:db8::1/128
	"000d 0011 20010db8000100000000000000000000 30 000000" + // BGP labeled IPv6 prefix 2001:db8:1::/48
	"000f 0011 20010db8000000000000000000000000 20 000000" + // Generic IPv6 prefix 2001:db8::/32
	"0010 0004 00064000" + // Nil FEC, Label: 100
	"0014 0028" + // Detailed Downstream Mapping, Length: 40
	"05dc 01 01" + // MTU: 1500, Address Type: IPv4 Numbered, DS Flags: Interface and Label Stack Request
	"ac101516 ac101516" + // Downstream IP Address, Downstream Interface Address: 172.16.21.22
	"00 00 0018" + // Return Code 0, Subcode 0, Subtlv Length: 24
	"0002 0004 000c81 01" + // Label stack sub-TLV: Label 200, TC 0, S 1, Protocol: 1 (static)
	"0001 000c 08 0008 00 7f000000 aaaaaaaa" + // Multipath sub-TLV: type 8, length 8: 127.0.0.0, mask aaaaaaaa
	"0003 000c 02 0000000000000000000000" // Pad: Copy Pad TLV to reply

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGoldenRequest(t *testing.T) {
	want := unhex(t, goldenRequest)
	got := request().Marshal()
	if !bytes.Equal(got, want) {
		t.Fatalf("Marshal:\n got %x\nwant %x", got, want)
	}
	m, err := lspping.Decode(want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, request()) {
		t.Fatalf("Decode(golden) = %+v, want %+v", m, request())
	}
}

// TestTshark has tshark's mpls-echo dissector decode a request and a
// reply of every kind this package writes, and compares its fields with
// what was encoded: no malformed or expert item anywhere. Checked by
// planting the bug (l03): with the BGP labeled prefix FEC as sub-TLV 11,
// tshark reads a FEC 129 pseudowire and the fields differ.
func TestTshark(t *testing.T) {
	tshark.Need(t)
	ip := func(m *lspping.Message, sport, dport uint16) []byte {
		return lspping.BuildIP(&lspping.Packet{Src: src, Dst: dst127, SrcPort: sport, DstPort: dport, TTL: 1,
			RouterAlert: m.Type == lspping.Request, Payload: m.Marshal()})
	}
	file := tshark.WritePcap(t, linkTypeRaw, [][]byte{ip(request(), 40000, lspping.Port), ip(reply(), lspping.Port, 40000)})
	rows := tshark.Fields(t, file, "_ws.malformed", "_ws.expert", "ip.opt.ra", "udp.checksum.status",
		"mpls_echo.msg_type", "mpls_echo.return_code", "mpls_echo.tlv.fec.type",
		"mpls_echo.tlv.fec.ldp_ipv4", "mpls_echo.tlv.fec.bgp_ipv4", "mpls_echo.tlv.fec.gen_ipv6",
		"mpls_echo.tlv.fec.nil_label", "mpls_echo.tlv.dd_map.ds_ip", "mpls_echo.subtlv.label",
		"mpls_echo.tlv.ddstlv_map_mp.ip", "mpls_echo.tlv.ilso_ipv4.label", "mpls_echo.tlv.pad_action")
	if len(rows) != 2 {
		t.Fatalf("tshark decoded %d frames, want 2", len(rows))
	}
	want := [][]string{
		{"", "", "0", "1", "1", "0", "1,12,14,2,13,15,16", "10.10.10.10", "10.1.0.0", "2001:db8::", "100",
			"172.16.21.22", "200", "127.0.0.0", "", "2"},
		{"", "", "", "1", "2", "8", "", "", "", "", "", "172.16.21.22,172.16.22.22", "3,300", "", "100", ""},
	}
	for i, row := range rows {
		// The one expert item allowed is IP's note on the request's TTL
		// of 1 (RFC 8029 §4.3 asks for it).
		if strings.Contains(row[1], "Error") || strings.Contains(row[1], "Warn") || row[1] != "" && !strings.Contains(row[1], "Time To Live") {
			t.Errorf("frame %d: tshark expert items: %s", i+1, row[1])
		}
		row[1] = ""
		if !reflect.DeepEqual(row, want[i]) {
			t.Errorf("frame %d: tshark fields\n got %q\nwant %q", i+1, row, want[i])
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range []*lspping.Message{request(), reply()} {
		b := m.Marshal()
		d, err := lspping.Decode(b)
		if err != nil {
			t.Fatalf("Decode(Marshal(%v)): %v", m.Type, err)
		}
		if !reflect.DeepEqual(d, m) {
			t.Errorf("Decode(Marshal(m)) = %+v, want %+v", d, m)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	good := request().Marshal()
	cases := map[string][]byte{
		"short header":            good[:31],
		"bad version":             append([]byte{0, 2}, good[2:]...),
		"TLV header cut":          good[:34],
		"TLV length beyond":       append(append([]byte{}, good[:32]...), 0, 1, 0x10, 0),
		"FEC sub-TLV length":      append(append([]byte{}, good[:32]...), 0, 1, 0, 8, 0, 1, 0, 4, 10, 0, 0, 0),
		"prefix length above 32":  append(append([]byte{}, good[:32]...), 0, 1, 0, 12, 0, 1, 0, 5, 10, 0, 0, 0, 33, 0, 0, 0),
		"prefix host bits":        append(append([]byte{}, good[:32]...), 0, 1, 0, 12, 0, 1, 0, 5, 10, 0, 0, 1, 8, 0, 0, 0),
		"DDMAP address type":      append(append([]byte{}, good[:32]...), 0, 20, 0, 16, 5, 220, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
		"DDMAP sub-TLV length":    append(append([]byte{}, good[:32]...), 0, 20, 0, 16, 5, 220, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 4),
		"label stack not 4-byte":  append(append([]byte{}, good[:32]...), 0, 20, 0, 24, 5, 220, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 8, 0, 2, 0, 3, 0, 0, 0, 0),
		"Reply TOS length":        append(append([]byte{}, good[:32]...), 0, 10, 0, 1, 0, 0, 0, 0),
		"Pad without action byte": append(append([]byte{}, good[:32]...), 0, 3, 0, 0),
	}
	for name, b := range cases {
		_, err := lspping.Decode(b)
		if !errors.Is(err, lspping.ErrMalformed) {
			t.Errorf("%s: Decode err = %v, want ErrMalformed", name, err)
		}
	}
}

func TestUnknownTLVs(t *testing.T) {
	b := request().Marshal()
	b = append(b, 0x00, 0x63, 0, 4, 1, 2, 3, 4) // mandatory type 99
	b = append(b, 0x80, 0x63, 0, 0)             // optional type 32867
	m, err := lspping.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	u := m.Unknown()
	if len(u) != 1 || u[0].Type != 99 {
		t.Fatalf("Unknown() = %+v, want the TLV of type 99 only", u)
	}
}

func TestCodeWords(t *testing.T) {
	if got, want := lspping.CodeEgress.Describe(1), "Replying router is an egress for the FEC at stack-depth 1"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	if got, want := lspping.CodeTLVNotUnderstood.Describe(0), "One or more of the TLVs was not understood"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
}

func TestIP(t *testing.T) {
	for _, p := range []lspping.Packet{
		{Src: src, Dst: dst127, SrcPort: 1, DstPort: lspping.Port, TTL: 1, RouterAlert: true, Payload: []byte("abc")},
		{Src: netip.MustParseAddr("2001:db8::1"), Dst: netip.MustParseAddr("::ffff:127.0.0.1"), SrcPort: 1, DstPort: lspping.Port, TTL: 1, RouterAlert: true, Payload: []byte("abcd")},
		{Src: netip.MustParseAddr("2001:db8::1"), Dst: netip.MustParseAddr("2001:db8::2"), SrcPort: lspping.Port, DstPort: 9, TTL: 64},
	} {
		b := lspping.BuildIP(&p)
		got, err := lspping.ParseIP(b)
		if err != nil {
			t.Fatalf("ParseIP(BuildIP(%v)): %v", p.Dst, err)
		}
		if got.Src != p.Src || got.Dst != p.Dst || got.SrcPort != p.SrcPort || got.DstPort != p.DstPort ||
			got.TTL != p.TTL || got.RouterAlert != p.RouterAlert || !bytes.Equal(got.Payload, p.Payload) {
			t.Errorf("ParseIP(BuildIP(p)) = %+v, want %+v", got, p)
		}
		if want := lspping.IsLoopbackDest(p.Dst); lspping.IsRequest(b) != want {
			t.Errorf("IsRequest(to %v) = %v, want %v", p.Dst, !want, want)
		}
		b[len(b)-1] ^= 1
		if len(p.Payload) > 0 {
			if _, err := lspping.ParseIP(b); !errors.Is(err, lspping.ErrChecksum) {
				t.Errorf("ParseIP of a corrupt packet: err = %v, want ErrChecksum", err)
			}
		}
	}
}
