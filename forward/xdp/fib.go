package xdp

import (
	"errors"
	"fmt"
	"iter"
	"net"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	"github.com/mplsnode/mplsnode/mpls"
)

// FIBCapacity is the most prefixes of one family the program's FIB (an LPM
// trie per family) holds when loaded with Load (LoadFIB sets another):
// 16,777,216, sixteen times a full Internet table. The tries are
// BPF_F_NO_PREALLOC, so the ceiling costs nothing until entries use it
// (about 200 bytes of kernel memory an entry, trie nodes included). A
// family whose routes do not fit is not carried at all (SyncFIB).
const FIBCapacity = 1 << 24

// fibRetry is how long a family whose map refused an entry (full, or the
// kernel out of memory) stays not carried before SyncFIB tries again.
const fibRetry = time.Minute

// RouteKind says what the program does with packets matching a Route.
type RouteKind uint8

// Route kinds; they mirror bpf/lsr.c's FIB_* kinds. Every kind but
// RouteForward passes the packet up, counted under its reason: these
// markers keep a prefix the program does not carry from falling through
// to a shorter one that it does.
const (
	// RouteForward is carried: one next hop, its MAC and egress known.
	RouteForward RouteKind = 1
	// RouteLocal is one of the node's addresses or an IPv4 subnet's
	// broadcast address (/32 or /128): its packets are the stack's
	// (counted local), and packets from it are martian_source.
	RouteLocal RouteKind = 2
	// RouteNotTransit is a range never forwarded (multicast, loopback,
	// link-local, unspecified, limited broadcast): not_transit.
	RouteNotTransit RouteKind = 3
	// RouteECMP has several next hops: userspace picks one per flow
	// (mpls.FlowHash): ecmp.
	RouteECMP RouteKind = 4
	// RouteNotCarried is left to userspace for another reason (a
	// deeper label stack than MaxOutLabels, an egress without the
	// program, a family over FIBCapacity): fib_not_carried.
	RouteNotCarried RouteKind = 5
	// RouteOnLink is an on-link prefix (a connected subnet): its hosts
	// whose MAC is resolved are carried as RouteForward /32 or /128
	// entries, the rest is passed up (no_neighbor).
	RouteOnLink RouteKind = 6
)

// Route is one entry of the program's FIB.
type Route struct {
	// Prefix is the destination, IPv4 or IPv6 (masked; not IPv4-mapped).
	Prefix netip.Prefix
	// Kind says whether the program carries it (RouteForward) or why
	// not.
	Kind RouteKind
	// Labels are pushed on the packet, outermost first (an LER's push);
	// empty for plain IP. More than MaxOutLabels are not carried.
	Labels []mpls.Label
	// LabelTTL is the TTL of pushed labels; 0 uses the decremented IP
	// TTL (the uniform model). The caller applies the TTL model and the
	// route's `ttl`.
	LabelTTL uint8
	// MTU caps the IP packet size (the route's `mtu lock`); 0 means the
	// egress link MTU less the pushed labels. Larger packets are passed
	// up (fragmented or answered with ICMP in userspace).
	MTU uint32
	// Egress is the egress link's interface index; it must be attached.
	Egress int
	// NextHopMAC is the next hop's MAC address; nil while unresolved.
	NextHopMAC net.HardwareAddr
}

// FIBState says what the program's FIB holds after a SyncFIB, and what
// the sync did.
type FIBState struct {
	// Carried counts the RouteForward entries with a resolved next hop.
	Carried int
	// Entries4 and Entries6 count the entries of each family's map,
	// markers included.
	Entries4, Entries6 int
	// Dropped4 and Dropped6 count the routes of a family left out
	// because the family is not carried: more routes than the capacity,
	// or its map refused an entry within the last minute (the kernel out
	// of memory). 0 while the family is carried. Its transit is then
	// passed up (fib_not_carried), never forwarded by a shorter prefix.
	Dropped4, Dropped6 int
	// Written and Deleted count the map entries this sync wrote and
	// deleted (only what changed).
	Written, Deleted int
	// Retry, when not zero, is when a family left out because its map
	// refused an entry is tried again: the next SyncFIB from then on.
	Retry time.Time
}

// SyncFIB makes the program's FIB hold exactly routes (a later route
// replaces an earlier one of the same prefix). Only what changed is
// written, and in an order that keeps every packet on either the old
// table's decision or the new one's, never a mix: changed entries first,
// longest prefixes first (a new /24 is in before the /8 that holds it
// changes), then the prefixes no longer present are deleted, shortest
// first (a /8 goes before the /24s inside it, so nothing falls through to
// a stale shorter entry). Writes go in batches where the kernel takes
// them (BPF_MAP_UPDATE_BATCH), else one at a time.
//
// A family with more routes than the program's FIB capacity (FIBCapacity
// unless loaded with LoadFIB), or whose map refused an entry, is not
// carried: a default marker (RouteNotCarried) is written first, then its
// entries other than RouteLocal and RouteNotTransit are deleted, shortest
// first, so that all its transit is passed up rather than part of it
// forwarded by a shorter prefix than userspace would choose.
func (p *Program) SyncFIB(routes []Route) (FIBState, error) {
	return p.SyncFIBSeq(func(yield func(*Route) bool) {
		for i := range routes {
			if !yield(&routes[i]) {
				return
			}
		}
	})
}

// SyncFIBSeq is SyncFIB for routes given by an iterator (which may reuse
// the Route it yields), so that a caller mirroring a million routes
// needs no []Route of them. It ranges over routes twice.
func (p *Program) SyncFIBSeq(routes iter.Seq[*Route]) (FIBState, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n [2]int
	for r := range routes {
		if r.Prefix.IsValid() {
			n[family(r.Prefix.Addr())]++
		}
	}
	var errs []error
	for {
		var off [2]bool
		for f := range off {
			off[f] = n[f] > p.fibCap || (!p.fibFailed[f].IsZero() && time.Since(p.fibFailed[f]) < fibRetry)
		}
		st, failed, err := p.syncFIBLocked(routes, off)
		errs = append(errs, err)
		if failed == -1 {
			for f := range off {
				switch r := p.fibFailed[f].Add(fibRetry); {
				case !off[f]:
					p.fibFailed[f] = time.Time{} // carried again
				case !p.fibFailed[f].IsZero() && time.Now().Before(r) && (st.Retry.IsZero() || r.Before(st.Retry)):
					st.Retry = r
				}
			}
			return st, errors.Join(errs...)
		}
		// A map refused an entry: leave that family to userspace (the
		// loop ends: it is off now, and an off family writes no more
		// than its markers).
		p.fibFailed[failed] = time.Now()
	}
}

// fibKey is a prefix as the program state holds it (smaller than a
// netip.Prefix).
type fibKey struct {
	addr [16]byte
	bits uint8
	v6   bool
}

// keyOf returns the key of the masked prefix pfx.
func keyOf(pfx netip.Prefix) fibKey {
	k := fibKey{bits: uint8(pfx.Bits()), v6: pfx.Addr().Is6()}
	if k.v6 {
		k.addr = pfx.Addr().As16()
	} else {
		a := pfx.Addr().As4()
		copy(k.addr[:], a[:])
	}
	return k
}

func (k fibKey) family() int {
	if k.v6 {
		return 1
	}
	return 0
}

func (k fibKey) String() string {
	if k.v6 {
		return netip.PrefixFrom(netip.AddrFrom16(k.addr), int(k.bits)).String()
	}
	return netip.PrefixFrom(netip.AddrFrom4([4]byte(k.addr[:4])), int(k.bits)).String()
}

// family returns 0 for IPv4, 1 for IPv6.
func family(a netip.Addr) int {
	if a.Is4() {
		return 0
	}
	return 1
}

// fibSlot is what the program state knows of one prefix of the FIB maps.
// The slots are a slice (p.fibSlots) found through an index by prefix
// (p.fibIndex): a sync looks each route up once and scans the slice.
type fibSlot struct {
	key fibKey
	// v is the map's value (during a sync: the wanted one).
	v lsrFibValue
	// gen is the last sync that asked for the prefix: older ones are
	// deleted; 0 marks a free slot.
	gen uint32
	// dirty says v is to be written this sync.
	dirty bool
	// unknown says a write of v failed: the map holds v, an older
	// value or nothing (rewritten by the next sync).
	unknown bool
}

// want records that the sync gen wants v at k (a later call for the same
// k wins).
func (p *Program) want(gen uint32, k fibKey, v lsrFibValue) {
	i, had := p.fibIndex[k]
	if !had {
		if n := len(p.fibFree); n > 0 {
			i, p.fibFree = p.fibFree[n-1], p.fibFree[:n-1]
		} else {
			i = uint32(len(p.fibSlots))
			p.fibSlots = append(p.fibSlots, fibSlot{})
		}
		p.fibSlots[i] = fibSlot{key: k, v: v, gen: gen, dirty: true}
		p.fibIndex[k] = i
		return
	}
	s := &p.fibSlots[i]
	s.dirty = s.gen == gen || s.v != v || s.unknown
	s.v, s.gen = v, gen
}

// forget frees slot i.
func (p *Program) forget(i uint32) {
	delete(p.fibIndex, p.fibSlots[i].key)
	p.fibSlots[i] = fibSlot{}
	p.fibFree = append(p.fibFree, i)
}

// syncFIBLocked runs one sync with the families in off not carried. It
// returns the family whose map refused an entry while carried (the
// caller retries with it off), or -1.
func (p *Program) syncFIBLocked(routes iter.Seq[*Route], off [2]bool) (FIBState, int, error) {
	p.fibGen++
	if p.fibGen == 0 { // 0 marks free slots
		p.fibGen++
	}
	st := p.wantFIB(p.fibGen, routes, off)
	writes, deletes := p.planFIB(p.fibGen)
	var err error
	var failed int
	st.Written, st.Deleted, failed, err = p.applyFIB(writes, deletes, off)
	p.tallyFIB(&st)
	return st, failed, err
}

// wantFIB records what the sync gen wants of each route, the default
// marker of each family in off, and counts the routes left out of an
// off family.
func (p *Program) wantFIB(gen uint32, routes iter.Seq[*Route], off [2]bool) FIBState {
	var st FIBState
	for r := range routes {
		if !r.Prefix.IsValid() {
			continue
		}
		pfx := r.Prefix.Masked()
		f := family(pfx.Addr())
		if off[f] && r.Kind != RouteLocal && r.Kind != RouteNotTransit {
			if f == 0 {
				st.Dropped4++
			} else {
				st.Dropped6++
			}
			continue
		}
		p.want(gen, keyOf(pfx), p.fibValue(r))
	}
	for f, o := range off {
		if o {
			p.want(gen, defaultKey(f), lsrFibValue{Kind: uint8(RouteNotCarried)})
		}
	}
	return st
}

// fibPlan is the slots a sync writes (or deletes), by family and prefix
// length.
type fibPlan [2][129][]uint32

// planFIB returns what the sync gen writes (its dirty slots) and deletes
// (the slots it did not ask for).
func (p *Program) planFIB(gen uint32) (writes, deletes *fibPlan) {
	writes, deletes = new(fibPlan), new(fibPlan)
	for i := range p.fibSlots {
		s := &p.fibSlots[i]
		f, bits := s.key.family(), s.key.bits
		switch {
		case s.gen == 0:
		case s.gen != gen:
			deletes[f][bits] = append(deletes[f][bits], uint32(i))
		case s.dirty:
			writes[f][bits] = append(writes[f][bits], uint32(i))
		}
	}
	return writes, deletes
}

// applyFIB writes and deletes what a sync planned, family by family, in
// the order SyncFIB describes. It returns the family whose map refused an
// entry while carried, or -1.
func (p *Program) applyFIB(writes, deletes *fibPlan, off [2]bool) (written, deleted, failed int, err error) {
	var errs []error
	failed = -1
	for f := range 2 {
		w, d, ok, err := p.applyFamily(f, &writes[f], &deletes[f], off[f])
		written += w
		deleted += d
		errs = append(errs, err)
		if !ok {
			failed = f
		}
	}
	return written, deleted, failed, errors.Join(errs...)
}

// applyFamily is applyFIB for family f; ok is false when its map refused
// an entry while carried (the rest stays as it was: every packet still
// sees the old decision or the new one).
func (p *Program) applyFamily(f int, writes, deletes *[129][]uint32, off bool) (written, deleted int, ok bool, err error) {
	var w []uint32
	// A default marker goes first: a packet whose entry is not (or no
	// longer) there is passed up, never forwarded by a stale shorter
	// entry.
	if d := writes[0]; len(d) == 1 && p.fibSlots[d[0]].v.Kind != uint8(RouteForward) {
		w = d
		writes[0] = nil
	}
	var longestFirst, shortestFirst []uint32
	for bits := 128; bits >= 0; bits-- {
		longestFirst = append(longestFirst, writes[bits]...)
	}
	for bits := range 129 {
		shortestFirst = append(shortestFirst, deletes[bits]...)
	}
	nw, ok, werr := p.writeFIB(f, w)
	written += nw
	if off {
		// Only markers are written: free the room first (and write the
		// default marker again if the map was full).
		nd, derr := p.deleteFIB(f, shortestFirst)
		if !ok {
			longestFirst = append(longestFirst, w...)
		}
		nw, _, err := p.writeFIB(f, longestFirst)
		return written + nw, nd, true, errors.Join(derr, err)
	}
	if ok {
		var err error
		nw, ok, err = p.writeFIB(f, longestFirst)
		written += nw
		werr = errors.Join(werr, err)
	}
	if !ok {
		return written, 0, false, werr
	}
	nd, derr := p.deleteFIB(f, shortestFirst)
	return written, nd, true, errors.Join(werr, derr)
}

// tallyFIB counts what the program's FIB holds into st (Carried,
// Entries4, Entries6).
func (p *Program) tallyFIB(st *FIBState) {
	st.Carried, st.Entries4, st.Entries6 = 0, 0, 0
	for i := range p.fibSlots {
		tallySlot(st, &p.fibSlots[i], 1)
	}
}

// tallySlot adds what slot s counts for (n = 1) to st, or takes it off
// (n = -1).
func tallySlot(st *FIBState, s *fibSlot, n int) {
	if s.gen == 0 {
		return
	}
	if s.v.Kind == uint8(RouteForward) && s.v.Flags&flagResolved != 0 && !s.unknown {
		st.Carried += n
	}
	if s.key.v6 {
		st.Entries6 += n
	} else {
		st.Entries4 += n
	}
}

// defaultKey is the /0 of family f.
func defaultKey(f int) fibKey { return fibKey{v6: f == 1} }

// fibBatch is the most entries written or deleted in one system call.
const fibBatch = 4096

// batchKeys returns the map keys of the slots idx (all of family f) in
// k4 or k6.
func (p *Program) batchKeys(f int, idx []uint32, k4 []lsrFib4Key, k6 []lsrFib6Key) ([]lsrFib4Key, []lsrFib6Key) {
	k4, k6 = k4[:0], k6[:0]
	for _, i := range idx {
		k := &p.fibSlots[i].key
		if f == 0 {
			k4 = append(k4, lsrFib4Key{Prefixlen: uint32(k.bits), Addr: [4]byte(k.addr[:4])})
		} else {
			k6 = append(k6, lsrFib6Key{Prefixlen: uint32(k.bits), Addr: k.addr})
		}
	}
	return k4, k6
}

// writeFIB writes the slots idx (all of family f) in order, in batches
// where the kernel takes them. It stops at the first entry the map
// refuses (ok false): that entry and those after it are marked unknown
// (the map keeps their old value, or none).
func (p *Program) writeFIB(f int, idx []uint32) (written int, ok bool, err error) {
	m := p.fibMapOf(f)
	var k4 []lsrFib4Key
	var k6 []lsrFib6Key
	vals := make([]lsrFibValue, 0, min(len(idx), fibBatch))
	for start := 0; start < len(idx); start += fibBatch {
		part := idx[start:min(start+fibBatch, len(idx))]
		k4, k6 = p.batchKeys(f, part, k4, k6)
		vals = vals[:0]
		for _, i := range part {
			vals = append(vals, p.fibSlots[i].v)
		}
		done := 0
		if !p.noBatch {
			var err error
			if f == 0 {
				done, err = m.BatchUpdate(k4, vals, nil)
			} else {
				done, err = m.BatchUpdate(k6, vals, nil)
			}
			if errors.Is(err, ebpf.ErrNotSupported) {
				p.noBatch, done = true, 0
			}
			if err == nil {
				p.written(part)
				written += len(part)
				continue
			}
			p.written(part[:done])
		}
		written += done
		// One at a time from the first the batch did not take: which
		// entry is refused, and why.
		for j := done; j < len(part); j++ {
			var err error
			if f == 0 {
				err = m.Put(k4[j], vals[j])
			} else {
				err = m.Put(k6[j], vals[j])
			}
			if err != nil {
				for _, i := range idx[start+j:] {
					p.fibSlots[i].unknown = true
				}
				return written, false, fmt.Errorf("XDP FIB %s: %w", p.fibSlots[part[j]].key, err)
			}
			p.written(part[j : j+1])
			written++
		}
	}
	return written, true, nil
}

// written marks the slots idx written, telling fibTrace (tests).
func (p *Program) written(idx []uint32) {
	for _, i := range idx {
		s := &p.fibSlots[i]
		s.unknown = false
		if p.fibTrace != nil {
			p.fibTrace(s.key, s.v, false)
		}
	}
}

// deleted deletes the slots idx, telling fibTrace (tests).
func (p *Program) deleted(idx []uint32) {
	for _, i := range idx {
		if p.fibTrace != nil {
			p.fibTrace(p.fibSlots[i].key, lsrFibValue{}, true)
		}
		p.forget(i)
	}
}

// deleteFIB deletes the entries of the slots idx (all of family f) in
// order and frees the slots; an entry the map cannot delete is kept
// (retried by the next sync).
func (p *Program) deleteFIB(f int, idx []uint32) (int, error) {
	m := p.fibMapOf(f)
	var errs []error
	var k4 []lsrFib4Key
	var k6 []lsrFib6Key
	deleted := 0
	for start := 0; start < len(idx); start += fibBatch {
		part := idx[start:min(start+fibBatch, len(idx))]
		k4, k6 = p.batchKeys(f, part, k4, k6)
		for j := 0; j < len(part); {
			var done int
			var err error
			switch {
			case p.noBatch:
				if f == 0 {
					err = m.Delete(k4[j])
				} else {
					err = m.Delete(k6[j])
				}
				if err == nil {
					done = 1
				}
			case f == 0:
				done, err = m.BatchDelete(k4[j:], nil)
			default:
				done, err = m.BatchDelete(k6[j:], nil)
			}
			if errors.Is(err, ebpf.ErrNotSupported) {
				p.noBatch = true
				continue
			}
			p.deleted(part[j : j+done])
			deleted += done
			j += done
			if err == nil {
				continue
			}
			// The batch stopped at part[j]: delete it alone to learn
			// why (gone already is fine), then go on after it.
			if !p.noBatch {
				if f == 0 {
					err = m.Delete(k4[j])
				} else {
					err = m.Delete(k6[j])
				}
			}
			switch {
			case err == nil:
				deleted++
				p.deleted(part[j : j+1])
			case errors.Is(err, ebpf.ErrKeyNotExist):
				p.deleted(part[j : j+1])
			default:
				errs = append(errs, fmt.Errorf("XDP FIB %s: delete: %w", p.fibSlots[part[j]].key, err))
			}
			j++
		}
	}
	return deleted, errors.Join(errs...)
}

func (p *Program) fibMapOf(f int) *ebpf.Map {
	if f == 0 {
		return p.objs.Fib4
	}
	return p.objs.Fib6
}

// fibValue returns r as the program's map value; a route the program
// cannot carry becomes a RouteNotCarried marker.
func (p *Program) fibValue(r *Route) lsrFibValue {
	v := lsrFibValue{Kind: uint8(r.Kind)}
	if r.Kind != RouteForward {
		return v
	}
	a, ok := p.links[r.Egress]
	if !ok || len(r.Labels) > MaxOutLabels {
		return lsrFibValue{Kind: uint8(RouteNotCarried)}
	}
	v.N_out = uint8(len(r.Labels))
	for i, l := range r.Labels {
		v.Out[i] = uint32(l)
	}
	v.LabelTtl = r.LabelTTL
	v.Ifindex = uint32(r.Egress)
	mtu := a.MTU - uint32(len(r.Labels))*mpls.EntryLen
	if a.MTU < uint32(len(r.Labels))*mpls.EntryLen {
		mtu = 0
	}
	if r.MTU != 0 && r.MTU < mtu {
		mtu = r.MTU
	}
	v.Mtu = mtu
	v.Src, v.Dst, v.Flags = a.egressMACs(r.NextHopMAC)
	return v
}

// SpecialRoutes are the markers of the address ranges never forwarded
// (RFC 1812 §5.3.7, RFC 4291): multicast, loopback, link-local,
// unspecified, IPv4 limited broadcast. The caller adds them to SyncFIB's
// routes, with its FIB routes inside them left out.
func SpecialRoutes() []Route {
	var out []Route
	for _, s := range []string{"224.0.0.0/4", "127.0.0.0/8", "169.254.0.0/16", "0.0.0.0/32", "255.255.255.255/32",
		"ff00::/8", "fe80::/10", "::1/128", "::/128"} {
		out = append(out, Route{Prefix: netip.MustParsePrefix(s), Kind: RouteNotTransit})
	}
	return out
}
