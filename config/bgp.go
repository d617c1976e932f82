package config

import (
	"net/netip"
	"strconv"
	"strings"
)

// Defaults and limits of the bgp words.
const (
	// DefaultBGPLabelLow and DefaultBGPLabelHigh are the label range when
	// the file has no `bgp label-range` (FRR's and Cisco's dynamic range
	// starts at 16 too; this one keeps clear of hand-typed labels).
	DefaultBGPLabelLow  = 16000
	DefaultBGPLabelHigh = 23999
	// MaxASN is the largest 4-byte AS number (RFC 6793).
	MaxASN = 1<<32 - 1
	// MinHoldTime is the smallest non-zero hold time (RFC 4271 §4.2).
	MinHoldTime = 3
)

// BGPFamily is an address family a neighbour exchanges.
type BGPFamily uint8

// BGP families (labeled unicast, SAFI 4).
const (
	IPv4LabeledUnicast BGPFamily = iota + 1
	IPv6LabeledUnicast
)

// String returns the config word.
func (f BGPFamily) String() string {
	if f == IPv6LabeledUnicast {
		return "ipv6-labeled-unicast"
	}
	return "ipv4-labeled-unicast"
}

// BGPLabelMode says which label a `bgp network` is advertised with.
type BGPLabelMode uint8

// Label modes: from the range (default), explicit null, implicit null, or
// a fixed label.
const (
	BGPLabelFromRange BGPLabelMode = iota
	BGPLabelExplicitNull
	BGPLabelImplicitNull
	BGPLabelFixed
)

// BGP holds the `bgp ...` lines of a file.
type BGP struct {
	// Pos is the first bgp line.
	Pos Pos
	// AS is `bgp as N`; ASPos its position (invalid when absent).
	AS    uint32
	ASPos Pos
	// RouterID is `router-id ADDR` (an IPv4 address).
	RouterID    netip.Addr
	RouterIDPos Pos
	// LabelLow..LabelHigh is `bgp label-range LO HI` (default
	// DefaultBGPLabelLow..DefaultBGPLabelHigh).
	LabelLow, LabelHigh uint32
	LabelRangePos       Pos
	Neighbors           []BGPNeighbor
	Networks            []BGPNetwork
}

// BGPNeighbor is `bgp neighbor ADDR remote-as N [family F...]
// [next-hop-self] [hold-time N]`.
type BGPNeighbor struct {
	Pos        Pos
	Address    netip.Addr
	AddressPos Pos
	RemoteAS   uint32
	// Families are the families to negotiate (both when the line has no
	// family word).
	Families    []BGPFamily
	NextHopSelf bool
	// HoldTime in seconds (3..65535); 0 means the default (90).
	HoldTime uint16
}

// BGPNetwork is `bgp network PREFIX [label explicit-null|implicit-null|N]`.
type BGPNetwork struct {
	Pos       Pos
	Prefix    netip.Prefix
	PrefixPos Pos
	Mode      BGPLabelMode
	// Label is the fixed label for BGPLabelFixed.
	Label    uint32
	LabelPos Pos
}

var bgpWords = []string{"as", "router-id", "neighbor", "label-range", "network"}

// bgp parses one `bgp ...` line.
func (p *parser) bgp(pos Pos) {
	c := p.cfg
	if c.BGP == nil {
		c.BGP = &BGP{Pos: pos, LabelLow: DefaultBGPLabelLow, LabelHigh: DefaultBGPLabelHigh}
	}
	b := c.BGP
	t := p.next(oneOf(bgpWords) + " after bgp")
	switch t.s {
	case "as", "router-id":
		p.i--
		for p.more() {
			w := p.word("bgp", "as", "router-id")
			switch w.s {
			case "as":
				if b.ASPos.IsValid() {
					p.fail(w, "bgp as is already set at %s", b.ASPos)
				}
				b.ASPos = p.pos(w.col) // set before the value, so a bad one is one error
				v, vt := p.number("AS number", 1, MaxASN)
				b.AS, b.ASPos = uint32(v), p.at(vt)
			case "router-id":
				if b.RouterIDPos.IsValid() {
					p.fail(w, "bgp router-id is already set at %s", b.RouterIDPos)
				}
				b.RouterIDPos = p.pos(w.col)
				at := p.next("an IPv4 address after router-id")
				a := p.address(at, "router-id")
				if !a.Is4() || a.IsUnspecified() {
					p.fail(at, "router-id %s must be a non-zero IPv4 address (a BGP identifier is 32 bits)", at.s)
				}
				b.RouterID, b.RouterIDPos = a, p.at(at)
			}
		}
	case "label-range":
		if b.LabelRangePos.IsValid() {
			p.fail(t, "bgp label-range is already set at %s", b.LabelRangePos)
		}
		lo, lt := p.number("first label of the range", MinUnreservedLabel, MaxLabel)
		hi, ht := p.number("last label of the range", MinUnreservedLabel, MaxLabel)
		if hi < lo {
			p.fail(ht, "label range %d %d is empty; write the lower label first", lo, hi)
		}
		b.LabelLow, b.LabelHigh, b.LabelRangePos = uint32(lo), uint32(hi), p.at(lt)
	case "neighbor":
		p.bgpNeighbor(b, pos)
	case "network":
		p.bgpNetwork(b, pos)
	default:
		p.fail(t, "unknown word %q after bgp; expected %s%s", t.s, oneOf(bgpWords), suggest(t.s, bgpWords))
	}
}

var neighborWords = []string{"remote-as", "family", "next-hop-self", "hold-time"}

var familyWords = []string{"ipv4-labeled-unicast", "ipv6-labeled-unicast"}

func (p *parser) bgpNeighbor(b *BGP, pos Pos) {
	n := BGPNeighbor{Pos: pos}
	at := p.next("the neighbor's address after bgp neighbor")
	n.Address = p.address(at, "neighbor address")
	if n.Address.IsUnspecified() || n.Address.IsMulticast() {
		p.fail(at, "neighbor %s is not a unicast address", at.s)
	}
	n.AddressPos = p.at(at)
	seen := map[string]bool{}
	for p.more() {
		t := p.next("")
		p.once(seen, t, "bgp neighbor")
		switch t.s {
		case "remote-as":
			v, _ := p.number("AS number", 1, MaxASN)
			n.RemoteAS = uint32(v)
		case "family":
			for p.more() && strings.HasPrefix(p.peek(), "ipv") {
				ft := p.next("")
				var f BGPFamily
				switch ft.s {
				case "ipv4-labeled-unicast", "ipv4-labelled-unicast":
					f = IPv4LabeledUnicast
				case "ipv6-labeled-unicast", "ipv6-labelled-unicast":
					f = IPv6LabeledUnicast
				default:
					p.fail(ft, "unknown family %q; expected %s (only labeled unicast is spoken)%s", ft.s, oneOf(familyWords), suggest(ft.s, familyWords))
				}
				for _, g := range n.Families {
					if g == f {
						p.fail(ft, "family %s given twice", ft.s)
					}
				}
				n.Families = append(n.Families, f)
			}
			if len(n.Families) == 0 {
				if p.more() {
					ft := p.next("")
					p.fail(ft, "unknown family %q; expected %s%s", ft.s, oneOf(familyWords), suggest(ft.s, familyWords))
				}
				p.failEnd("missing %s after family", oneOf(familyWords))
			}
		case "next-hop-self":
			n.NextHopSelf = true
		case "hold-time":
			v, vt := p.number("hold time in seconds", 0, 65535)
			if v < MinHoldTime {
				p.fail(vt, "hold time %d is below %d seconds, the least RFC 4271 allows (0, no keepalives, is not offered: a dead peer would keep its routes)", v, MinHoldTime)
			}
			n.HoldTime = uint16(v)
		default:
			p.fail(t, "unknown word %q in bgp neighbor; expected %s%s", t.s, oneOf(neighborWords), suggest(t.s, neighborWords))
		}
	}
	if n.RemoteAS == 0 {
		p.failEnd("missing remote-as N in bgp neighbor %s", n.Address)
	}
	for _, o := range b.Neighbors {
		if o.Address == n.Address {
			p.addAt(n.AddressPos, "bgp neighbor %s is already added at %s", n.Address, o.Pos)
			panic(abort{})
		}
	}
	b.Neighbors = append(b.Neighbors, n)
}

func (p *parser) bgpNetwork(b *BGP, pos Pos) {
	n := BGPNetwork{Pos: pos}
	pt := p.next("a prefix after bgp network")
	n.PrefixPos = p.at(pt)
	n.Prefix = p.prefix(pt, true)
	if p.more() {
		w := p.word("bgp network "+pt.s, "label")
		_ = w
		lt := p.next("explicit-null, implicit-null or a label after label")
		n.LabelPos = p.at(lt)
		switch lt.s {
		case "explicit-null":
			n.Mode = BGPLabelExplicitNull
		case "implicit-null":
			n.Mode = BGPLabelImplicitNull
		default:
			v, err := strconv.ParseUint(lt.s, 10, 64)
			if err != nil || v < MinUnreservedLabel || v > MaxLabel {
				p.fail(lt, "bad label %q; expected explicit-null, implicit-null or a number from %d to %d%s",
					lt.s, MinUnreservedLabel, MaxLabel, suggest(lt.s, []string{"explicit-null", "implicit-null"}))
			}
			n.Mode, n.Label = BGPLabelFixed, uint32(v)
		}
	}
	if p.bgpNets == nil {
		p.bgpNets = map[netip.Prefix]Pos{}
	}
	if at, dup := p.bgpNets[n.Prefix]; dup {
		p.addAt(n.PrefixPos, "bgp network %s is already added at %s", n.Prefix, at)
		panic(abort{})
	}
	p.bgpNets[n.Prefix] = n.Pos
	b.Networks = append(b.Networks, n)
}

// validateBGP checks what needs the whole file: an AS and a router-id
// when bgp is used, fixed labels outside the range, static label routes
// outside the range.
func (p *parser) validateBGP() {
	b := p.cfg.BGP
	if b == nil {
		return
	}
	if !b.ASPos.IsValid() {
		p.add(b.Pos, "bgp", "bgp needs \"bgp as N\" (the node's AS number)")
	}
	if !b.RouterIDPos.IsValid() {
		p.add(b.Pos, "bgp", "bgp needs a router-id: \"bgp router-id 172.16.20.20\" (an IPv4 address of the node)")
	}
	in := func(l uint32) bool { return l >= b.LabelLow && l <= b.LabelHigh }
	bound := map[uint32]string{}
	for _, lr := range p.cfg.LabelRoutes {
		bound[lr.Label] = "the label route at " + lr.Pos.String()
	}
	for _, n := range b.Networks {
		if n.Mode != BGPLabelFixed {
			continue
		}
		if in(n.Label) {
			p.addAt(n.LabelPos, "label %d is inside the bgp label-range %d-%d, which bgp allocates from; pick one outside", n.Label, b.LabelLow, b.LabelHigh)
		}
		if by, ok := bound[n.Label]; ok {
			p.addAt(n.LabelPos, "label %d is already bound by %s", n.Label, by)
			continue
		}
		bound[n.Label] = "the bgp network at " + n.Pos.String()
	}
	for _, lr := range p.cfg.LabelRoutes {
		if in(lr.Label) {
			p.addAt(lr.LabelPos, "label %d is inside the bgp label-range %d-%d; bgp allocates those, so a label route must use another", lr.Label, b.LabelLow, b.LabelHigh)
		}
	}
}

// String returns n as a canonical config line.
func (n BGPNeighbor) String() string {
	s := "bgp neighbor " + n.Address.String() + " remote-as " + strconv.FormatUint(uint64(n.RemoteAS), 10)
	if len(n.Families) > 0 {
		s += " family"
		for _, f := range n.Families {
			s += " " + f.String()
		}
	}
	if n.NextHopSelf {
		s += " next-hop-self"
	}
	if n.HoldTime != 0 {
		s += " hold-time " + strconv.Itoa(int(n.HoldTime))
	}
	return s
}

// String returns n as a canonical config line.
func (n BGPNetwork) String() string {
	s := "bgp network " + n.Prefix.String()
	switch n.Mode {
	case BGPLabelExplicitNull:
		s += " label explicit-null"
	case BGPLabelImplicitNull:
		s += " label implicit-null"
	case BGPLabelFixed:
		s += " label " + strconv.FormatUint(uint64(n.Label), 10)
	}
	return s
}

// format writes the bgp lines in canonical form.
func (b *BGP) format(sb *strings.Builder) {
	sb.WriteString("bgp as " + strconv.FormatUint(uint64(b.AS), 10) + " router-id " + b.RouterID.String() + "\n")
	sb.WriteString("bgp label-range " + strconv.FormatUint(uint64(b.LabelLow), 10) + " " + strconv.FormatUint(uint64(b.LabelHigh), 10) + "\n")
	for _, n := range b.Neighbors {
		sb.WriteString(n.String() + "\n")
	}
	for _, n := range b.Networks {
		sb.WriteString(n.String() + "\n")
	}
}
