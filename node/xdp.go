package node

import (
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/forward"
	fxdp "github.com/mplsnode/mplsnode/forward/xdp"
	"github.com/mplsnode/mplsnode/link/neighbor"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/stack"
	"github.com/prometheus/client_golang/prometheus"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// xdpSyncInterval is how often the XDP label switch's maps are brought up
// to date with the neighbour table and the egress links' ability to take
// redirected frames. Table changes sync at once: the node's own writes
// (reload, control socket) before they return, every new FIB (BGP too)
// as soon as it is published (mpls.Tables.Subscribe).
var xdpSyncInterval = time.Second

// xdpResolveWait bounds how long the plane waits, before its first sync
// of a large FIB, for the FIB's next hops to resolve: entries written
// unresolved would all be written again when they do.
const xdpResolveWait = time.Second

// xdpFIBCapacity is the most prefixes of a family the program's FIB
// holds (tests lower it).
var xdpFIBCapacity = fxdp.FIBCapacity

// xdpFIBLogWrites is the number of FIB map writes and deletes from which
// a sync is logged with its duration.
const xdpFIBLogWrites = 10000

// xdpPlane runs the label switch's decisions as an XDP program on the
// node's AF_PACKET links (set forward xdp on|auto) and keeps its maps in
// step with the ILM, the neighbour table and the egress links' state.
// Without the program (set forward xdp off, or auto where no link takes
// it) the plane runs its neighbour watch alone (prog is nil), which the
// userspace plane needs as much.
type xdpPlane struct {
	log  *slog.Logger
	s    *stack.Stack
	prog *fxdp.Program // nil: the userspace plane alone
	// watch follows neighbours that announce a new MAC (neighbor.go);
	// with the program, it kicks a sync at once.
	watch *neighborWatch
	feats *fxdp.Features         // opened in the node's network namespace
	nics  map[string]tcpip.NICID // the stack NIC of each link
	links map[string]fxdp.Link   // attached links by name
	// skipped says why a link runs without the program (auto mode).
	skipped map[string]string

	// What the FIB mirror needs: whether the node forwards IP at all,
	// the TTL of pushed labels (pipe model; 0: the IP TTL), the
	// connected subnets (on-link routes, not in the FIB).
	fwd       bool
	model     mpls.TTLModel
	pipeTTL   uint8
	connected []forward.Route

	mu          sync.Mutex // serialises sync
	egressOK    map[int]bool
	resolved    int           // entries carried with a resolved next hop, last sync
	fibMirrored *mpls.FIB     // the FIB last mirrored
	fibDeps     fibDeps       // what else the mirror was built from
	fibState    fxdp.FIBState // what the program's FIB held after the last sync
	fibSync     time.Duration // how long the last FIB sync took
	fibWalks    uint64        // FIB syncs that walked the routes
	fibErr      string        // the last FIB sync's error, "" if none

	// fibChanged wakes the plane after each new FIB; unsubscribe ends
	// that.
	fibChanged  <-chan struct{}
	unsubscribe func()
	// kick asks for a sync now (kickNow): a next hop the program lacked
	// was just resolved, or one was just resolved again for a new MAC.
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// fibDeps is what the FIB mirror depends on besides the FIB: the MAC of
// each next hop of its carried routes, the connected subnets' resolved
// hosts, the node's own addresses. A sync that finds them and the FIB
// unchanged writes nothing and walks no route.
type fibDeps struct {
	hops   map[neighbor.Key]string // the MAC, "" if unresolved
	hosts  string
	locals string
}

// startXDP loads and attaches the XDP label switch as mode asks: off
// returns the plane without the program (its neighbour watch alone); on
// fails unless every AF_PACKET link of links takes it; auto attaches where
// it can and logs once for each link where it cannot (none: the plane
// without the program). dflt (a forwarding node without a `set forward
// xdp` line, auto) also runs without the program when no link it took
// takes redirected frames. Links given as endpoints (tests, embedders) have
// no interface and never take it. It runs in the node's network
// namespace.
func startXDP(mode config.XDPMode, dflt bool, c *converted, s *stack.Stack, logger *slog.Logger) (*xdpPlane, error) {
	// The userspace plane alone: the neighbour watch, nothing to kick.
	userspace := func() *xdpPlane {
		return &xdpPlane{log: logger, s: s, watch: startNeighborWatch(s, c.links, logger, nil)}
	}
	if mode == config.XDPOff {
		return userspace(), nil
	}
	model, links := c.ttl, c.links
	fail := func(format string, args ...any) (*xdpPlane, error) {
		err := fmt.Errorf("set forward xdp "+mode.String()+": "+format, args...)
		if mode == config.XDPOn {
			return nil, err
		}
		logger.Warn("XDP label switch off", "reason", err.Error())
		return userspace(), nil
	}
	prog, err := fxdp.LoadFIB(model, xdpFIBCapacity)
	if err != nil {
		return fail("%w", err)
	}
	feats, err := fxdp.OpenFeatures()
	if err != nil {
		prog.Close()
		return fail("%w", err)
	}
	x := &xdpPlane{log: logger, s: s, prog: prog, feats: feats, links: map[string]fxdp.Link{}, skipped: map[string]string{},
		egressOK: map[int]bool{}, nics: map[string]tcpip.NICID{}, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		fwd: c.fwd, model: model, connected: connectedRoutes(c)}
	if model == mpls.TTLPipe {
		x.pipeTTL = mpls.PushTTL(model, 0, c.pipe)
	}
	for id, info := range s.Netstack().NICInfo() {
		x.nics[info.Name] = id
	}
	for _, l := range links {
		why := ""
		var fl fxdp.Link
		if l.Kind != stack.LinkAFPacket {
			why = "a " + l.Kind.String() + " link has no interface to attach to"
		} else if l.Capture != nil {
			// Frames the program carries never reach userspace: a link
			// --pcap records takes the userspace path both ways (a link
			// without the program is no redirect target either), so that
			// the capture sees every frame.
			why = "--pcap records it"
		} else if ifc, err := net.InterfaceByName(l.Name); err != nil {
			why = err.Error()
		} else if ep := s.Endpoint(l.Name); ep == nil {
			why = "no such link in the stack"
		} else {
			fl = fxdp.Link{Name: l.Name, Index: ifc.Index, MAC: net.HardwareAddr(ep.LinkAddress()),
				MTU: ep.LinkMTU(), Ingress: !l.RejectMPLS}
			if err := prog.Attach(fl); err != nil {
				why = err.Error()
			}
		}
		if why != "" {
			if mode == config.XDPOn && l.Capture == nil {
				prog.Close()
				feats.Close()
				return nil, fmt.Errorf("set forward xdp on: link %s: %s", l.Name, why)
			}
			x.skipped[l.Name] = why
			logger.Warn("XDP label switch not on link", "link", l.Name, "reason", why)
			continue
		}
		x.links[l.Name] = fl
	}
	if len(x.links) == 0 {
		prog.Close()
		feats.Close()
		if captured := slices.ContainsFunc(links, func(l stack.Link) bool { return l.Capture != nil }); captured {
			logger.Info("XDP label switch off: --pcap records the links it would run on")
			return userspace(), nil
		}
		return fail("no link took the program")
	}
	if dflt && !x.carries() {
		// The program could carry nothing: every frame would take the
		// userspace path after it, which costs bulk TCP on a veth more
		// than it saves. `set forward xdp auto` runs it anyway.
		prog.Close()
		feats.Close()
		logger.Info("XDP label switch off: no link takes redirected frames (a veth peer runs no NAPI: `ethtool -K PEER gro on`); set forward xdp auto runs it anyway")
		return userspace(), nil
	}
	x.watch = startNeighborWatch(s, links, logger, x.kickNow)
	// Subscribed before the first sync: no FIB published from now on is
	// missed.
	x.fibChanged, x.unsubscribe = s.Tables().Subscribe()
	x.resolveFIBNextHops(xdpResolveWait)
	x.sync()
	go x.run()
	logger.Info("XDP label switch on", "links", len(x.links), "verified_instructions", prog.VerifiedInstructions())
	return x, nil
}

// carries reports whether any link the program runs on takes redirected
// frames, so that the program can carry frames to it.
func (x *xdpPlane) carries() bool {
	for _, l := range x.links {
		if ok, err := x.feats.RedirectCapable(l.Index); err == nil && ok {
			return true
		}
	}
	return false
}

// kickNow asks the plane for a sync now; it never blocks (a sync already
// asked for takes this one in).
func (x *xdpPlane) kickNow() {
	select {
	case x.kick <- struct{}{}:
	default:
	}
}

func (x *xdpPlane) run() {
	defer close(x.done)
	t := time.NewTicker(xdpSyncInterval)
	defer t.Stop()
	for {
		select {
		case <-x.stop:
			return
		case <-t.C:
			x.sync()
		case <-x.kick:
			x.sync()
		case <-x.fibChanged:
			// A new FIB (a route written by BGP, the control socket or
			// a reload; several coalesce): mirror it now.
			x.sync()
		}
	}
}

// sync mirrors the ILM into the program: each swap and pop-forward entry
// towards an attached link, with its next hop's MAC from the stack's
// neighbour table (resolution is started for the missing ones, and their
// answer starts the next sync), and marks each attached link as an egress that
// takes redirected frames or not.
func (x *xdpPlane) sync() {
	if x.prog == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, l := range x.links {
		ok, err := x.feats.RedirectCapable(l.Index)
		if err != nil {
			ok = false
		}
		if prev, seen := x.egressOK[l.Index]; !seen || prev != ok {
			if ok {
				x.log.Info("XDP label switch: egress link takes redirected frames", "link", l.Name)
			} else {
				x.log.Warn("XDP label switch: frames for this egress link take the userspace path",
					"link", l.Name, "reason", "its veth peer runs no NAPI (no XDP program, GRO off): `ethtool -K PEER gro on` lets the kernel redirect into it")
			}
			x.egressOK[l.Index] = ok
		}
		if err := x.prog.SetEgressOK(l.Index, ok); err != nil {
			x.log.Warn("XDP label switch: egress state", "link", l.Name, "err", err)
		}
	}
	ns := x.s.Netstack()
	macs := map[neighbor.Key]net.HardwareAddr{}
	mac := x.cachedNeighbor(ns, macs)
	var entries []fxdp.Entry
	entries, x.resolved = x.ilmEntries(x.s.Tables().ILM().Entries(), mac)
	if err := x.prog.Sync(entries); err != nil {
		x.log.Warn("XDP label switch: map update", "err", err)
	}
	x.syncFIB(ns, macs)
}

// ilmEntries returns the ILM entries the program carries, with the
// number whose next hop mac resolved: swaps and pops-and-forwards on an
// attached link, and multipath entries as ecmp (the program passes their
// frames up: the flow hash that keeps a flow on one hop is userspace's,
// so no hop of theirs is mirrored as if it were the only one).
func (x *xdpPlane) ilmEntries(ilm []mpls.ILMEntry, mac func(dev string, addr netip.Addr) net.HardwareAddr) (entries []fxdp.Entry, resolved int) {
	for _, e := range ilm {
		if e.Action == mpls.ILMMultipath {
			entries = append(entries, fxdp.Entry{Label: e.Label, Action: e.Action})
			continue
		}
		l, ok := x.links[e.Device]
		if !ok || (e.Action != mpls.ILMSwap && e.Action != mpls.ILMPopForward) {
			continue
		}
		fe := fxdp.Entry{Label: e.Label, Action: e.Action, OutLabels: e.OutLabels, Payload: e.Payload, Egress: l.Index}
		if m := mac(e.Device, e.NextHop); m != nil {
			fe.NextHopMAC = m
			resolved++
		}
		entries = append(entries, fe)
	}
	return entries, resolved
}

// cachedNeighbor returns x.neighbor for ns with its answers kept in macs,
// so that one sync asks the neighbour table once per next hop.
func (x *xdpPlane) cachedNeighbor(ns *gstack.Stack, macs map[neighbor.Key]net.HardwareAddr) func(dev string, addr netip.Addr) net.HardwareAddr {
	return func(dev string, addr netip.Addr) net.HardwareAddr {
		key := neighbor.Key{Link: dev, Addr: addr}
		m, seen := macs[key]
		if !seen {
			m = x.neighbor(ns, dev, addr)
			macs[key] = m
		}
		return m
	}
}

// syncFIB mirrors the FIB into the program if it or what the mirror
// depends on (fibDeps) changed since the last sync; macs caches next
// hops' MACs for this sync.
func (x *xdpPlane) syncFIB(ns *gstack.Stack, macs map[neighbor.Key]net.HardwareAddr) {
	fib := x.s.Tables().FIB()
	mac := x.cachedNeighbor(ns, macs)
	hostsOf := func(dev string, v6 bool) []resolvedHost { return x.resolvedHosts(ns, dev, v6) }
	locals := forward.LocalAddrs(ns)
	deps := fibDeps{hosts: x.hostsKey(hostsOf), locals: fmt.Sprint(locals)}
	if fib == x.fibMirrored && deps.hosts == x.fibDeps.hosts && deps.locals == x.fibDeps.locals {
		same := true
		for k, m := range x.fibDeps.hops {
			if string(mac(k.Link, k.Addr)) != m {
				same = false
				break
			}
		}
		// A family the program left out after its map refused an
		// entry is tried again when its time comes.
		if same && (x.fibState.Retry.IsZero() || time.Now().Before(x.fibState.Retry)) {
			return
		}
	}
	deps.hops = map[neighbor.Key]string{}
	recordMAC := func(dev string, addr netip.Addr) net.HardwareAddr {
		m := mac(dev, addr)
		deps.hops[neighbor.Key{Link: dev, Addr: addr}] = string(m)
		return m
	}
	start := time.Now()
	x.fibWalks++
	st, err := x.prog.SyncFIBSeq(x.fibRoutes(fib, recordMAC, hostsOf, locals))
	took := time.Since(start)
	if err != nil {
		x.log.Warn("XDP label switch: FIB map update", "err", err)
		x.fibErr = err.Error()
	} else {
		x.fibErr = ""
	}
	for _, fam := range []struct {
		name          string
		before, after int
	}{{"IPv4", x.fibState.Dropped4, st.Dropped4}, {"IPv6", x.fibState.Dropped6, st.Dropped6}} {
		switch {
		case fam.before == 0 && fam.after > 0:
			x.log.Warn("XDP label switch: FIB family not carried: its transit takes the userspace path",
				"family", fam.name, "routes", fam.after, "capacity", x.prog.FIBCapacity(), "err", x.fibErr)
		case fam.before > 0 && fam.after == 0:
			x.log.Info("XDP label switch: FIB family carried again", "family", fam.name)
		}
	}
	if st.Written+st.Deleted >= xdpFIBLogWrites {
		x.log.Info("XDP label switch: FIB mirrored", "routes", fib.Len(), "written", st.Written, "deleted", st.Deleted,
			"map_entries", st.Entries4+st.Entries6, "took", took.Round(time.Millisecond).String())
	}
	x.fibState, x.fibSync = st, took
	x.fibMirrored, x.fibDeps = fib, deps
	if err != nil {
		x.fibMirrored = nil // retried by the next sync
	}
}

// hostsKey returns the connected subnets' resolved hosts as one string
// (sorted: the neighbour table's order is a map's), to compare with the
// last sync's.
func (x *xdpPlane) hostsKey(hosts func(dev string, v6 bool) []resolvedHost) string {
	var all []string
	for _, c := range x.connected {
		if _, attached := x.links[c.Device]; !attached {
			continue
		}
		for _, h := range hosts(c.Device, c.Prefix.Addr().Is6()) {
			if c.Prefix.Contains(h.addr) {
				all = append(all, c.Device+" "+h.addr.String()+" "+h.mac.String())
			}
		}
	}
	slices.Sort(all)
	return strings.Join(all, ",")
}

// resolveFIBNextHops starts resolving the next hops of the FIB's carried
// routes and, for a FIB of xdpFIBLogWrites routes or more, waits up to
// wait for them all to resolve.
func (x *xdpPlane) resolveFIBNextHops(wait time.Duration) {
	fib := x.s.Tables().FIB()
	if !x.fwd || fib.Len() < xdpFIBLogWrites {
		return
	}
	hops := map[neighbor.Key]bool{}
	var last *mpls.Group
	for i := range fib.Len() {
		e := fib.Entry(i)
		if e.Group == last || len(e.Group.Hops) > 1 {
			continue
		}
		last = e.Group
		if h := &e.Group.Hops[0]; h.Via.IsValid() {
			if _, ok := x.links[h.Device]; ok {
				hops[neighbor.Key{Link: h.Device, Addr: h.Via}] = true
			}
		}
	}
	ns := x.s.Netstack()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		for k := range hops {
			if x.neighbor(ns, k.Link, k.Addr) != nil {
				delete(hops, k)
			}
		}
		if len(hops) == 0 {
			return
		}
		select {
		case <-x.kick: // one resolved
		case <-deadline.C:
			return
		}
	}
}

// fibRoutes returns the program's FIB (see fxdp.Route): the ranges never
// forwarded, the node's FIB entries (single next hop: carried; several:
// ecmp, passed up), the connected subnets as on-link markers with a host
// entry for each resolved neighbour that the connected route is the
// longest match for (hosts), and the node's own addresses (locals). With
// IP forwarding off, transit is not carried at all (default markers). The
// Route yielded is reused.
func (x *xdpPlane) fibRoutes(fib *mpls.FIB, mac func(dev string, addr netip.Addr) net.HardwareAddr,
	hosts func(dev string, v6 bool) []resolvedHost, locals []netip.Addr) iter.Seq[*fxdp.Route] {
	special := fxdp.SpecialRoutes()
	inSpecial := func(p netip.Prefix) bool {
		for _, s := range special {
			if s.Prefix.Bits() <= p.Bits() && s.Prefix.Contains(p.Addr()) {
				return true
			}
		}
		return false
	}
	return func(yield func(*fxdp.Route) bool) {
		var r fxdp.Route
		// Routes share next-hop groups (a million routes over a few
		// neighbours), consecutive ones often the same: their MAC is
		// looked up once a run.
		var lastGroup *mpls.Group
		var lastMAC net.HardwareAddr
		for i := range special {
			if !yield(&special[i]) {
				return
			}
		}
		if !x.fwd {
			for _, a := range []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()} {
				r = fxdp.Route{Prefix: netip.PrefixFrom(a, 0), Kind: fxdp.RouteNotCarried}
				if !yield(&r) {
					return
				}
			}
		} else {
			for i := range fib.Len() {
				e := fib.Entry(i)
				if inSpecial(e.Prefix) {
					continue
				}
				r = fxdp.Route{Prefix: e.Prefix, Kind: fxdp.RouteForward, MTU: e.MTU}
				h := &e.Group.Hops[0]
				l, attached := x.links[h.Device]
				switch {
				case len(e.Group.Hops) > 1:
					r.Kind = fxdp.RouteECMP
				case !attached || len(h.Labels) > fxdp.MaxOutLabels:
					r.Kind = fxdp.RouteNotCarried
				case !h.Via.IsValid() && len(h.Labels) == 0:
					r.Kind = fxdp.RouteOnLink
				case !h.Via.IsValid():
					r.Kind = fxdp.RouteNotCarried
				default:
					r.Egress = l.Index
					r.Labels = h.Labels
					if e.Group != lastGroup {
						lastGroup, lastMAC = e.Group, mac(h.Device, h.Via)
					}
					r.NextHopMAC = lastMAC
					if len(h.Labels) > 0 {
						r.LabelTTL = e.TTL
						if r.LabelTTL == 0 {
							r.LabelTTL = x.pipeTTL
						}
					}
				}
				if !yield(&r) {
					return
				}
			}
			for _, c := range x.connected {
				if e, ok := fib.Lookup(c.Prefix.Addr()); ok && e.Prefix == c.Prefix && forward.FIBWins(e.Prefix, c.Prefix) {
					continue // the same prefix in the FIB: a tie, which the FIB wins
				}
				r = fxdp.Route{Prefix: c.Prefix, Kind: fxdp.RouteOnLink}
				if !yield(&r) {
					return
				}
				l, attached := x.links[c.Device]
				if !attached {
					continue
				}
				for _, h := range hosts(c.Device, c.Prefix.Addr().Is6()) {
					if !c.Prefix.Contains(h.addr) {
						continue
					}
					if e, ok := fib.Lookup(h.addr); ok && forward.FIBWins(e.Prefix, c.Prefix) {
						continue
					}
					r = fxdp.Route{Prefix: netip.PrefixFrom(h.addr, h.addr.BitLen()), Kind: fxdp.RouteForward,
						Egress: l.Index, NextHopMAC: h.mac}
					if !yield(&r) {
						return
					}
				}
			}
		}
		// Last, so that they replace any entry of the same prefix: the
		// node's own addresses are never transit.
		for _, a := range locals {
			r = fxdp.Route{Prefix: netip.PrefixFrom(a, a.BitLen()), Kind: fxdp.RouteLocal}
			if !yield(&r) {
				return
			}
		}
	}
}

// resolvedHost is a neighbour whose MAC is known.
type resolvedHost struct {
	addr netip.Addr
	mac  net.HardwareAddr
}

// resolvedHosts returns the neighbours of link dev (IPv6 or IPv4) whose
// MAC the stack's neighbour table knows.
func (x *xdpPlane) resolvedHosts(ns *gstack.Stack, dev string, v6 bool) []resolvedHost {
	nic, ok := x.nics[dev]
	if !ok {
		return nil
	}
	proto := header.IPv4ProtocolNumber
	if v6 {
		proto = header.IPv6ProtocolNumber
	}
	nbrs, err := ns.Neighbors(nic, proto)
	if err != nil {
		return nil
	}
	var out []resolvedHost
	for _, n := range nbrs {
		a, ok := netip.AddrFromSlice(n.Addr.AsSlice())
		if !ok || !neighbor.Usable(n) {
			continue
		}
		if x.fwd {
			neighbor.ConfirmStale(ns, nic, proto, n) // the program forwards to it
		}
		out = append(out, resolvedHost{addr: a, mac: net.HardwareAddr(n.LinkAddr)})
	}
	return out
}

// neighbor returns addr's MAC address on link dev from the stack's
// neighbour table (neighbor.Known), or nil after starting its resolution
// (a sync is kicked when it resolves).
func (x *xdpPlane) neighbor(ns *gstack.Stack, dev string, addr netip.Addr) net.HardwareAddr {
	nic, ok := x.nics[dev]
	if !ok {
		return nil
	}
	mac, ok := neighbor.Known(ns, nic, addr, func(r gstack.LinkResolutionResult) {
		if r.Err == nil {
			x.kickNow()
		}
	})
	if !ok {
		return nil
	}
	return net.HardwareAddr(mac)
}

// XDPReport is the XDP label switch's state and counters.
type XDPReport struct {
	// Links names the links the program runs on.
	Links []string `json:"links"`
	// EgressOK names the attached links that take redirected frames.
	EgressOK []string `json:"egress_ok"`
	// Skipped maps a link without the program to the reason (auto mode).
	Skipped map[string]string `json:"skipped,omitempty"`
	// Entries is the number of ILM entries carried with a resolved next
	// hop at the last sync.
	Entries int `json:"entries_resolved"`
	// VerifiedInstructions is the verifier's instruction count.
	VerifiedInstructions uint32 `json:"verified_instructions"`
	// Swapped, PoppedLabelled and PoppedIP count the frames the program
	// forwarded inside the kernel.
	Swapped        uint64 `json:"swapped"`
	PoppedLabelled uint64 `json:"popped_labelled"`
	PoppedIP       uint64 `json:"popped_ip"`
	// IPForwarded counts the IP packets the program forwarded per the
	// FIB inside the kernel; Pushed those of them it pushed labels on
	// (the LER role).
	IPForwarded uint64 `json:"ip_forwarded"`
	Pushed      uint64 `json:"pushed"`
	// FIBEntries is the number of FIB entries (and on-link hosts) carried
	// with a resolved next hop at the last sync.
	FIBEntries int `json:"fib_entries_resolved"`
	// FIBMapEntries is the number of entries in the program's FIB maps
	// (both families, markers included); FIBCapacity the most a family's
	// map holds.
	FIBMapEntries int `json:"fib_map_entries"`
	FIBCapacity   int `json:"fib_capacity"`
	// FIBNotCarried is the number of routes left to userspace because
	// their family is not carried (over FIBCapacity, or its map refused
	// an entry: FIBError says why): packets they route are passed up
	// (passed fib_not_carried), never forwarded by a shorter prefix.
	FIBNotCarried int    `json:"fib_routes_not_carried"`
	FIBError      string `json:"fib_error,omitempty"`
	// FIBSyncSeconds is how long the last sync that walked the FIB took;
	// FIBWalks counts those syncs (a new FIB, a next hop's MAC, a
	// connected host or an address changed: a sync that finds nothing
	// changed walks no route).
	FIBSyncSeconds float64 `json:"fib_sync_seconds"`
	FIBWalks       uint64  `json:"fib_walks"`
	// Passed counts the frames passed up to the userspace path, by reason
	// (the userspace drop reasons' names where they share one).
	Passed map[string]uint64 `json:"passed"`
}

// report returns the plane's report; nil when XDP is off.
func (x *xdpPlane) report() *XDPReport {
	if x == nil || x.prog == nil {
		return nil
	}
	r := &XDPReport{Skipped: x.skipped, VerifiedInstructions: x.prog.VerifiedInstructions(), Passed: map[string]uint64{}}
	for _, l := range x.prog.Links() {
		r.Links = append(r.Links, l.Name)
		if x.prog.EgressOK(l.Index) {
			r.EgressOK = append(r.EgressOK, l.Name)
		}
	}
	x.mu.Lock()
	r.Entries = x.resolved
	r.FIBEntries = x.fibState.Carried
	r.FIBMapEntries = x.fibState.Entries4 + x.fibState.Entries6
	r.FIBNotCarried = x.fibState.Dropped4 + x.fibState.Dropped6
	r.FIBError = x.fibErr
	r.FIBSyncSeconds = x.fibSync.Seconds()
	r.FIBWalks = x.fibWalks
	r.FIBCapacity = x.prog.FIBCapacity()
	x.mu.Unlock()
	c, err := x.prog.Counters()
	if err != nil {
		return r
	}
	for i, n := range c {
		switch reason := fxdp.Reason(i); reason {
		case fxdp.Swapped:
			r.Swapped = n
		case fxdp.PoppedLabelled:
			r.PoppedLabelled = n
		case fxdp.PoppedIP:
			r.PoppedIP = n
		case fxdp.IPForwarded:
			r.IPForwarded = n
		case fxdp.IPPushed:
			r.Pushed = n
		default:
			r.Passed[reason.String()] = n
		}
	}
	return r
}

// close detaches the program from every link (the interfaces are left as
// they were found) and frees it.
func (x *xdpPlane) close() error {
	if x == nil {
		return nil
	}
	x.watch.close()
	if x.prog == nil {
		return nil
	}
	close(x.stop)
	<-x.done
	x.unsubscribe()
	return errors.Join(x.prog.Close(), x.feats.Close())
}

// xdpCollector exports the XDP label switch's counters (when it runs) as
// mplsnode_xdp_* metrics.
type xdpCollector struct {
	n                             *Node
	forwarded, pushed, passed, ok *prometheus.Desc
	fibEntries, fibNotCarried     *prometheus.Desc
	fibSync                       *prometheus.Desc
}

func newXDPCollector(n *Node) *xdpCollector {
	name := func(s string) string { return prometheus.BuildFQName(metricsNamespace, "xdp", s) }
	return &xdpCollector{n: n,
		forwarded:     prometheus.NewDesc(name("forwarded_frames_total"), "Frames the XDP label switch forwarded inside the kernel, by action (swapped, popped_ip, popped_labelled, ip_forwarded).", []string{"action"}, nil),
		pushed:        prometheus.NewDesc(name("pushed_frames_total"), "IP packets the XDP label switch forwarded with a label stack pushed (LER; a part of forwarded_frames_total{action=\"ip_forwarded\"}).", nil, nil),
		passed:        prometheus.NewDesc(name("passed_frames_total"), "Frames the XDP label switch passed up to the userspace path, by reason.", []string{"reason"}, nil),
		ok:            prometheus.NewDesc(name("egress_ok"), "1 if the link runs the XDP label switch and takes redirected frames, 0 if it runs it but frames for it take the userspace path.", []string{"device"}, nil),
		fibEntries:    prometheus.NewDesc(name("fib_entries"), "Entries in the XDP label switch's FIB maps at the last sync: state=\"resolved\" the routes and on-link hosts it carries with a resolved next hop, state=\"all\" every entry, markers included.", []string{"state"}, nil),
		fibNotCarried: prometheus.NewDesc(name("fib_routes_not_carried"), "Routes the XDP label switch leaves to the userspace path because their family is not carried (over its FIB capacity, or its map refused an entry).", nil, nil),
		fibSync:       prometheus.NewDesc(name("fib_sync_seconds"), "How long the XDP label switch's last FIB sync that changed its maps took.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *xdpCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.forwarded
	ch <- c.pushed
	ch <- c.passed
	ch <- c.ok
	ch <- c.fibEntries
	ch <- c.fibNotCarried
	ch <- c.fibSync
}

// Collect implements prometheus.Collector.
func (c *xdpCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.n.xdp.report()
	if r == nil {
		return
	}
	for action, v := range map[string]uint64{"swapped": r.Swapped, "popped_ip": r.PoppedIP, "popped_labelled": r.PoppedLabelled, "ip_forwarded": r.IPForwarded} {
		ch <- prometheus.MustNewConstMetric(c.forwarded, prometheus.CounterValue, float64(v), action)
	}
	ch <- prometheus.MustNewConstMetric(c.pushed, prometheus.CounterValue, float64(r.Pushed))
	ch <- prometheus.MustNewConstMetric(c.fibEntries, prometheus.GaugeValue, float64(r.FIBEntries), "resolved")
	ch <- prometheus.MustNewConstMetric(c.fibEntries, prometheus.GaugeValue, float64(r.FIBMapEntries), "all")
	ch <- prometheus.MustNewConstMetric(c.fibNotCarried, prometheus.GaugeValue, float64(r.FIBNotCarried))
	ch <- prometheus.MustNewConstMetric(c.fibSync, prometheus.GaugeValue, r.FIBSyncSeconds)
	for reason, v := range r.Passed {
		ch <- prometheus.MustNewConstMetric(c.passed, prometheus.CounterValue, float64(v), reason)
	}
	for _, l := range r.Links {
		v := 0.0
		if slices.Contains(r.EgressOK, l) {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.ok, prometheus.GaugeValue, v, l)
	}
}
