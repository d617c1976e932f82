package lspping

import (
	"encoding/binary"
	"net/netip"

	"github.com/mplsnode/mplsnode/mpls"
)

// AddrType is a DDMAP's (and the Interface and Label Stack TLV's) address
// type (RFC 8029 §3.4).
type AddrType uint8

// Address types.
const (
	AddrIPv4Numbered   AddrType = 1
	AddrIPv4Unnumbered AddrType = 2
	AddrIPv6Numbered   AddrType = 3
	AddrIPv6Unnumbered AddrType = 4
	AddrNonIP          AddrType = 5
)

// lens returns the lengths of the address and of the interface fields of
// t, false for an unknown type.
func (t AddrType) lens() (addr, iface int, ok bool) {
	switch t {
	case AddrIPv4Numbered:
		return 4, 4, true
	case AddrIPv4Unnumbered:
		return 4, 4, true
	case AddrIPv6Numbered:
		return 16, 16, true
	case AddrIPv6Unnumbered:
		return 16, 4, true
	case AddrNonIP:
		return 0, 0, true
	}
	return 0, 0, false
}

// DS flags of a DDMAP (RFC 8029 §3.4).
const (
	// DSFlagInterface (I): the responder includes an Interface and Label
	// Stack TLV in its reply.
	DSFlagInterface uint8 = 1 << 0
	// DSFlagNonIP (N): treat as a non-IP packet when hashing.
	DSFlagNonIP uint8 = 1 << 1
)

// AllRouters is the downstream address of a DDMAP whose sender does not
// know the downstream router (RFC 8029 §3.4: 224.0.0.2, FF02::2).
var (
	AllRouters4 = netip.AddrFrom4([4]byte{224, 0, 0, 2})
	AllRouters6 = netip.MustParseAddr("ff02::2")
)

// DDMAP sub-TLV types (RFC 8029 §3.4.1).
const (
	SubMultipath      uint16 = 1
	SubLabelStack     uint16 = 2
	SubFECStackChange uint16 = 3
)

// Multipath types (RFC 8029 §3.4.1.1).
const (
	MultipathNone       uint8 = 0
	MultipathIP         uint8 = 2
	MultipathIPRange    uint8 = 4
	MultipathBitmaskIP  uint8 = 8
	MultipathBitmaskLbl uint8 = 9
)

// Label protocols of the label stack sub-TLV (RFC 8029 §3.4.1.2).
const (
	ProtoUnknown uint8 = 0
	ProtoStatic  uint8 = 1
	ProtoBGP     uint8 = 2
	ProtoLDP     uint8 = 3
)

// DSLabel is one entry of a DDMAP's label stack sub-TLV: a label stack
// entry without TTL, and the protocol that bound it.
type DSLabel struct {
	Entry    mpls.Entry
	Protocol uint8
}

// Multipath is a DDMAP's multipath data sub-TLV.
type Multipath struct {
	// Type is the multipath type (MultipathBitmaskIP, ...).
	Type uint8
	// Info is the multipath information: for MultipathBitmaskIP, a
	// base address and 32-bit words whose set bits (most significant
	// first) name base+i.
	Info []byte
}

// Bitmask returns the multipath information of type 8 naming the
// addresses base+i for every i below n (n at most 32 a word) that in
// reports true for.
func Bitmask(base netip.Addr, n int, in func(i int) bool) Multipath {
	b := appendAddr(nil, base)
	words := make([]byte, 4*((n+31)/32))
	for i := range n {
		if in(i) {
			words[i/8] |= 0x80 >> (i % 8)
		}
	}
	return Multipath{Type: MultipathBitmaskIP, Info: append(b, words...)}
}

// Addresses returns the addresses a multipath information of type 8
// names (IPv6 ones if v6: the family is the FEC's), false for another
// type or a malformed one.
func (m Multipath) Addresses(v6 bool) ([]netip.Addr, bool) {
	if m.Type != MultipathBitmaskIP {
		return nil, false
	}
	n := 4
	if v6 {
		n = 16
	}
	if len(m.Info) < n || (len(m.Info)-n)%4 != 0 {
		return nil, false
	}
	base, _ := netip.AddrFromSlice(m.Info[:n])
	var out []netip.Addr
	a := base
	for _, w := range m.Info[n:] {
		for bit := 0; bit < 8; bit++ {
			if w&(0x80>>bit) != 0 {
				out = append(out, a)
			}
			a = a.Next()
		}
	}
	return out, true
}

// DDMap is a Downstream Detailed Mapping TLV (RFC 8029 §3.4).
type DDMap struct {
	// MTU is the largest labelled packet the downstream link carries.
	MTU uint16
	// AddrType is the type of the address fields.
	AddrType AddrType
	// Flags are the DS flags (DSFlagInterface, DSFlagNonIP).
	Flags uint8
	// Downstream is the downstream router's address (or router ID); the
	// invalid Addr for AddrNonIP.
	Downstream netip.Addr
	// Interface is the downstream interface's address (numbered types).
	Interface netip.Addr
	// IfIndex is the downstream interface's index (unnumbered types).
	IfIndex uint32
	// Code and Subcode are the return code for this downstream.
	Code    ReturnCode
	Subcode uint8
	// Multipath is the multipath data sub-TLV, nil if absent.
	Multipath *Multipath
	// Labels is the label stack sub-TLV (HasLabels: present).
	Labels    []DSLabel
	HasLabels bool
	// Other holds the other sub-TLVs (FEC stack change, unknown), in
	// order.
	Other []TLV
}

// NewDDMap returns the DDMAP of a numbered downstream (its address both
// the router's and the interface's) with the given labels.
func NewDDMap(mtu uint16, downstream netip.Addr, labels []DSLabel) DDMap {
	t := AddrIPv4Numbered
	if downstream.Is6() {
		t = AddrIPv6Numbered
	}
	return DDMap{MTU: mtu, AddrType: t, Downstream: downstream, Interface: downstream, Labels: labels, HasLabels: labels != nil}
}

func decodeDDMap(v []byte, off int) (DDMap, error) {
	var d DDMap
	if len(v) < 4 {
		return d, malformed(off, "DDMAP length %d, below 4", len(v))
	}
	d.MTU = binary.BigEndian.Uint16(v)
	d.AddrType = AddrType(v[2])
	d.Flags = v[3]
	an, in, ok := d.AddrType.lens()
	if !ok {
		return d, malformed(off+2, "DDMAP address type %d", d.AddrType)
	}
	need := 4 + an + in + 4
	if len(v) < need {
		return d, malformed(off-2, "DDMAP length %d, its address type needs %d", len(v), need)
	}
	i := 4
	if an > 0 {
		d.Downstream, _ = netip.AddrFromSlice(v[i : i+an])
		i += an
		if in == an {
			d.Interface, _ = netip.AddrFromSlice(v[i : i+in])
		} else {
			d.IfIndex = binary.BigEndian.Uint32(v[i:])
		}
		i += in
	}
	if d.AddrType == AddrIPv4Unnumbered {
		d.IfIndex, d.Interface = binary.BigEndian.Uint32(v[i-4:]), netip.Addr{}
	}
	d.Code, d.Subcode = ReturnCode(v[i]), v[i+1]
	sl := int(binary.BigEndian.Uint16(v[i+2:]))
	i += 4
	if sl != len(v)-i {
		return d, malformed(off+i-2, "DDMAP sub-TLV length %d, %d bytes follow", sl, len(v)-i)
	}
	err := tlvs(v[i:], off+i, func(t uint16, sv []byte, soff int) error {
		switch t {
		case SubMultipath:
			if d.Multipath != nil {
				return malformed(soff-4, "a second multipath sub-TLV")
			}
			if len(sv) < 4 {
				return malformed(soff-2, "multipath sub-TLV length %d, below 4", len(sv))
			}
			ml := int(binary.BigEndian.Uint16(sv[1:]))
			if ml != len(sv)-4 {
				return malformed(soff+1, "multipath length %d, %d bytes follow", ml, len(sv)-4)
			}
			d.Multipath = &Multipath{Type: sv[0], Info: clone(sv[4:])}
		case SubLabelStack:
			if d.HasLabels {
				return malformed(soff-4, "a second label stack sub-TLV")
			}
			if len(sv)%4 != 0 {
				return malformed(soff-2, "label stack sub-TLV length %d, not a multiple of 4", len(sv))
			}
			d.HasLabels = true
			for j := 0; j < len(sv); j += 4 {
				d.Labels = append(d.Labels, DSLabel{Entry: label24(sv[j:]), Protocol: sv[j+3]})
			}
		default:
			d.Other = append(d.Other, TLV{Type: t, Value: clone(sv)})
		}
		return nil
	})
	return d, err
}

// subTLVs encodes d's sub-TLVs: the label stack before the multipath
// data (Wireshark 4.0's dissector reads no sub-TLV after a multipath one
// correctly), then the others.
func (d *DDMap) subTLVs() []byte {
	var b []byte
	if d.HasLabels || len(d.Labels) > 0 {
		var v []byte
		for _, l := range d.Labels {
			v = appendLabel24(v, l.Entry)
			v = append(v, l.Protocol)
		}
		b = appendTLV(b, SubLabelStack, v)
	}
	if d.Multipath != nil {
		v := []byte{d.Multipath.Type}
		v = binary.BigEndian.AppendUint16(v, uint16(len(d.Multipath.Info)))
		v = append(v, 0)
		v = append(v, d.Multipath.Info...)
		b = appendTLV(b, SubMultipath, v)
	}
	for _, t := range d.Other {
		b = appendTLV(b, t.Type, t.Value)
	}
	return b
}

// value appends d's value to b.
func (d *DDMap) value(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, d.MTU)
	b = append(b, byte(d.AddrType), d.Flags)
	an, in, _ := d.AddrType.lens()
	if an > 0 {
		b = appendFamily(b, d.Downstream, an == 16)
		switch {
		case d.AddrType == AddrIPv4Unnumbered || in != an:
			b = binary.BigEndian.AppendUint32(b, d.IfIndex)
		default:
			b = appendFamily(b, d.Interface, an == 16)
		}
	}
	sub := d.subTLVs()
	b = append(b, byte(d.Code), d.Subcode)
	b = binary.BigEndian.AppendUint16(b, uint16(len(sub)))
	return append(b, sub...)
}

// InterfaceLabelStack is the Interface and Label Stack TLV (RFC 8029
// §3.5): where the request came in and the label stack it came with.
type InterfaceLabelStack struct {
	// AddrType is the type of the address fields.
	AddrType AddrType
	// Addr is the receiving router's address on that interface (or its
	// router ID).
	Addr netip.Addr
	// Interface is the interface's address (numbered), IfIndex its index
	// (unnumbered).
	Interface netip.Addr
	IfIndex   uint32
	// Labels is the label stack received, outermost first.
	Labels []mpls.Entry
}

func decodeInterface(v []byte, off int) (*InterfaceLabelStack, error) {
	if len(v) < 4 {
		return nil, malformed(off, "Interface and Label Stack length %d, below 4", len(v))
	}
	il := &InterfaceLabelStack{AddrType: AddrType(v[0])}
	an, in, ok := il.AddrType.lens()
	if !ok || il.AddrType == AddrNonIP {
		return nil, malformed(off, "Interface and Label Stack address type %d", il.AddrType)
	}
	i := 4
	if len(v) < i+an+in || (len(v)-i-an-in)%4 != 0 {
		return nil, malformed(off-2, "Interface and Label Stack length %d for address type %d", len(v), il.AddrType)
	}
	il.Addr, _ = netip.AddrFromSlice(v[i : i+an])
	i += an
	if in == an && il.AddrType != AddrIPv4Unnumbered {
		il.Interface, _ = netip.AddrFromSlice(v[i : i+in])
	} else {
		il.IfIndex = binary.BigEndian.Uint32(v[i:])
	}
	i += in
	for ; i < len(v); i += 4 {
		il.Labels = append(il.Labels, mpls.DecodeEntry(v[i:]))
	}
	return il, nil
}

func (il *InterfaceLabelStack) value(b []byte) []byte {
	b = append(b, byte(il.AddrType), 0, 0, 0)
	an, in, _ := il.AddrType.lens()
	b = appendFamily(b, il.Addr, an == 16)
	if in == an && il.AddrType != AddrIPv4Unnumbered {
		b = appendFamily(b, il.Interface, in == 16)
	} else if in > 0 {
		b = binary.BigEndian.AppendUint32(b, il.IfIndex)
	}
	for _, e := range il.Labels {
		b = binary.BigEndian.AppendUint32(b, 0)
		e.Encode(b[len(b)-4:])
	}
	return b
}
