package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/mplsnode/mplsnode/mpls"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gbgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// labelImplicitNull is the label that asks the previous hop to pop.
const labelImplicitNull = 3

// Speaker is a running BGP labeled unicast speaker. Its methods are safe
// for concurrent use.
type Speaker struct {
	cfg    Config
	log    *slog.Logger
	tables Tables
	srv    *server.BgpServer
	// stopSrv stops GoBGP once.
	stopSrv func()
	sp      *splice
	alias   map[netip.Addr]int // GoBGP's name for a neighbour -> index
	nhs     bool               // some neighbour takes re-advertisements

	qmu   sync.Mutex
	queue []event
	wake  chan struct{}
	done  chan struct{}
	stop  context.CancelFunc

	mu        sync.Mutex // guards everything below
	rib       map[netip.Prefix]*dest
	pool      *labelPool
	netLabels map[netip.Prefix]mpls.Label // labels bound to local networks
	peers     []peerState
	applyErrs uint64
	closed    bool
	// policies reports that the export policy and its sets exist.
	policies bool
	// refused counts and logs the routes not installed, by reason.
	refused refusals
}

// peerState is what the speaker tracks per neighbour.
type peerState struct {
	state string
	since time.Time
	// received counts routes held from the neighbour, per family (index
	// Family-1); installed counts those installed as best.
	received, installed [2]int
	// held are the prefixes the neighbour advertised that are treated as
	// withdrawn (an AS loop, a label stack): received, not accepted.
	held map[netip.Prefix]struct{}
}

// hold records whether prefix p, which the neighbour advertised or
// withdrew, is held treated as withdrawn.
func (ps *peerState) hold(p netip.Prefix, treatedAsWithdrawn bool) {
	switch {
	case treatedAsWithdrawn:
		if ps.held == nil {
			ps.held = map[netip.Prefix]struct{}{}
		}
		ps.held[p] = struct{}{}
	case ps.held != nil:
		delete(ps.held, p)
	}
}

// receivedCount is the routes of family f held from the neighbour, those
// treated as withdrawn included.
func (ps *peerState) receivedCount(f Family) int {
	n := ps.received[f-1]
	for p := range ps.held {
		if familyOf(p) == f {
			n++
		}
	}
	return n
}

// New starts a speaker: GoBGP, its sessions through tr, and the watch that
// writes received routes to tables. The local networks are bound and
// advertised at once.
func New(cfg Config, tables Tables, tr Transport, logger *slog.Logger) (*Speaker, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if !cfg.RouterID.Is4() {
		return nil, fmt.Errorf("bgp: router-id %s is not an IPv4 address", cfg.RouterID)
	}
	var port int
	if err := inProcessNamespace(func() (err error) {
		port, err = freeLoopbackPort()
		return err
	}); err != nil {
		return nil, err
	}
	s := newSpeaker(cfg, tables, logger)
	ctx := context.Background()
	if err := s.startServer(ctx, port); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			s.stopSrv()
		}
	}()
	s.sp = newSplice(tr, cfg.Neighbors, cfg.ListenPort, port, s, logger)
	if err := inProcessNamespace(s.sp.start); err != nil {
		s.sp.close()
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	if err := s.srv.WatchEvent(wctx, server.WatchEventMessageCallbacks{
		OnPathUpdate: s.onPaths,
		OnPeerUpdate: s.onPeer,
	}, server.WatchUpdate(true, "", ""), server.WatchPeer()); err != nil {
		cancel()
		s.sp.close()
		return nil, fmt.Errorf("bgp: watching GoBGP: %w", err)
	}
	go s.worker()
	if err := s.configure(ctx, port); err != nil {
		s.shutdown()
		return nil, err
	}
	ok = true
	logger.Info("bgp started", "as", cfg.AS, "router_id", cfg.RouterID.String(), "neighbors", len(cfg.Neighbors),
		"networks", len(cfg.Networks), "label_range", fmt.Sprintf("%d-%d", cfg.LabelLow, cfg.LabelHigh))
	return s, nil
}

// newSpeaker returns the speaker of cfg before anything runs: its tables,
// label pool, loopback aliases and idle neighbours.
func newSpeaker(cfg Config, tables Tables, logger *slog.Logger) *Speaker {
	s := &Speaker{
		cfg: cfg, log: logger, tables: tables,
		alias: map[netip.Addr]int{}, wake: make(chan struct{}, 1), done: make(chan struct{}),
		rib: map[netip.Prefix]*dest{}, pool: newLabelPool(cfg.LabelLow, cfg.LabelHigh),
		netLabels: map[netip.Prefix]mpls.Label{}, peers: make([]peerState, len(cfg.Neighbors)),
	}
	for i, n := range cfg.Neighbors {
		s.alias[loopbackAlias(i)] = i
		s.peers[i].state = "idle"
		if n.NextHopSelf {
			s.nhs = true
		}
	}
	return s
}

// startServer runs GoBGP, listening on the loopback port port, with its
// logs at warning and above going to s's logger; on an error GoBGP is
// stopped again.
func (s *Speaker) startServer(ctx context.Context, port int) error {
	// GoBGP's own logs are noisy at info; keep its warnings and errors.
	lvl := new(slog.LevelVar)
	lvl.Set(slog.LevelWarn)
	glog := slog.New(newAliasHandler(levelHandler{s.log.Handler(), lvl}, s.cfg.Neighbors)).With("component", "gobgp")
	s.srv = server.NewBgpServer(server.LoggerOption(glog, lvl))
	s.stopSrv = sync.OnceFunc(s.srv.Stop) // a second Stop would wait forever
	go s.srv.Serve()
	if err := s.srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: s.cfg.AS, RouterId: s.cfg.RouterID.String(),
		ListenPort: int32(port), ListenAddresses: []string{"127.0.0.1"},
	}}); err != nil {
		s.stopSrv()
		return fmt.Errorf("bgp: starting GoBGP: %w", err)
	}
	return nil
}

// configure gives the running GoBGP its export policies, the local
// networks and then the neighbours, which reach it on the loopback port
// port through the splice.
func (s *Speaker) configure(ctx context.Context, port int) error {
	if err := s.setupPolicies(ctx); err != nil {
		return err
	}
	if err := s.originate(); err != nil {
		return err
	}
	for i, n := range s.cfg.Neighbors {
		if err := s.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: s.peerConfig(i, n, port)}); err != nil {
			return fmt.Errorf("bgp: neighbor %s: %w", n.Address, err)
		}
	}
	return nil
}

// exportPolicy is the global export policy; GoBGP applies per-neighbour
// policies to route-server clients only, so each neighbour's statements
// match it by a neighbour set.
const exportPolicy = "mplsnode-export"

// Prefix sets of the local networks, per family.
const (
	networkSet4 = "mplsnode-networks-v4"
	networkSet6 = "mplsnode-networks-v6"
)

func familyOf(p netip.Prefix) Family {
	if p.Addr().Is4() {
		return IPv4LabeledUnicast
	}
	return IPv6LabeledUnicast
}

func rfOf(f Family) gbgp.Family {
	if f == IPv6LabeledUnicast {
		return gbgp.RF_IPv6_MPLS
	}
	return gbgp.RF_IPv4_MPLS
}

// originate binds the local networks' labels in the ILM and adds them to
// GoBGP's RIB.
func (s *Speaker) originate() error {
	nets := s.cfg.Networks
	s.cfg.Networks = nil
	return s.SetNetworks(nets)
}

// netLabel is the label a network is advertised with, binding one from
// the range (or the fixed one) in the ILM as pop-local.
func (s *Speaker) netLabel(nw Network, ch *Changes) (uint32, error) {
	switch nw.Mode {
	case LabelFromRange:
		l, err := s.pool.getFor(nw.Prefix)
		if err != nil {
			return 0, err
		}
		s.netLabels[nw.Prefix] = l
		ch.AddILM = append(ch.AddILM, mpls.ILMEntry{Label: l, Action: mpls.ILMPopLocal})
		return uint32(l), nil
	case LabelFixed:
		s.netLabels[nw.Prefix] = nw.Label
		ch.AddILM = append(ch.AddILM, mpls.ILMEntry{Label: nw.Label, Action: mpls.ILMPopLocal})
		return uint32(nw.Label), nil
	case LabelExplicitNull:
		if nw.Prefix.Addr().Is6() {
			return uint32(mpls.LabelIPv6ExplicitNull), nil
		}
		return uint32(mpls.LabelIPv4ExplicitNull), nil
	}
	return labelImplicitNull, nil
}

// SetNetworks replaces the networks the node originates: a network that
// goes is withdrawn and its label unbound; a new one is bound and
// advertised; one whose label mode changed is both. It logs what changed.
func (s *Speaker) SetNetworks(nets []Network) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	old := map[netip.Prefix]Network{}
	for _, nw := range s.cfg.Networks {
		old[nw.Prefix] = nw
	}
	keep := map[netip.Prefix]bool{}
	var ch Changes
	var adds, dels []*apiutil.Path
	var added, removed []string
	for _, nw := range nets {
		if o, ok := old[nw.Prefix]; ok && o == nw {
			keep[nw.Prefix] = true
		}
	}
	for _, o := range s.cfg.Networks {
		if keep[o.Prefix] {
			continue
		}
		if l, ok := s.netLabels[o.Prefix]; ok {
			if o.Mode == LabelFromRange {
				s.pool.release(o.Prefix, l)
			}
			delete(s.netLabels, o.Prefix)
			ch.DelILM = append(ch.DelILM, l) // Apply deletes before it adds
		}
		if !slices.ContainsFunc(nets, func(n Network) bool { return n.Prefix == o.Prefix }) {
			if p, err := localPath(o.Prefix, []uint32{0}, nil); err == nil {
				dels = append(dels, p)
			}
			removed = append(removed, o.Prefix.String())
		}
	}
	for _, nw := range nets {
		if keep[nw.Prefix] {
			continue
		}
		label, err := s.netLabel(nw, &ch)
		if err != nil {
			return fmt.Errorf("bgp: network %s: %w", nw.Prefix, err)
		}
		p, err := localPath(nw.Prefix, []uint32{label}, nil)
		if err != nil {
			return fmt.Errorf("bgp: network %s: %w", nw.Prefix, err)
		}
		adds = append(adds, p)
		added = append(added, fmt.Sprintf("%s label %d", nw.Prefix, label))
	}
	prev := s.cfg.Networks
	s.cfg.Networks = slices.Clone(nets)
	if err := s.tables.Apply(ch); err != nil {
		return fmt.Errorf("bgp: binding the networks' labels: %w", err)
	}
	if err := s.updateNetworkSets(prev); err != nil {
		return err
	}
	if len(dels) > 0 {
		if err := s.srv.DeletePath(apiutil.DeletePathRequest{Paths: dels}); err != nil {
			return fmt.Errorf("bgp: withdrawing networks: %w", err)
		}
	}
	if len(adds) > 0 {
		if _, err := s.srv.AddPath(apiutil.AddPathRequest{Paths: adds}); err != nil {
			return fmt.Errorf("bgp: advertising the networks: %w", err)
		}
	}
	const maxLogged = 20
	switch {
	case len(added)+len(removed) > maxLogged:
		s.log.Info("bgp networks", "advertised", len(added), "withdrawn", len(removed))
	case len(added)+len(removed) > 0:
		s.log.Info("bgp networks", "advertised", added, "withdrawn", removed)
	}
	return nil
}

// localPath builds a path the node originates; the next hop is left
// unspecified for the export policy to set per neighbour.
func localPath(p netip.Prefix, labels []uint32, asPath []uint32) (*apiutil.Path, error) {
	nlri, err := gbgp.NewLabeledIPAddrPrefix(p, *gbgp.NewMPLSLabelStack(labels...))
	if err != nil {
		return nil, err
	}
	f := familyOf(p)
	nh := netip.IPv4Unspecified()
	if f == IPv6LabeledUnicast {
		nh = netip.IPv6Unspecified()
	}
	mp, err := gbgp.NewPathAttributeMpReachNLRI(rfOf(f), []gbgp.PathNLRI{{NLRI: nlri}}, nh)
	if err != nil {
		return nil, err
	}
	attrs := []gbgp.PathAttributeInterface{gbgp.NewPathAttributeOrigin(gbgp.BGP_ORIGIN_ATTR_TYPE_IGP), mp}
	if len(asPath) > 0 {
		attrs = append(attrs, gbgp.NewPathAttributeAsPath([]gbgp.AsPathParamInterface{
			gbgp.NewAs4PathParam(gbgp.BGP_ASPATH_ATTR_TYPE_SEQ, slices.Clone(asPath)),
		}))
	}
	return &apiutil.Path{Family: rfOf(f), Nlri: nlri, Attrs: attrs}, nil
}

// onPeer queues a neighbour's session state change.
func (s *Speaker) onPeer(pe *apiutil.WatchEventMessage_PeerEvent, _ time.Time) {
	if pe.Type != apiutil.PEER_EVENT_STATE {
		return
	}
	i, ok := s.alias[pe.Peer.State.NeighborAddress]
	if !ok {
		return
	}
	st := pe.Peer.State.SessionState
	s.enqueue(event{peer: i, state: sessionState(st), down: st != gbgp.BGP_FSM_ESTABLISHED})
}

func sessionState(st gbgp.FSMState) string {
	switch st {
	case gbgp.BGP_FSM_IDLE:
		return "idle"
	case gbgp.BGP_FSM_CONNECT:
		return "connect"
	case gbgp.BGP_FSM_ACTIVE:
		return "active"
	case gbgp.BGP_FSM_OPENSENT:
		return "opensent"
	case gbgp.BGP_FSM_OPENCONFIRM:
		return "openconfirm"
	case gbgp.BGP_FSM_ESTABLISHED:
		return "established"
	}
	return "unknown"
}

// Large communities (RFC 8092) the node tags its re-advertised paths
// with, for the export policy's split horizon (RFC 4271 §9.2): AS:1:n
// says learned from neighbour n-1, AS:2:0 learned over iBGP. The export
// policy removes them: they never leave the node.
const (
	tagFromNeighbor = 1
	tagFromIBGP     = 2
)

// internal reports whether neighbour i is in the node's AS.
func (s *Speaker) internal(i int) bool {
	return i >= 0 && i < len(s.cfg.Neighbors) && s.cfg.Neighbors[i].RemoteAS == s.cfg.AS
}

// shutdown stops the watch, the worker, the splice and GoBGP.
func (s *Speaker) shutdown() {
	s.stop()
	s.stopSrv()
	s.sp.close()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	close(s.wake)
	<-s.done
}

// Close stops the speaker and removes every route and label it installed.
func (s *Speaker) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	s.shutdown()
	s.mu.Lock()
	defer s.mu.Unlock()
	var ch Changes
	for p, d := range s.rib {
		if d.installed != nil {
			ch.DelRoutes = append(ch.DelRoutes, p)
		}
		if d.local != 0 {
			ch.DelILM = append(ch.DelILM, d.local)
		}
	}
	for _, l := range s.netLabels {
		ch.DelILM = append(ch.DelILM, l)
	}
	s.rib = map[netip.Prefix]*dest{}
	return s.tables.Apply(ch)
}

// ErrClosed is returned by SetNetworks on a closed speaker.
var ErrClosed = errors.New("bgp: speaker closed")

// Reresolve recomputes every received route against the tables (after the
// node's static routes changed) and rewrites what differs.
func (s *Speaker) Reresolve() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	var ch Changes
	var adds, dels []*apiutil.Path
	for p := range s.rib {
		s.update(p, &ch, &adds, &dels)
	}
	s.apply(ch)
	if len(dels) > 0 {
		_ = s.srv.DeletePath(apiutil.DeletePathRequest{Paths: dels})
	}
	if len(adds) > 0 {
		_, _ = s.srv.AddPath(apiutil.AddPathRequest{Paths: adds})
	}
}
