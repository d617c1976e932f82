package mplsendpoint_test

import (
	"encoding/hex"
	"log/slog"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
)

// fragBitsScapy prints, for each bit of an IPv6 fragment header (RFC 8200
// §4.5) other than the next header and the identification, two packets
// fd00::b -> fd00::a carrying a whole UDP datagram behind a fragment
// header with only that bit set: one with the fragment header right after
// the fixed header ("direct"), one behind a destination options header
// ("deep"). Each line: position, bit name, packet hex.
const fragBitsScapy = `
from scapy.all import IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, UDP, Raw
cases = [("res1.%d" % i, dict(res1=1 << i)) for i in range(8)]
cases += [("res2.%d" % i, dict(res2=1 << i)) for i in range(2)]
cases += [("m", dict(m=1))]
cases += [("offset.%d" % i, dict(offset=1 << i)) for i in range(13)]
for name, kw in cases:
    fh = IPv6ExtHdrFragment(id=0x28000 + len(name), **kw)
    l4 = UDP(sport=5000, dport=6000)/Raw(b"issue 28 fragbit")  # 24 bytes: a multiple of 8
    for pos, p in [("direct", IPv6(src="fd00::b", dst="fd00::a")/fh/l4),
                   ("deep", IPv6(src="fd00::b", dst="fd00::a")/IPv6ExtHdrDestOpt()/fh/l4)]:
        print(pos, name, bytes(p).hex())
`

// TestIPv6FragmentHeaderBits sends, crafted by python3-scapy, IPv6
// packets with a fragment header in which exactly one bit of the
// fragment offset/reserved/flags fields is set, each right after the
// fixed header and behind a destination options header, and checks what
// the endpoint does with each (ingress.go's ipv6Transport and
// fragsum.go's fragmentKind test those bits with the mask 0xfff9):
//
//   - a bit of the 8-bit Reserved field or of the 2-bit Res field: RFC
//     8200 §4.5, "ignored on reception": the header is an atomic fragment
//     (RFC 6946; offset 0, M 0), the UDP datagram behind it is verified
//     and delivered, no drop counted;
//   - the M flag or any bit of the fragment offset: a real fragment. Right
//     after the fixed header it is held for reassembly (fragsum.go), no
//     drop counted; behind another extension header its checksum cannot
//     be verified: dropped as unverifiable_checksum (docs: "extension
//     headers before or after a fragment header"), nothing delivered.
//
// A mask one bit short (a flag or offset bit taken for reserved) or one
// bit too long (a reserved bit taken for a flag) fails the bit's case.
// Guards mutants w03 (ingress.go's mask without the M bit, 0xfff8), w03b
// (ingress.go's mask with a Res bit, 0xfffb) and w03c (fragsum.go's
// mask without the top offset bit, 0x7ff9). Checked by planting each:
// w03 fails deep/m with "delivered 1, drops map[]; want
// unverifiable_checksum 1, nothing delivered"; w03b fails direct/res2.0
// and deep/res2.0 with "delivered 0, drops map[unverifiable_checksum:1];
// want delivered, no drop"; w03c fails direct/offset.12 with "held 0,
// delivered 0, drops map[unverifiable_checksum:1]; want held 1, no drop".
// Every mask with one of its 14 bits removed, at either site, fails the
// test too (32 variants run); the two with a Res bit added at fragsum.go's
// site pass, and rightly: the atomic fragment then goes through the
// reassembly table as a datagram of one piece, verified and delivered as
// before, an equivalent mutant.
func TestIPv6FragmentHeaderBits(t *testing.T) {
	rows, out := scapyRows(t, fragBitsScapy, 3)
	n := 0
	for _, f := range rows {
		if f[0] != "direct" && f[0] != "deep" {
			continue // a scapy warning
		}
		n++
		pos, bit := f[0], f[1]
		ip, err := hex.DecodeString(f[2])
		if err != nil {
			t.Fatalf("%s/%s: %v", pos, bit, err)
		}
		reserved := strings.HasPrefix(bit, "res")
		t.Run(pos+"/"+bit, func(t *testing.T) {
			ep, err := mplsendpoint.New(channel.New(8, 1500, macA), mplsendpoint.Options{Tables: &mpls.Tables{}, LinkAddress: macA, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(ep.Close) // releases held fragments
			rec := newRecorder()
			ep.Attach(rec)
			inject(ep, ethFrame(macA, 0x86dd, ip), false)
			st := ep.Stats()
			drops, named := dropsNamed(&st)
			switch {
			case reserved:
				if len(rec.pkts) != 1 || drops != 0 {
					t.Errorf("delivered %d, drops %v; want delivered, no drop (RFC 8200 §4.5: reserved bits ignored on reception)", len(rec.pkts), named)
				}
			case pos == "deep":
				if len(rec.pkts) != 0 || drops != 1 || st.Drop(mplsendpoint.DropUnverifiableChecksum) != 1 {
					t.Errorf("delivered %d, drops %v; want unverifiable_checksum 1, nothing delivered (a fragment behind another extension header)", len(rec.pkts), named)
				}
			default:
				if st.RXFragmentsHeld != 1 || len(rec.pkts) != 0 || drops != 0 {
					t.Errorf("held %d, delivered %d, drops %v; want held 1, no drop (a fragment waiting for the rest of its datagram)", st.RXFragmentsHeld, len(rec.pkts), named)
				}
			}
		})
	}
	if n != 2*24 {
		t.Fatalf("scapy gave %d packets, want 48: %s", n, out)
	}
}

// dropsNamed returns the total of st's drop counters and the non-zero
// ones by name.
func dropsNamed(st *mplsendpoint.Stats) (uint64, map[string]uint64) {
	var total uint64
	named := map[string]uint64{}
	for _, r := range mplsendpoint.DropReasons() {
		if c := st.Drop(r); c != 0 {
			total += c
			named[r.String()] = c
		}
	}
	return total, named
}
