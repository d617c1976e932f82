package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
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

	// fwd says the node forwards IP (the program forwards to the
	// connected hosts it is given: their entries are kept fresh).
	fwd bool
	// mirror decides what the program's maps hold and keeps its FIB in
	// step (forward/xdp); nil without the program.
	mirror *fxdp.Mirror

	mu         sync.Mutex // serialises sync
	egressOK   map[int]bool
	resolved   int           // entries carried with a resolved next hop, last sync
	fibState   fxdp.FIBState // what the program's FIB held after the last sync
	fibSync    time.Duration // how long the last FIB sync that changed anything took
	fibWalks   uint64        // FIB syncs that walked the routes
	fibUpdates uint64        // FIB syncs that wrote only what changed
	fibErr     string        // the last FIB sync's error, "" if none

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
	fail := func(format string, args ...any) (*xdpPlane, error) {
		err := fmt.Errorf("set forward xdp "+mode.String()+": "+format, args...)
		if mode == config.XDPOn {
			return nil, err
		}
		logger.Warn("XDP label switch off", "reason", err.Error())
		return userspace(), nil
	}
	x, err := loadXDP(c, s, logger)
	if err != nil {
		return fail("%w", err)
	}
	if err := x.attach(mode, c.links); err != nil {
		x.free()
		return nil, err
	}
	if len(x.links) == 0 {
		x.free()
		if captured := slices.ContainsFunc(c.links, func(l stack.Link) bool { return l.Capture != nil }); captured {
			logger.Info("XDP label switch off: --pcap records the links it would run on")
			return userspace(), nil
		}
		return fail("no link took the program")
	}
	if dflt && !x.carries() {
		// The program could carry nothing: every frame would take the
		// userspace path after it, which costs bulk TCP on a veth more
		// than it saves. `set forward xdp auto` runs it anyway.
		x.free()
		logger.Info("XDP label switch off: no link takes redirected frames (a veth peer runs no NAPI: `ethtool -K PEER gro on`); set forward xdp auto runs it anyway")
		return userspace(), nil
	}
	x.begin(c)
	logger.Info("XDP label switch on", "links", len(x.links), "verified_instructions", x.prog.VerifiedInstructions())
	return x, nil
}

// loadXDP loads the program and opens the links' XDP features: the plane
// with no link attached yet.
func loadXDP(c *converted, s *stack.Stack, logger *slog.Logger) (*xdpPlane, error) {
	prog, err := fxdp.LoadFIB(c.ttl, xdpFIBCapacity)
	if err != nil {
		return nil, err
	}
	feats, err := fxdp.OpenFeatures()
	if err != nil {
		prog.Close()
		return nil, err
	}
	x := &xdpPlane{log: logger, s: s, prog: prog, feats: feats, links: map[string]fxdp.Link{}, skipped: map[string]string{},
		egressOK: map[int]bool{}, nics: map[string]tcpip.NICID{}, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		fwd: c.fwd}
	for id, info := range s.Netstack().NICInfo() {
		x.nics[info.Name] = id
	}
	return x, nil
}

// free closes the program and the features of a plane that does not run.
func (x *xdpPlane) free() {
	x.prog.Close()
	x.feats.Close()
}

// attach attaches the program to each AF_PACKET link that takes it; with
// mode on, a link that does not (unless --pcap records it) is an error.
func (x *xdpPlane) attach(mode config.XDPMode, links []stack.Link) error {
	for _, l := range links {
		fl, why := x.attachLink(l)
		if why != "" {
			if mode == config.XDPOn && l.Capture == nil {
				return fmt.Errorf("set forward xdp on: link %s: %s", l.Name, why)
			}
			x.skipped[l.Name] = why
			x.log.Warn("XDP label switch not on link", "link", l.Name, "reason", why)
			continue
		}
		x.links[l.Name] = fl
	}
	return nil
}

// attachLink attaches the program to link l, or says why it does not.
func (x *xdpPlane) attachLink(l stack.Link) (fxdp.Link, string) {
	if l.Kind != stack.LinkAFPacket {
		return fxdp.Link{}, "a " + l.Kind.String() + " link has no interface to attach to"
	}
	if l.Capture != nil {
		// Frames the program carries never reach userspace: a link
		// --pcap records takes the userspace path both ways (a link
		// without the program is no redirect target either), so that
		// the capture sees every frame.
		return fxdp.Link{}, "--pcap records it"
	}
	ifc, err := net.InterfaceByName(l.Name)
	if err != nil {
		return fxdp.Link{}, err.Error()
	}
	ep := x.s.Endpoint(l.Name)
	if ep == nil {
		return fxdp.Link{}, "no such link in the stack"
	}
	fl := fxdp.Link{Name: l.Name, Index: ifc.Index, MAC: net.HardwareAddr(ep.LinkAddress()),
		MTU: ep.LinkMTU(), Ingress: !l.RejectMPLS}
	if err := x.prog.Attach(fl); err != nil {
		return fxdp.Link{}, err.Error()
	}
	return fl, ""
}

// begin starts the plane on its attached links: the mirror, the
// neighbour watch, the FIB subscription, the first sync and the sync
// loop.
func (x *xdpPlane) begin(c *converted) {
	cfg := fxdp.MirrorConfig{Forward: c.fwd, Connected: connectedRoutes(c), Links: x.links}
	if c.ttl == mpls.TTLPipe {
		cfg.PipeTTL = mpls.PushTTL(c.ttl, 0, c.pipe)
	}
	x.mirror = fxdp.NewMirror(x.prog, cfg)
	x.watch = startNeighborWatch(x.s, c.links, x.log, x.kickNow)
	// Subscribed before the first sync: no FIB published from now on is
	// missed.
	x.fibChanged, x.unsubscribe = x.s.Tables().Subscribe()
	x.resolveFIBNextHops(xdpResolveWait)
	x.sync()
	go x.run()
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
	entries, x.resolved = x.mirror.ILMEntries(x.s.Tables().ILM().Entries(), mac)
	if err := x.prog.Sync(entries); err != nil {
		x.log.Warn("XDP label switch: map update", "err", err)
	}
	x.syncFIB(ns, macs)
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

// syncFIB brings the program's FIB up to date with the tables, the
// connected hosts and the node's addresses (fxdp.Mirror: only what
// changed is written); macs caches next hops' MACs for this sync.
func (x *xdpPlane) syncFIB(ns *gstack.Stack, macs map[neighbor.Key]net.HardwareAddr) {
	fib := x.s.Tables().FIB()
	in := fxdp.MirrorInput{FIB: fib, MAC: x.cachedNeighbor(ns, macs), Locals: forward.LocalAddrs(ns),
		Hosts: func(dev string, v6 bool) []fxdp.Host { return x.resolvedHosts(ns, dev, v6) }}
	start := time.Now()
	res, err := x.mirror.Sync(in)
	took := time.Since(start)
	if !res.Changed {
		return
	}
	if err != nil {
		x.log.Warn("XDP label switch: FIB map update", "err", err)
		x.fibErr = err.Error()
	} else {
		x.fibErr = ""
	}
	st := res.State
	if res.Walked {
		x.fibWalks++
	} else {
		x.fibUpdates++
	}
	x.logFIBFamilies(st)
	if st.Written+st.Deleted >= xdpFIBLogWrites {
		x.log.Info("XDP label switch: FIB mirrored", "routes", fib.Len(), "written", st.Written, "deleted", st.Deleted,
			"map_entries", st.Entries4+st.Entries6, "walked", res.Walked, "took", took.Round(time.Millisecond).String())
	}
	if res.Walked || st.Written+st.Deleted > 0 {
		x.fibSync = took
	}
	x.fibState = st
}

// logFIBFamilies logs a family that the program's FIB stops carrying, or
// carries again, with st.
func (x *xdpPlane) logFIBFamilies(st fxdp.FIBState) {
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
	for _, k := range x.mirror.NextHops(fib) {
		hops[k] = true
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

// resolvedHosts returns the neighbours of link dev (IPv6 or IPv4) whose
// MAC the stack's neighbour table knows.
func (x *xdpPlane) resolvedHosts(ns *gstack.Stack, dev string, v6 bool) []fxdp.Host {
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
	var out []fxdp.Host
	for _, n := range nbrs {
		a, ok := netip.AddrFromSlice(n.Addr.AsSlice())
		if !ok || !neighbor.Usable(n) {
			continue
		}
		if x.fwd {
			neighbor.ConfirmStale(ns, nic, proto, n) // the program forwards to it
		}
		out = append(out, fxdp.Host{Addr: a, MAC: net.HardwareAddr(n.LinkAddr)})
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
	// FIBSyncSeconds is how long the last FIB sync that changed anything
	// took. FIBWalks counts the syncs that walked the whole FIB (the
	// first, one after an error, a next hop's MAC changed, a family not
	// carried, a change of a large part of the table); FIBUpdates those
	// that wrote only the entries of what changed (a few routes, a
	// connected host, an address). A sync that finds nothing changed is
	// neither.
	FIBSyncSeconds float64 `json:"fib_sync_seconds"`
	FIBWalks       uint64  `json:"fib_walks"`
	FIBUpdates     uint64  `json:"fib_updates"`
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
	r.FIBUpdates = x.fibUpdates
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
