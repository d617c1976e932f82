package config

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// via parses `via [inet|inet6] ADDR` after the via word.
func (p *parser) via() (netip.Addr, token) {
	t := p.next("a next-hop address after via")
	fam := ""
	if t.s == "inet" || t.s == "inet6" {
		fam = t.s
		t = p.next("a next-hop address after via " + fam)
	} else if t.s == "mpls" {
		p.fail(t, "via mpls is not supported; the next hop is an inet or inet6 address")
	}
	a := p.address(t, "next-hop address")
	if a.IsUnspecified() || a.IsMulticast() {
		p.fail(t, "next hop %s is not a unicast address", a)
	}
	if !p.familyOK(fam, a) {
		p.fail(t, "next hop %s is not %s, as \"via %s\" says", t.s, famName(fam), fam)
	}
	return a, t
}

var reservedNames = map[uint64]string{
	0: "IPv4 explicit null", 1: "router alert", 2: "IPv6 explicit null",
	3: "implicit null", 7: "entropy label indicator", 13: "GAL", 14: "OAM alert",
}

func labelName(v uint64) string {
	if n, ok := reservedNames[v]; ok {
		return fmt.Sprintf("label %d (%s)", v, n)
	}
	return fmt.Sprintf("label %d (reserved)", v)
}

// stack parses a pushed label stack 100/200 (outermost first) and checks
// every label: 16..MaxLabel, or explicit null (0, 2) as the bottom label.
// It returns each label's token for later errors.
func (p *parser) stack(t token) ([]uint32, []token) {
	parts := strings.Split(t.s, "/")
	if len(parts) > MaxLabelDepth {
		p.fail(t, "label stack of %d labels is deeper than %d", len(parts), MaxLabelDepth)
	}
	labels := make([]uint32, 0, len(parts))
	toks := make([]token, 0, len(parts))
	col := t.col
	for i, s := range parts {
		lt := token{s: s, col: col}
		col += len(s) + 1
		if s == "" {
			p.fail(t, "empty label in stack %q; write labels as 100/200, outermost first", t.s)
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil || v > MaxLabel {
			p.fail(lt, "bad label %q; expected a number from 16 to %d", s, MaxLabel)
		}
		bottom := i == len(parts)-1
		switch {
		case v == 3:
			p.fail(lt, "label 3 (implicit null) cannot be pushed; use a pop route at the previous hop")
		case (v == 0 || v == 2) && !bottom:
			p.fail(lt, "%s may only be the bottom label of a stack", labelName(v))
		case v < MinUnreservedLabel && v != 0 && v != 2:
			p.fail(lt, "%s cannot be pushed; use a label from %d to %d", labelName(v), MinUnreservedLabel, MaxLabel)
		}
		labels = append(labels, uint32(v))
		toks = append(toks, lt)
	}
	return labels, toks
}

var routeWords = []string{"encap", "via", "dev", "mtu", "nexthop"}

var hopWords = []string{"encap", "via", "dev", "weight", "nexthop"}

// encap parses `mpls STACK [ttl N]` after encap.
func (p *parser) encap() (labels []uint32, labelToks []token, pos Pos, ttl uint8) {
	et := p.next("mpls after encap")
	if et.s != "mpls" {
		p.fail(et, "unknown encap %q; only encap mpls is supported%s", et.s, suggest(et.s, []string{"mpls"}))
	}
	st := p.next("a label stack such as 100/200 after encap mpls")
	pos = p.at(st)
	labels, labelToks = p.stack(st)
	if p.peek() == "ttl" {
		p.i++
		v, _ := p.number("encap ttl", 1, 255)
		ttl = uint8(v)
	}
	return labels, labelToks, pos, ttl
}

// route parses `route add PREFIX|default [encap mpls STACK [ttl N]]
// [via [inet|inet6] ADDR] [dev NAME] [mtu [lock] N]`, options in any order,
// or a multipath route: `route add PREFIX [mtu [lock] N] nexthop HOP
// [nexthop HOP ...]`, each HOP `[encap mpls STACK [ttl N]] [via [inet|inet6]
// ADDR] [dev NAME] [weight N]`.
func (p *parser) route(pos Pos, family string) {
	r := Route{Pos: pos}
	pt := p.next("a prefix or default after route add")
	r.PrefixCol = int32(pt.col)
	isDefault := pt.s == "default"
	if !isDefault {
		r.Prefix = p.prefix(pt, true)
		if !p.familyOK(family, r.Prefix.Addr()) {
			p.fail(pt, "prefix %s is not %s, as %s requires", pt.s, famName(family), optFor(family))
		}
	}
	var labelToks []token
	var hopLabelToks [][]token
	var mtuTok, firstHopWord token
	var seen, shown wordSet
	for p.more() {
		t := p.next("")
		if p.shownWord(t, &shown) {
			continue
		}
		if t.s == "nexthop" {
			p.noHopWordBefore(firstHopWord, "route")
			h, toks := p.nextHop(t)
			r.NextHops = append(r.NextHops, h)
			hopLabelToks = append(hopLabelToks, toks)
			continue
		}
		if len(r.NextHops) > 0 {
			p.fail(t, "%q after a nexthop: route options (mtu) come before the first nexthop; expected %s%s", t.s, oneOf(hopWords), suggest(t.s, hopWords))
		}
		seen.once(p, t, "route", routeWords)
		switch t.s {
		case "encap":
			var lp Pos
			r.Labels, labelToks, lp, r.TTL = p.encap()
			r.LabelsCol = int32(lp.Col)
			firstHopWord = t
		case "via":
			var vt token
			r.Via, vt = p.via()
			r.ViaCol = int32(vt.col)
			firstHopWord = t
		case "dev":
			var dp Pos
			r.Dev, dp = p.ifName("device name")
			r.DevCol = int32(dp.Col)
			firstHopWord = t
		case "mtu":
			if p.peek() == "lock" {
				p.i++
				r.MTULock = true
			}
			var v uint64
			v, mtuTok = p.number("route mtu", MinMTU, MaxMTU)
			r.MTU = uint32(v)
		default:
			p.fail(t, "unknown word %q in route; expected %s%s", t.s, oneOf(routeWords), suggest(t.s, routeWords))
		}
	}
	if isDefault {
		r.Prefix = defaultPrefix(family, &r)
	}
	v6 := r.Prefix.Addr().Is6()
	if r.MTU != 0 && v6 && r.MTU < MinIPv6MTU {
		p.fail(mtuTok, "mtu %d is below %d, the IPv6 minimum", r.MTU, MinIPv6MTU)
	}
	p.checkRouteHops(&r, labelToks, hopLabelToks)
	p.cfg.Routes = append(p.cfg.Routes, r)
}

// shownWords are the words `mplsnode [-f mpls] route show` writes after a
// route, as `ip route show` does: proto (static, bgp, kernel for a
// connected route), metric (the administrative distance) and scope. They
// are accepted anywhere in a route or label route, so that each line route
// show prints parses back with route add; they describe and change
// nothing: a route of the file or of route add is static, with static's
// distance.
var shownWords = []string{"proto", "metric", "scope"}

var routeProtos = []string{"static", "boot", "kernel", "bgp"}

var routeScopes = []string{"global", "link"}

// shownWord parses t when it is one of shownWords, with its value, and
// reports whether it was.
func (p *parser) shownWord(t token, seen *wordSet) bool {
	if !slices.Contains(shownWords, t.s) {
		return false
	}
	seen.once(p, t, "route", shownWords)
	switch t.s {
	case "proto":
		v := p.next("a protocol after proto")
		if !slices.Contains(routeProtos, v.s) {
			p.fail(v, "unknown proto %q; expected %s%s", v.s, oneOf(routeProtos), suggest(v.s, routeProtos))
		}
	case "metric":
		p.number("route metric", 0, math.MaxUint32)
	case "scope":
		v := p.next("a scope after scope")
		if !slices.Contains(routeScopes, v.s) {
			p.fail(v, "unknown scope %q; expected %s%s", v.s, oneOf(routeScopes), suggest(v.s, routeScopes))
		}
	}
	return true
}

// checkRouteHops checks a route's next hop, or each of a multipath route's
// (labelToks, hopLabelToks: their label words), for a via or a dev.
func (p *parser) checkRouteHops(r *Route, labelToks []token, hopLabelToks [][]token) {
	if len(r.NextHops) == 0 {
		p.checkHop(r.Prefix, r.Labels, labelToks, r.Via, r.ViaPos(), r.Dev, r.DevPos())
		if !r.Via.IsValid() && r.Dev == "" {
			p.failEnd("route %s needs via ADDRESS or dev NAME", r.Prefix)
		}
		return
	}
	for i := range r.NextHops {
		h := &r.NextHops[i]
		p.checkHop(r.Prefix, h.Labels, hopLabelToks[i], h.Via, h.ViaPos, h.Dev, h.DevPos)
		if !h.Via.IsValid() && h.Dev == "" {
			p.add(h.Pos, "nexthop", "nexthop of route %s needs via ADDRESS or dev NAME", r.Prefix)
			panic(abort{})
		}
	}
}

// defaultPrefix is the prefix `route add default` means: IPv6's with
// `-6` (family inet6) or, without a family, when the (first) next hop is
// IPv6; else IPv4's.
func defaultPrefix(family string, r *Route) netip.Prefix {
	via := r.Via
	if len(r.NextHops) > 0 {
		via = r.NextHops[0].Via
	}
	if family == "inet6" || (family == "" && via.Is6()) {
		return netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
}

// nextHop parses one HOP after the nexthop word t.
func (p *parser) nextHop(t token) (NextHop, []token) {
	h := NextHop{Hop: Hop{Pos: p.pos(t.col)}}
	var labelToks []token
	var seen wordSet
	for p.more() && p.peek() != "nexthop" && !slices.Contains(shownWords, p.peek()) {
		w := p.next("")
		seen.once(p, w, "nexthop", hopWords)
		switch {
		case p.hopWord(w, &h.Hop, true):
		case w.s == "encap":
			h.Labels, labelToks, h.LabelsPos, h.TTL = p.encap()
		case w.s == "mtu":
			p.fail(w, "mtu is a route option: write it before the first nexthop")
		default:
			p.fail(w, "unknown word %q in nexthop; expected %s%s", w.s, oneOf(hopWords), suggest(w.s, hopWords))
		}
	}
	return h, labelToks
}

// hopWord parses the word w of a hop that both kinds of nexthop share (via
// ADDR, dev NAME, and with weight weight N) into h, and reports whether w
// was one of them.
func (p *parser) hopWord(w token, h *Hop, weight bool) bool {
	switch {
	case w.s == "via":
		var vt token
		h.Via, vt = p.via()
		h.ViaPos = p.at(vt)
	case w.s == "dev":
		h.Dev, h.DevPos = p.ifName("device name")
	case w.s == "weight" && weight:
		v, _ := p.number("nexthop weight", 1, 256)
		h.Weight = uint16(v)
	default:
		return false
	}
	return true
}

// checkHop checks one next hop of a route to prefix: families (an IPv6
// prefix may take an IPv4 next hop when labelled: 6PE, RFC 4798), the
// bottom label against the payload, link-local next hops, lo.
func (p *parser) checkHop(prefix netip.Prefix, labels []uint32, labelToks []token, via netip.Addr, viaPos Pos, dev string, devPos Pos) {
	v6 := prefix.Addr().Is6()
	if via.IsValid() && via.Is6() != v6 {
		switch {
		case !v6:
			p.addAt(viaPos, "next hop %s is IPv6 but prefix %s is IPv4; an IPv4 route needs an IPv4 next hop", via, prefix)
			panic(abort{})
		case labels == nil:
			p.addAt(viaPos, "next hop %s is IPv4 but prefix %s is IPv6; only a labelled route may cross families (6PE, RFC 4798: add encap mpls LABEL)", via, prefix)
			panic(abort{})
		}
	}
	if n := len(labels); n > 0 {
		bottom := labels[n-1]
		if (bottom == 0 && v6) || (bottom == 2 && !v6) {
			p.fail(labelToks[n-1], "%s cannot carry %s packets; use %d",
				labelName(uint64(bottom)), fam(v6), map[bool]int{false: 0, true: 2}[v6])
		}
	}
	if via.IsValid() && via.Is6() && via.IsLinkLocalUnicast() && dev == "" {
		p.addAt(viaPos, "link-local next hop %s needs dev NAME", via)
		panic(abort{})
	}
	if labels != nil && dev == LoopbackDev {
		p.addAt(devPos, "a labelled route cannot leave on lo; name the link toward the next hop")
		panic(abort{})
	}
}

// wordSet records which of a statement's words were seen (at most 64).
type wordSet uint64

// once fails if t, one of words, was seen before in this statement.
func (s *wordSet) once(p *parser, t token, ctx string, words []string) {
	for i, w := range words {
		if w == t.s {
			if *s&(1<<i) != 0 {
				p.fail(t, "%s given twice in one %s", t.s, ctx)
			}
			*s |= 1 << i
			return
		}
	}
}

func fam(v6 bool) string {
	if v6 {
		return "IPv6"
	}
	return "IPv4"
}

var labelRouteWords = []string{"as", "via", "dev", "nexthop"}

var labelHopWords = []string{"as", "via", "dev", "weight", "nexthop"}

// labelRoute parses `-f mpls route add LABEL [as [to] STACK]
// [via [inet|inet6] ADDR] [dev NAME]`, or a multipath label route:
// `-f mpls route add LABEL nexthop HOP [nexthop HOP ...]`, each HOP
// `[as [to] STACK] via [inet|inet6] ADDR [dev NAME] [weight N]`.
func (p *parser) labelRoute(pos Pos) {
	r := LabelRoute{Pos: pos}
	lt := p.next("an incoming label after -f mpls route add")
	r.LabelPos = p.at(lt)
	v, err := strconv.ParseUint(lt.s, 10, 64)
	if err != nil || v > MaxLabel {
		p.fail(lt, "bad label %q; expected a number from %d to %d (or 0, 2)", lt.s, MinUnreservedLabel, MaxLabel)
	}
	if v < MinUnreservedLabel && v != 0 && v != 2 {
		p.fail(lt, "incoming %s is reserved; label routes take 0, 2 or %d..%d", labelName(v), MinUnreservedLabel, MaxLabel)
	}
	r.Label = uint32(v)
	seen := map[string]bool{}
	var asTok token
	var firstHopWord token
	var hop LabelNextHop // the single hop's words (labelHopWord)
	var shown wordSet
	for p.more() {
		t := p.next("")
		if p.shownWord(t, &shown) {
			continue
		}
		if t.s == "nexthop" {
			p.noHopWordBefore(firstHopWord, "label route")
			r.NextHops = append(r.NextHops, p.labelNextHop(t))
			continue
		}
		if len(r.NextHops) > 0 {
			p.fail(t, "%q after a nexthop; expected %s%s", t.s, oneOf(labelHopWords), suggest(t.s, labelHopWords))
		}
		p.once(seen, t, "label route")
		firstHopWord = t
		if p.labelHopWord(t, &hop) {
			if t.s == "as" {
				asTok = t
			}
			continue
		}
		switch t.s {
		case "to":
			p.fail(t, "\"to\" belongs after \"as\": write as to 300/400")
		default:
			p.fail(t, "unknown word %q in label route; expected %s%s", t.s, oneOf(labelRouteWords), suggest(t.s, labelRouteWords))
		}
	}
	if len(r.NextHops) > 0 {
		p.labelMultipath(&r)
		return
	}
	r.OutLabels, r.OutLabelsPos = hop.OutLabels, hop.OutLabelsPos
	r.Via, r.ViaPos, r.Dev, r.DevPos = hop.Via, hop.ViaPos, hop.Dev, hop.DevPos
	switch {
	case r.Dev == LoopbackDev && r.OutLabels != nil:
		p.fail(asTok, "dev lo delivers locally; a swap (as to) needs a next hop on a link")
	case r.Dev == LoopbackDev && r.Via.IsValid():
		p.addAt(r.ViaPos, "dev lo delivers locally; drop via, or name the link that reaches %s", r.Via)
		panic(abort{})
	case r.Dev == LoopbackDev:
		r.Action = LabelPopLocal
	case !r.Via.IsValid():
		p.failEnd("label route %d needs via ADDRESS (pop or swap and forward) or dev lo (deliver locally)", r.Label)
	case r.OutLabels != nil:
		r.Action = LabelSwap
	default:
		r.Action = LabelPopForward
	}
	if r.Via.IsValid() && r.Via.Is6() && r.Via.IsLinkLocalUnicast() && r.Dev == "" {
		p.addAt(r.ViaPos, "link-local next hop %s needs dev NAME", r.Via)
		panic(abort{})
	}
	p.cfg.LabelRoutes = append(p.cfg.LabelRoutes, r)
}

// labelMultipath checks the hops of the multipath label route r and adds
// it; one hop makes the one-hop route (swap or pop-forward) it is.
func (p *parser) labelMultipath(r *LabelRoute) {
	for i := range r.NextHops {
		h := &r.NextHops[i]
		switch {
		case h.Dev == LoopbackDev:
			p.addAt(h.DevPos, "dev lo delivers locally; a nexthop of a multipath label route needs a link toward its via")
			panic(abort{})
		case !h.Via.IsValid():
			p.add(h.Pos, "nexthop", "nexthop of label route %d needs via ADDRESS", r.Label)
			panic(abort{})
		case h.OutLabels != nil && (r.Label == 0 || r.Label == 2):
			p.addAt(h.OutLabelsPos, "%s can only be popped; drop as", labelName(uint64(r.Label)))
			panic(abort{})
		case h.Via.Is6() && h.Via.IsLinkLocalUnicast() && h.Dev == "":
			p.addAt(h.ViaPos, "link-local next hop %s needs dev NAME", h.Via)
			panic(abort{})
		}
	}
	if len(r.NextHops) == 1 {
		h := r.NextHops[0]
		r.NextHops = nil
		r.OutLabels, r.OutLabelsPos = h.OutLabels, h.OutLabelsPos
		r.Via, r.ViaPos, r.Dev, r.DevPos = h.Via, h.ViaPos, h.Dev, h.DevPos
		r.Action = LabelPopForward
		if r.OutLabels != nil {
			r.Action = LabelSwap
		}
	} else {
		r.Action = LabelMultipath
	}
	p.cfg.LabelRoutes = append(p.cfg.LabelRoutes, *r)
}

// labelHopWord parses the word w of a label route's hop that a one-hop
// and a multipath label route share (as [to] STACK, via ADDR, dev NAME)
// into h, and reports whether w was one of them.
func (p *parser) labelHopWord(w token, h *LabelNextHop) bool {
	if w.s != "as" {
		return p.hopWord(w, &h.Hop, false)
	}
	if p.peek() == "to" {
		p.i++
	}
	st := p.next("a label stack such as 300/400 after as to")
	h.OutLabelsPos = p.at(st)
	h.OutLabels, _ = p.stack(st)
	return true
}

// labelNextHop parses one HOP of a multipath label route after the
// nexthop word t.
func (p *parser) labelNextHop(t token) LabelNextHop {
	h := LabelNextHop{Hop: Hop{Pos: p.pos(t.col)}}
	var seen wordSet
	for p.more() && p.peek() != "nexthop" && !slices.Contains(shownWords, p.peek()) {
		w := p.next("")
		seen.once(p, w, "nexthop", labelHopWords)
		if !p.labelHopWord(w, &h) && !p.hopWord(w, &h.Hop, true) {
			p.fail(w, "unknown word %q in nexthop; expected %s%s", w.s, oneOf(labelHopWords), suggest(w.s, labelHopWords))
		}
	}
	return h
}

// noHopWordBefore fails at first, a word of a single hop written before
// the first nexthop of a multipath route (what: "route" or "label
// route"); a zero token is none.
func (p *parser) noHopWordBefore(first token, what string) {
	if first.s != "" {
		p.fail(first, "%s belongs inside a nexthop in a multipath %s: write it after the nexthop word", first.s, what)
	}
}
