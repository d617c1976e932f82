package lspping

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/mplsnode/mplsnode/internal/enum"
	"github.com/mplsnode/mplsnode/mpls"
)

// FECType is a Target FEC Stack sub-TLV type (RFC 8029 §3.2).
type FECType uint16

// The FEC sub-TLVs this package understands.
const (
	FECLDPIPv4     FECType = 1
	FECLDPIPv6     FECType = 2
	FECBGPIPv4     FECType = 12
	FECBGPIPv6     FECType = 13
	FECGenericIPv4 FECType = 14
	FECGenericIPv6 FECType = 15
	FECNil         FECType = 16
)

// fecTypeNames names each FEC sub-TLV this package understands as the
// RFC does.
var fecTypeNames = []string{
	FECLDPIPv4:     "LDP IPv4 prefix",
	FECLDPIPv6:     "LDP IPv6 prefix",
	FECBGPIPv4:     "BGP labeled IPv4 prefix",
	FECBGPIPv6:     "BGP labeled IPv6 prefix",
	FECGenericIPv4: "Generic IPv4 prefix",
	FECGenericIPv6: "Generic IPv6 prefix",
	FECNil:         "Nil FEC",
}

// known reports whether this package understands sub-TLV t.
func (t FECType) known() bool { return enum.At(fecTypeNames, t) != "" }

// IPv6 reports whether t is one of the IPv6 prefix FECs.
func (t FECType) IPv6() bool { return t == FECLDPIPv6 || t == FECBGPIPv6 || t == FECGenericIPv6 }

// IsPrefix reports whether t is one of the prefix FECs.
func (t FECType) IsPrefix() bool { return t.known() && t != FECNil }

// String names the sub-TLV as the RFC does.
func (t FECType) String() string { return nameOf(fecTypeNames, t, "FEC sub-TLV %d") }

// FEC is one Target FEC Stack sub-TLV.
type FEC struct {
	// Type is the sub-TLV type.
	Type FECType
	// Prefix is a prefix FEC's prefix (masked).
	Prefix netip.Prefix
	// Label is a Nil FEC's label.
	Label mpls.Label
	// Raw is the value of a sub-TLV this package does not understand.
	Raw []byte
}

// PrefixFEC returns the FEC of type kind ("ldp", "bgp", "generic") for p.
func PrefixFEC(kind string, p netip.Prefix) (FEC, error) {
	p = p.Masked()
	v6 := p.Addr().Is6()
	var t FECType
	switch kind {
	case "ldp":
		t = FECLDPIPv4
	case "bgp":
		t = FECBGPIPv4
	case "generic":
		t = FECGenericIPv4
	default:
		return FEC{}, fmt.Errorf("FEC type %q: want ldp, bgp, generic or nil", kind)
	}
	if !p.IsValid() {
		return FEC{}, fmt.Errorf("FEC prefix %v is not valid", p)
	}
	if v6 {
		t++ // each IPv6 type follows its IPv4 one
	}
	return FEC{Type: t, Prefix: p}, nil
}

// String returns the FEC as an operator reads it, e.g. "LDP IPv4 prefix
// 10.10.10.10/32".
func (f FEC) String() string {
	switch {
	case f.Type == FECNil:
		return fmt.Sprintf("Nil FEC label %d", f.Label)
	case f.Type.IsPrefix():
		return fmt.Sprintf("%s %s", f.Type, f.Prefix)
	}
	return fmt.Sprintf("%s (%d bytes)", f.Type, len(f.Raw))
}

// The value lengths of the sub-TLVs: a prefix and its length byte (RFC
// 8029 §3.2: 5 and 17, the zero padding to 4 bytes not counted), a Nil
// FEC's label in 20 bits and 12 zero bits.
const (
	prefixLen4 = 5
	prefixLen6 = 17
	nilFECLen  = 4
)

func decodeFEC(t uint16, v []byte, off int) (FEC, error) {
	f := FEC{Type: FECType(t)}
	switch f.Type {
	case FECLDPIPv4, FECBGPIPv4, FECGenericIPv4, FECLDPIPv6, FECBGPIPv6, FECGenericIPv6:
		n, bits := 4, 32
		if f.Type.IPv6() {
			n, bits = 16, 128
		}
		if len(v) != n+1 {
			return f, malformed(off-2, "%s length %d, want %d", f.Type, len(v), n+1)
		}
		a, _ := netip.AddrFromSlice(v[:n])
		l := int(v[n])
		if l > bits {
			return f, malformed(off+n, "%s prefix length %d, above %d", f.Type, l, bits)
		}
		f.Prefix = netip.PrefixFrom(a, l).Masked()
		if f.Prefix.Addr() != a {
			return f, malformed(off, "%s prefix %v/%d has bits set beyond its length", f.Type, a, l)
		}
	case FECNil:
		if len(v) != nilFECLen {
			return f, malformed(off-2, "Nil FEC length %d, want %d", len(v), nilFECLen)
		}
		f.Label = mpls.Label(binary.BigEndian.Uint32(v) >> 12)
	default:
		f.Raw = clone(v)
	}
	return f, nil
}

// append appends f as a sub-TLV.
func (f FEC) append(b []byte) []byte {
	switch {
	case f.Type == FECNil:
		return appendTLV(b, uint16(f.Type), binary.BigEndian.AppendUint32(nil, uint32(f.Label&mpls.MaxLabel)<<12))
	case f.Type.IsPrefix():
		v := appendFamily(make([]byte, 0, prefixLen6+3), f.Prefix.Addr(), f.Type.IPv6())
		v = append(v, byte(max(f.Prefix.Bits(), 0)))
		return appendTLV(b, uint16(f.Type), v)
	}
	return appendTLV(b, uint16(f.Type), f.Raw)
}

// appendFamily appends a as 16 bytes (v6) or 4; an address of the other
// family (or none) is written as zeros.
func appendFamily(b []byte, a netip.Addr, v6 bool) []byte {
	switch {
	case v6 && a.Is6():
		v := a.As16()
		return append(b, v[:]...)
	case !v6 && a.Is4():
		v := a.As4()
		return append(b, v[:]...)
	case v6:
		return append(b, make([]byte, 16)...)
	}
	return append(b, 0, 0, 0, 0)
}
