package config

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// sysctlNames are the sysctls the language knows; net.mpls.conf.DEV.input
// is matched by shape.
var sysctlNames = []string{
	"net.mpls.ip_ttl_propagate",
	"net.mpls.default_ttl",
	"net.mpls.platform_labels",
	"net.mpls.conf.DEV.input",
	"net.ipv4.ip_forward",
	"net.ipv6.conf.all.forwarding",
	"net.ipv4.fib_multipath_hash_seed",
}

// sysctl parses `sysctl [-w] NAME=VALUE` (also `NAME = VALUE`, and the
// slash form net/mpls/default_ttl), as a script's sysctl line reads.
func (p *parser) sysctl(pos Pos) {
	for p.peek() == "-w" || p.peek() == "-q" {
		p.i++
	}
	t := p.next("NAME=VALUE after sysctl")
	name, val := t.s, ""
	valTok := token{}
	if i := strings.IndexByte(t.s, '='); i >= 0 {
		name, val = t.s[:i], t.s[i+1:]
		valTok = token{s: val, col: t.col + i + 1}
		if val == "" {
			valTok = p.next("a value after " + t.s)
			val = valTok.s
		}
	} else if p.peek() == "=" {
		p.i++
		valTok = p.next("a value after " + name + " =")
		val = valTok.s
	} else if strings.HasPrefix(p.peek(), "=") {
		vt := p.next("")
		valTok = token{s: vt.s[1:], col: vt.col + 1}
		val = valTok.s
	} else {
		p.fail(t, "expected NAME=VALUE after sysctl, such as net.mpls.platform_labels=1000")
	}
	nameTok := token{s: name, col: t.col}
	name = strings.ReplaceAll(name, "/", ".")
	if val == "" {
		p.fail(valTok, "missing value for %s", name)
	}
	s := &p.cfg.Sysctl
	key := name
	switch {
	case name == "net.mpls.ip_ttl_propagate":
		s.IPTTLPropagate = p.bool01(valTok, name)
	case name == "net.mpls.default_ttl":
		s.DefaultTTL = uint8(p.value(valTok, name, 1, 255))
	case name == "net.mpls.platform_labels":
		s.PlatformLabels = uint32(p.value(valTok, name, 0, MaxLabel+1))
	case name == "net.ipv4.ip_forward":
		s.IPv4Forward = p.bool01(valTok, name)
	case name == "net.ipv6.conf.all.forwarding":
		s.IPv6Forward = p.bool01(valTok, name)
	case name == "net.ipv4.fib_multipath_hash_seed":
		s.MultipathHashSeed = uint32(p.value(valTok, name, 0, 1<<32-1))
	case strings.HasPrefix(name, "net.mpls.conf.") && strings.HasSuffix(name, ".input") &&
		len(name) > len("net.mpls.conf..input"):
		dev := name[len("net.mpls.conf.") : len(name)-len(".input")]
		devCol := nameTok.col + len("net.mpls.conf.")
		if msg := checkIfName(dev); msg != "" {
			p.fail(token{s: dev, col: devCol}, "bad device name %q: %s", dev, msg)
		}
		on := p.bool01(valTok, name)
		p.inputs = append(p.inputs, devSetting{dev: dev, pos: p.at(token{s: dev, col: devCol}), on: on})
	case strings.HasSuffix(name, ".rp_filter"):
		p.fail(nameTok, "mplsnode has no reverse-path filter; delete this %s line", name)
	default:
		p.fail(nameTok, "unknown sysctl %q; expected %s%s", name, oneOf(sysctlNames), suggest(name, sysctlNames))
	}
	p.where(key, pos, nameTok)
}

// where records the position of a once-only setting, failing on a repeat.
func (p *parser) where(key string, pos Pos, t token) {
	if prev, ok := p.cfg.Where[key]; ok {
		p.fail(t, "%s is already set at %s", key, prev)
	}
	p.cfg.Where[strings.Clone(key)] = pos // not a slice of the file, which it would keep alive
}

func (p *parser) value(t token, name string, lo, hi uint64) uint64 {
	v, err := strconv.ParseUint(t.s, 10, 64)
	if err != nil || v < lo || v > hi {
		p.fail(t, "bad value %q for %s; expected a number from %d to %d", t.s, name, lo, hi)
	}
	return v
}

func (p *parser) bool01(t token, name string) bool {
	switch t.s {
	case "0":
		return false
	case "1":
		return true
	}
	p.fail(t, "bad value %q for %s; expected 0 or 1", t.s, name)
	return false
}

var setWords = []string{"gso", "tcp", "forward"}
var setTCPWords = []string{"cc", "sack", "rack"}

// set parses mplsnode's own settings:
//
//	set gso endpoint|stack|off
//	set tcp cc reno|cubic
//	set tcp sack on|off
//	set tcp rack on|off
//	set forward xdp on|off|auto
func (p *parser) set(pos Pos) {
	t := p.word("set", setWords...)
	switch t.s {
	case "gso":
		v := p.word("set gso", "endpoint", "stack", "off")
		p.where("set gso", pos, t)
		p.cfg.Settings.GSO = map[string]GSOMode{"endpoint": GSOEndpoint, "stack": GSOStack, "off": GSOOff}[v.s]
	case "tcp":
		w := p.word("set tcp", setTCPWords...)
		key := "set tcp " + w.s
		switch w.s {
		case "cc":
			v := p.word(key, "reno", "cubic")
			p.cfg.Settings.TCPCongestion = v.s
		case "sack":
			p.cfg.Settings.TCPSACK = p.onOff(key)
		case "rack":
			p.cfg.Settings.TCPRACK = p.onOff(key)
		}
		p.where(key, pos, w)
	case "forward":
		w := p.word("set forward", "xdp")
		v := p.word("set forward xdp", "on", "off", "auto")
		p.cfg.Settings.ForwardXDP = map[string]XDPMode{"on": XDPOn, "off": XDPOff, "auto": XDPAuto}[v.s]
		p.where("set forward xdp", pos, w)
	}
}

func (p *parser) onOff(ctx string) bool {
	return p.word(ctx, "on", "off").s == "on"
}

// validate checks what needs the whole file: names, duplicates, overlaps,
// limits set by sysctls. It runs on whatever statements parsed cleanly.
func (p *parser) validate() {
	c := p.cfg
	p.validateBGP()
	v := &validator{p: p, links: map[string]int{}}
	for i, l := range c.Links {
		if j, ok := v.links[l.Name]; ok {
			p.addAt(l.NamePos, "link %s is already added at %s", l.Name, c.Links[j].Pos)
			continue
		}
		v.links[l.Name] = i
		v.names = append(v.names, l.Name)
	}
	for _, in := range p.inputs {
		if v.checkDev(in.dev, in.pos) {
			if i, ok := v.links[in.dev]; ok {
				c.Links[i].MPLSInput = in.on
			}
		}
	}
	v.addrs()
	v.duplicateRoutes()
	for i := range c.Routes {
		r := &c.Routes[i]
		if len(r.NextHops) == 0 {
			v.nextHop(r.Via, r.ViaPos(), &r.Dev, r.DevPos())
		}
		for j := range r.NextHops {
			h := &r.NextHops[j]
			v.nextHop(h.Via, h.ViaPos, &h.Dev, h.DevPos)
		}
	}
	v.labelRoutes()
}

// validator holds what validate's checks share: the links by name.
type validator struct {
	p     *parser
	links map[string]int // index in Config.Links
	names []string
}

// checkDev reports whether dev is a declared link (or the loopback),
// saying where it is not.
func (v *validator) checkDev(dev string, pos Pos) bool {
	if _, ok := v.links[dev]; ok || dev == LoopbackDev {
		return true
	}
	v.p.addAt(pos, "unknown device %q; declare it with \"link add %s type afpacket\"%s", dev, dev, suggest(dev, v.names))
	return false
}

// addrs checks the addresses: each once; subnets on different links must
// not overlap, else a next hop would belong to two links.
func (v *validator) addrs() {
	c := v.p.cfg
	for i, a := range c.Addrs {
		v.checkDev(a.Dev, a.DevPos)
		for _, b := range c.Addrs[:i] {
			switch {
			case a.Prefix.Addr() == b.Prefix.Addr():
				v.p.addAt(a.PrefixPos, "address %s is already added at %s", a.Prefix.Addr(), b.Pos)
			case a.Dev != b.Dev && a.Prefix.Overlaps(b.Prefix):
				v.p.addAt(a.PrefixPos, "%s on %s overlaps %s on %s (%s); a subnet belongs to one link",
					a.Prefix, a.Dev, b.Prefix, b.Dev, b.Pos)
			default:
				continue
			}
			break
		}
	}
}

// onLink returns the link whose connected subnet holds addr.
func (v *validator) onLink(addr netip.Addr) (string, bool) {
	for _, a := range v.p.cfg.Addrs {
		if a.Dev != LoopbackDev && a.Prefix.Masked().Contains(addr) {
			return a.Dev, true
		}
	}
	return "", false
}

// own returns where addr is added as the node's own address.
func (v *validator) own(addr netip.Addr) (Pos, bool) {
	for _, a := range v.p.cfg.Addrs {
		if a.Prefix.Addr() == addr {
			return a.Pos, true
		}
	}
	return Pos{}, false
}

// nextHop checks a next hop and, without a dev, sets it to the link of the
// connected subnet holding via.
func (v *validator) nextHop(via netip.Addr, viaPos Pos, dev *string, devPos Pos) {
	if !via.IsValid() {
		if *dev != "" {
			v.checkDev(*dev, devPos)
		}
		return
	}
	if at, ok := v.own(via); ok {
		v.p.addAt(viaPos, "next hop %s is this node's own address (%s)", via, at)
		return
	}
	if *dev != "" {
		v.checkDev(*dev, devPos)
		return
	}
	d, ok := v.onLink(via)
	if !ok {
		v.p.addAt(viaPos, "next hop %s is on no connected subnet; add dev NAME, or an addr add on its subnet", via)
		return
	}
	*dev = d
}

// duplicateRoutes finds prefixes routed twice: it sorts the routes' indexes
// by prefix (a map of a million prefixes would cost ten times the memory)
// and compares neighbours; the later line is the duplicate.
func (v *validator) duplicateRoutes() {
	c := v.p.cfg
	order := make([]int32, len(c.Routes))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := c.Routes[a].Prefix.Compare(c.Routes[b].Prefix); c != 0 {
			return c
		}
		return int(a - b)
	})
	for k := 1; k < len(order); k++ {
		prev, i := order[k-1], order[k]
		if c.Routes[prev].Prefix == c.Routes[i].Prefix {
			r := &c.Routes[i]
			v.p.addAt(r.PrefixPos(), "route to %s is already added at %s", r.Prefix, c.Routes[prev].Pos)
		}
	}
}

// labelRoutes checks the label routes: below net.mpls.platform_labels,
// each label once, and their next hops.
func (v *validator) labelRoutes() {
	c := v.p.cfg
	labels := map[uint32]Pos{}
	for i := range c.LabelRoutes {
		r := &c.LabelRoutes[i]
		if r.Label >= c.Sysctl.PlatformLabels {
			at := "by default"
			if pos, ok := c.Where["net.mpls.platform_labels"]; ok {
				at = "at " + pos.String()
			}
			v.p.addAt(r.LabelPos, "label %d is not below net.mpls.platform_labels=%d (set %s); raise it above %d",
				r.Label, c.Sysctl.PlatformLabels, at, r.Label)
		}
		if prev, ok := labels[r.Label]; ok {
			v.p.addAt(r.LabelPos, "label route for %d is already added at %s", r.Label, prev)
			continue
		}
		labels[r.Label] = r.Pos
		if len(r.NextHops) == 0 {
			v.nextHop(r.Via, r.ViaPos, &r.Dev, r.DevPos)
		}
		for j := range r.NextHops {
			h := &r.NextHops[j]
			v.nextHop(h.Via, h.ViaPos, &h.Dev, h.DevPos)
		}
	}
}
