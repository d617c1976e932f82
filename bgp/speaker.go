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
}

// cand is one neighbour's path to a prefix.
type cand struct {
	labels []uint32
	nh     netip.Addr
	asPath []uint32
	family Family
	// origin is the ORIGIN attribute's value, kept on re-advertisement.
	origin uint8
}

// peerCand is the path neighbour peer sent.
type peerCand struct {
	peer int
	cand
}

// candSet is a prefix's paths, one a neighbour. A slice, not a map: a
// prefix has one path or a few, and a full table has a million prefixes
// (a one-entry map costs several times the path it holds).
type candSet []peerCand

// get returns neighbour peer's path.
func (cs candSet) get(peer int) (cand, bool) {
	for i := range cs {
		if cs[i].peer == peer {
			return cs[i].cand, true
		}
	}
	return cand{}, false
}

// at returns neighbour peer's path, the zero cand if it sent none.
func (cs candSet) at(peer int) cand {
	c, _ := cs.get(peer)
	return c
}

// set sets neighbour peer's path.
func (cs *candSet) set(peer int, c cand) {
	for i := range *cs {
		if (*cs)[i].peer == peer {
			(*cs)[i].cand = c
			return
		}
	}
	*cs = append(*cs, peerCand{peer: peer, cand: c})
}

// del removes neighbour peer's path and reports whether it had one.
func (cs *candSet) del(peer int) bool {
	for i := range *cs {
		if (*cs)[i].peer == peer {
			*cs = slices.Delete(*cs, i, i+1)
			if len(*cs) == 0 {
				*cs = nil // the array goes with the last path
			}
			return true
		}
	}
	return false
}

// dest is a prefix the speaker heard of.
type dest struct {
	cands candSet
	// best is the neighbour whose path is installed, -1 for none.
	best int
	// installed is the route written to the tables, nil for none.
	installed *mpls.FTNEntry
	// local is the label bound for re-advertisement, 0 for none.
	local mpls.Label
	// why says why the best path is not installed (ReasonNone when it
	// is, or when there is none).
	why Reason
	// adv is the local path last handed to GoBGP for re-advertisement
	// (label 0: none).
	adv advert
}

// advert is what a re-advertised path says: the local label, the
// neighbour it was learned from (whom split horizon keeps it from), and
// the received ORIGIN and AS path.
type advert struct {
	label  mpls.Label
	from   int
	origin uint8
	asPath []uint32
}

func (a advert) same(b advert) bool {
	return a.label == b.label && a.from == b.from && a.origin == b.origin && slices.Equal(a.asPath, b.asPath)
}

// event is a path or a neighbour state change, in GoBGP's order.
type event struct {
	peer     int
	down     bool // the session left Established
	state    string
	withdraw bool
	prefix   netip.Prefix
	cand     cand
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
	// GoBGP's own logs are noisy at info; keep its warnings and errors.
	lvl := new(slog.LevelVar)
	lvl.Set(slog.LevelWarn)
	glog := slog.New(newAliasHandler(levelHandler{logger.Handler(), lvl}, cfg.Neighbors)).With("component", "gobgp")
	s.srv = server.NewBgpServer(server.LoggerOption(glog, lvl))
	s.stopSrv = sync.OnceFunc(s.srv.Stop) // a second Stop would wait forever
	go s.srv.Serve()
	ok := false
	defer func() {
		if !ok {
			s.stopSrv()
		}
	}()
	ctx := context.Background()
	if err := s.srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: cfg.AS, RouterId: cfg.RouterID.String(),
		ListenPort: int32(port), ListenAddresses: []string{"127.0.0.1"},
	}}); err != nil {
		return nil, fmt.Errorf("bgp: starting GoBGP: %w", err)
	}
	s.sp = newSplice(tr, cfg.Neighbors, cfg.ListenPort, port, logger)
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
	if err := s.setupPolicies(ctx); err != nil {
		s.shutdown()
		return nil, err
	}
	if err := s.originate(); err != nil {
		s.shutdown()
		return nil, err
	}
	for i, n := range cfg.Neighbors {
		if err := s.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: s.peerConfig(i, n, port)}); err != nil {
			s.shutdown()
			return nil, fmt.Errorf("bgp: neighbor %s: %w", n.Address, err)
		}
	}
	ok = true
	logger.Info("bgp started", "as", cfg.AS, "router_id", cfg.RouterID.String(), "neighbors", len(cfg.Neighbors),
		"networks", len(cfg.Networks), "label_range", fmt.Sprintf("%d-%d", cfg.LabelLow, cfg.LabelHigh))
	return s, nil
}

func apiFamily(f Family) *api.Family {
	if f == IPv6LabeledUnicast {
		return &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_MPLS_LABEL}
	}
	return &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_MPLS_LABEL}
}

func families(n Neighbor) []Family {
	if len(n.Families) == 0 {
		return []Family{IPv4LabeledUnicast, IPv6LabeledUnicast}
	}
	return n.Families
}

// peerConfig is GoBGP's neighbour i: known by its loopback alias, reached
// on the splice's port.
func (s *Speaker) peerConfig(i int, n Neighbor, port int) *api.Peer {
	hold := uint64(n.HoldTime)
	if hold == 0 {
		hold = 90
	}
	p := &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: loopbackAlias(i).String(),
			PeerAsn:         n.RemoteAS,
			Description:     n.Address.String(),
		},
		Transport: &api.Transport{RemotePort: uint32(port)},
		Timers: &api.Timers{Config: &api.TimersConfig{
			ConnectRetry: 5, HoldTime: hold, KeepaliveInterval: max(hold/3, 1),
			IdleHoldTimeAfterReset: 1,
		}},
	}
	for _, f := range families(n) {
		p.AfiSafis = append(p.AfiSafis, &api.AfiSafi{Config: &api.AfiSafiConfig{Family: apiFamily(f), Enabled: true}})
	}
	return p
}

// exportPolicy is the global export policy; GoBGP applies per-neighbour
// policies to route-server clients only, so each neighbour's statements
// match it by a neighbour set.
const exportPolicy = "mplsnode-export"

func neighborSetName(i int) string { return fmt.Sprintf("mplsnode-neighbor-%d", i) }

// Prefix sets of the local networks, per family.
const (
	networkSet4 = "mplsnode-networks-v4"
	networkSet6 = "mplsnode-networks-v6"
)

// setupPolicies defines each neighbour's export policy. GoBGP would pass
// received routes on with the label their sender bound, which this node
// does not switch, so only local paths are exported (route type local):
// the node's networks to every neighbour, and, to next-hop-self
// neighbours, the re-advertised routes too. Every exported path gets the
// node's address on the neighbour's link as next hop (GoBGP's own choice
// would be the loopback end of the splice).
func (s *Speaker) setupPolicies(ctx context.Context) error {
	sets := networkSets(s.cfg.Networks)
	for _, f := range []Family{IPv4LabeledUnicast, IPv6LabeledUnicast} {
		if err := s.srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: sets[f]}); err != nil {
			return fmt.Errorf("bgp: prefix set: %w", err)
		}
	}
	if err := s.splitHorizon(ctx); err != nil {
		return err
	}
	var sts []*api.Statement
	for i := range s.cfg.Neighbors {
		if err := s.srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: &api.DefinedSet{
			DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: neighborSetName(i),
			List: []string{loopbackAlias(i).String() + "/32"},
		}}); err != nil {
			return fmt.Errorf("bgp: neighbor set: %w", err)
		}
		// Split horizon first: a route goes back neither to the
		// neighbour it came from nor, when that one is internal, to
		// another internal neighbour (no route reflection).
		sts = append(sts, &api.Statement{
			Name: fmt.Sprintf("%s-%d-split-horizon", exportPolicy, i),
			Conditions: &api.Conditions{
				NeighborSet:       &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: neighborSetName(i)},
				LargeCommunitySet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: fromNeighborSetName(i)},
			},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
		})
		if s.internal(i) {
			sts = append(sts, &api.Statement{
				Name: fmt.Sprintf("%s-%d-ibgp", exportPolicy, i),
				Conditions: &api.Conditions{
					NeighborSet:       &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: neighborSetName(i)},
					LargeCommunitySet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: fromIBGPSetName},
				},
				Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
			})
		}
	}
	for i, n := range s.cfg.Neighbors {
		for _, f := range families(n) {
			nh := n.NextHop4
			if f == IPv6LabeledUnicast {
				nh = n.NextHop6
			}
			if !nh.IsValid() {
				continue
			}
			cond := &api.Conditions{
				NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: neighborSetName(i)},
				RouteType:   api.Conditions_ROUTE_TYPE_LOCAL,
				AfiSafiIn:   []*api.Family{apiFamily(f)},
			}
			if !n.NextHopSelf {
				cond.PrefixSet = &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: sets[f].Name}
			}
			sts = append(sts, &api.Statement{
				Name:       fmt.Sprintf("%s-%d-%s", exportPolicy, i, f),
				Conditions: cond,
				Actions: &api.Actions{
					RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT,
					Nexthop:     &api.NexthopAction{Address: nh.String()},
					// The split-horizon tags stay inside the node.
					LargeCommunity: &api.CommunityAction{Type: api.CommunityAction_TYPE_REPLACE},
				},
			})
		}
	}
	if len(sts) == 0 {
		// A policy needs a statement; this one rejects everything.
		sts = []*api.Statement{{Name: exportPolicy + "-none", Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT}}}
	}
	if err := s.srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{Name: exportPolicy, Statements: sts}}); err != nil {
		return fmt.Errorf("bgp: export policy: %w", err)
	}
	if err := s.srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name: "global", Direction: api.PolicyDirection_POLICY_DIRECTION_EXPORT,
		Policies: []*api.Policy{{Name: exportPolicy}}, DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT,
	}}); err != nil {
		return fmt.Errorf("bgp: export policy assignment: %w", err)
	}
	s.policies = true
	return nil
}

// networkSets returns the prefix sets of networks, exact matches, per
// family. GoBGP keeps one family per set; an empty set matches nothing.
func networkSets(networks []Network) map[Family]*api.DefinedSet {
	sets := map[Family]*api.DefinedSet{
		IPv4LabeledUnicast: {DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: networkSet4},
		IPv6LabeledUnicast: {DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: networkSet6},
	}
	for _, nw := range networks {
		f := familyOf(nw.Prefix)
		b := uint32(nw.Prefix.Bits())
		sets[f].Prefixes = append(sets[f].Prefixes, &api.Prefix{IpPrefix: nw.Prefix.String(), MaskLengthMin: b, MaskLengthMax: b})
	}
	return sets
}

// updateNetworkSets brings the prefix sets from the networks of old to
// the current ones (before the policies exist, at start, it does nothing).
func (s *Speaker) updateNetworkSets(old []Network) error {
	if !s.policies {
		return nil
	}
	ctx := context.Background()
	was, now := networkSets(old), networkSets(s.cfg.Networks)
	for f, set := range now {
		gone := &api.DefinedSet{DefinedType: set.DefinedType, Name: set.Name}
		for _, p := range was[f].Prefixes {
			if !slices.ContainsFunc(set.Prefixes, func(q *api.Prefix) bool { return q.IpPrefix == p.IpPrefix }) {
				gone.Prefixes = append(gone.Prefixes, p)
			}
		}
		if len(gone.Prefixes) > 0 {
			if err := s.srv.DeleteDefinedSet(ctx, &api.DeleteDefinedSetRequest{DefinedSet: gone}); err != nil {
				return fmt.Errorf("bgp: prefix set %s: %w", set.Name, err)
			}
		}
		if len(set.Prefixes) > 0 {
			if err := s.srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: set}); err != nil {
				return fmt.Errorf("bgp: prefix set %s: %w", set.Name, err)
			}
		}
	}
	return nil
}

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

// onPaths queues the paths GoBGP received (before policy: the node applies
// none on import).
func (s *Speaker) onPaths(paths []*apiutil.Path, _ time.Time) {
	evs := make([]event, 0, len(paths))
	for _, p := range paths {
		i, ok := s.alias[p.PeerAddress]
		if !ok {
			continue
		}
		ev, ok := pathEvent(i, p)
		if !ok {
			continue
		}
		evs = append(evs, ev)
	}
	s.enqueue(evs...)
}

// pathEvent reads what the node needs from a received path.
func pathEvent(peer int, p *apiutil.Path) (event, bool) {
	var pfx netip.Prefix
	var labels []uint32
	switch n := p.Nlri.(type) {
	case *gbgp.LabeledIPAddrPrefix:
		pfx = n.Prefix
		labels = slices.Clone(n.Labels.Labels)
	default:
		return event{}, false
	}
	ev := event{peer: peer, prefix: pfx.Masked(), withdraw: p.Withdrawal}
	ev.cand.labels = labels
	ev.cand.family = familyOf(pfx)
	for _, a := range p.Attrs {
		switch a := a.(type) {
		case *gbgp.PathAttributeMpReachNLRI:
			ev.cand.nh = a.Nexthop.Unmap()
		case *gbgp.PathAttributeNextHop:
			if !ev.cand.nh.IsValid() {
				ev.cand.nh = a.Value.Unmap()
			}
		case *gbgp.PathAttributeAsPath:
			for _, seg := range a.Value {
				ev.cand.asPath = append(ev.cand.asPath, seg.GetAS()...)
			}
		case *gbgp.PathAttributeOrigin:
			ev.cand.origin = a.Value
		}
	}
	return ev, true
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

func (s *Speaker) enqueue(evs ...event) {
	if len(evs) == 0 {
		return
	}
	s.qmu.Lock()
	s.queue = append(s.queue, evs...)
	s.qmu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// worker applies queued events in batches: all that arrived while the
// previous batch was being written go in one Apply.
func (s *Speaker) worker() {
	defer close(s.done)
	for range s.wake {
		s.qmu.Lock()
		evs := s.queue
		s.queue = nil
		s.qmu.Unlock()
		if evs == nil {
			continue
		}
		s.process(evs)
	}
}

// process updates the RIB with evs and writes the differences.
func (s *Speaker) process(evs []event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	dirty := map[netip.Prefix]bool{}
	for _, ev := range evs {
		if ev.state != "" {
			ps := &s.peers[ev.peer]
			if ps.state != ev.state {
				ps.state, ps.since = ev.state, time.Now()
				s.log.Info("bgp neighbor", "neighbor", s.cfg.Neighbors[ev.peer].Address.String(), "state", ev.state)
			}
			if ev.down {
				for p, d := range s.rib {
					if d.cands.del(ev.peer) {
						dirty[p] = true
					}
				}
				ps.received = [2]int{}
			}
			continue
		}
		if !ev.withdraw {
			switch {
			case slices.Contains(ev.cand.asPath, s.cfg.AS):
				// Our own AS: a loop (RFC 4271 §9.1.2).
				ev.withdraw = true
				s.refuse(ev.prefix, ev.peer, ev.cand, ReasonASLoop)
			case len(ev.cand.labels) > 1:
				// A label stack needs the Multiple Labels capability
				// (RFC 8277 §2.1), which GoBGP cannot negotiate:
				// treat-as-withdraw (RFC 7606 §2).
				ev.withdraw = true
				s.refuse(ev.prefix, ev.peer, ev.cand, ReasonMultipleLabels)
			}
		}
		d := s.rib[ev.prefix]
		if d == nil {
			if ev.withdraw {
				continue
			}
			d = &dest{best: -1}
			s.rib[ev.prefix] = d
		}
		_, had := d.cands.get(ev.peer)
		fi := ev.cand.family - 1
		if ev.withdraw {
			if had {
				d.cands.del(ev.peer)
				s.peers[ev.peer].received[fi]--
			}
		} else {
			if !had {
				s.peers[ev.peer].received[fi]++
			}
			d.cands.set(ev.peer, ev.cand)
		}
		dirty[ev.prefix] = true
	}
	var ch Changes
	var adds, dels []*apiutil.Path
	for p := range dirty {
		s.update(p, &ch, &adds, &dels)
	}
	s.apply(ch)
	if len(dels) > 0 {
		if err := s.srv.DeletePath(apiutil.DeletePathRequest{Paths: dels}); err != nil {
			s.log.Warn("bgp: withdrawing re-advertised routes", "err", err)
		}
	}
	if len(adds) > 0 {
		if _, err := s.srv.AddPath(apiutil.AddPathRequest{Paths: adds}); err != nil {
			s.log.Warn("bgp: re-advertising routes", "err", err)
		}
	}
}

// apply writes ch. When the tables refuse the batch (they keep what they
// had), the routes are tried one by one and those refused are recorded as
// not installed, so that what the speaker believes installed is what is.
func (s *Speaker) apply(ch Changes) {
	err := s.tables.Apply(ch)
	if err == nil {
		return
	}
	s.applyErrs++
	s.log.Error("bgp: writing routes; trying them one by one", "err", err)
	rest := ch
	rest.AddRoutes = nil
	if err := s.tables.Apply(rest); err != nil {
		s.log.Error("bgp: writing label bindings and deletions", "err", err)
	}
	for _, e := range ch.AddRoutes {
		if err := s.tables.Apply(Changes{AddRoutes: []mpls.FTNEntry{e}}); err != nil {
			s.applyErrs++
			s.log.Warn("bgp: route refused by the tables", "prefix", e.Prefix.String(), "err", err)
			if d := s.rib[e.Prefix]; d != nil && d.installed != nil {
				if d.best >= 0 {
					s.peers[d.best].installed[familyOf(e.Prefix)-1]--
					s.refuse(e.Prefix, d.best, d.cands.at(d.best), ReasonTablesRefused)
				}
				d.installed = nil
				d.why = ReasonTablesRefused
			}
		}
	}
}

// bestOf picks the path to install: shortest AS path, then the neighbour
// configured first.
func bestOf(cands candSet) int {
	best, at := -1, -1
	for j, c := range cands {
		if best < 0 || len(c.asPath) < len(cands[at].asPath) ||
			len(c.asPath) == len(cands[at].asPath) && c.peer < best {
			best, at = c.peer, j
		}
	}
	return best
}

// update recomputes prefix p and records the table and RIB edits.
func (s *Speaker) update(p netip.Prefix, ch *Changes, adds, dels *[]*apiutil.Path) {
	d := s.rib[p]
	best := bestOf(d.cands)
	var want *mpls.FTNEntry
	var c cand
	why := ReasonNone
	if best >= 0 {
		c = d.cands.at(best)
		want, why = s.route(p, c)
	}
	if why != ReasonNone && why != d.why {
		s.refuse(p, best, c, why)
	}
	d.why = why
	if d.best >= 0 && d.installed != nil {
		s.peers[d.best].installed[familyOf(p)-1]--
	}
	if want == nil {
		if d.installed != nil {
			ch.DelRoutes = append(ch.DelRoutes, p)
		}
	} else if d.installed == nil || !sameEntry(*d.installed, *want) {
		ch.AddRoutes = append(ch.AddRoutes, *want)
	}
	d.installed = want
	d.best = best
	if want != nil {
		s.peers[best].installed[familyOf(p)-1]++
	}
	if s.nhs {
		s.readvertise(p, d, c, ch, adds, dels)
	}
	if len(d.cands) == 0 && d.local == 0 {
		delete(s.rib, p)
	}
}

// route is the FTN entry for c, or nil and the reason it cannot be
// installed.
func (s *Speaker) route(p netip.Prefix, c cand) (*mpls.FTNEntry, Reason) {
	if !c.nh.IsValid() {
		return nil, ReasonUnresolvedNextHop
	}
	// An IPv6 prefix over an IPv4 next hop (received as ::ffff:a.b.c.d)
	// is 6PE (RFC 4798): the IPv6 packets cross the IPv4 path under the
	// received label. The other way round needs the extended next hop
	// capability (RFC 8950), which the node does not negotiate.
	sixPE := c.nh.Is4() && p.Addr().Is6()
	if c.nh.Is6() && p.Addr().Is4() {
		return nil, ReasonNextHopFamily
	}
	res, ok := s.tables.Resolve(c.nh)
	if !ok {
		return nil, ReasonUnresolvedNextHop
	}
	if p.Contains(c.nh) && (res.Via != c.nh || len(res.Labels) > 0) {
		return nil, ReasonNextHopInOwnRoute // only a connected next hop may lie inside its own route
	}
	e := &mpls.FTNEntry{Prefix: p, NextHop: res.Via, Device: res.Device}
	e.Labels = slices.Clone(res.Labels)
	for i, l := range c.labels {
		bottom := i == len(c.labels)-1
		switch {
		case l == labelImplicitNull:
			continue // pop: nothing to push
		case l == uint32(mpls.LabelIPv4ExplicitNull) && bottom && p.Addr().Is4(),
			l == uint32(mpls.LabelIPv6ExplicitNull) && bottom && p.Addr().Is6():
		case !mpls.Label(l).Valid():
			return nil, ReasonInvalidLabel
		case mpls.Label(l).IsReserved():
			return nil, ReasonReservedLabel // a reserved label no one may push here (RFC 3032 §2.1)
		}
		e.Labels = append(e.Labels, mpls.Label(l))
	}
	switch {
	case sixPE && len(e.Labels) == len(res.Labels):
		// Implicit null: the egress would get IPv6 over its IPv4 link.
		return nil, ReasonSixPEWithoutLabel
	case res.Via.Is4() != p.Addr().Is4() && len(e.Labels) == 0:
		// Only a labelled route may cross families.
		if p.Addr().Is6() {
			return nil, ReasonSixPEWithoutLabel
		}
		return nil, ReasonNextHopFamily
	case len(e.Labels) > mpls.DefaultMaxDepth:
		return nil, ReasonStackTooDeep
	}
	return e, ReasonNone
}

func sameEntry(a, b mpls.FTNEntry) bool {
	return a.Prefix == b.Prefix && a.NextHop == b.NextHop && a.Device == b.Device && slices.Equal(a.Labels, b.Labels)
}

// readvertise keeps p's local label, its ILM swap and its local path in
// step with the installed route.
func (s *Speaker) readvertise(p netip.Prefix, d *dest, c cand, ch *Changes, adds, dels *[]*apiutil.Path) {
	if d.installed == nil {
		if d.local != 0 {
			ch.DelILM = append(ch.DelILM, d.local)
			s.pool.release(p, d.local) // held for p, should it come back
			d.local = 0
			if d.adv.label != 0 {
				if lp, err := localPath(p, []uint32{0}, nil); err == nil {
					*dels = append(*dels, lp)
				}
			}
			d.adv = advert{}
		}
		return
	}
	if d.local == 0 {
		l, err := s.pool.getFor(p)
		if err != nil {
			s.log.Warn("bgp: no label left to re-advertise", "prefix", p.String(), "err", err)
			return
		}
		d.local = l
	}
	e := mpls.ILMEntry{Label: d.local, NextHop: d.installed.NextHop, Device: d.installed.Device, Action: mpls.ILMPopForward}
	if len(d.installed.Labels) > 0 {
		e.Action = mpls.ILMSwap
		e.OutLabels = slices.Clone(d.installed.Labels)
	}
	ch.AddILM = append(ch.AddILM, e)
	a := advert{label: d.local, from: d.best, origin: c.origin, asPath: c.asPath}
	if d.adv.same(a) {
		return // GoBGP has it: a second AddPath would send it again
	}
	if lp, err := s.readvertisedPath(p, a); err == nil {
		*adds = append(*adds, lp)
		d.adv = a
	}
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

// readvertisedPath is the local path that re-advertises a: the node's
// label, the received ORIGIN and AS path, and the split-horizon tags.
func (s *Speaker) readvertisedPath(p netip.Prefix, a advert) (*apiutil.Path, error) {
	lp, err := localPath(p, []uint32{uint32(a.label)}, a.asPath)
	if err != nil {
		return nil, err
	}
	for i, at := range lp.Attrs {
		if _, ok := at.(*gbgp.PathAttributeOrigin); ok {
			lp.Attrs[i] = gbgp.NewPathAttributeOrigin(a.origin)
		}
	}
	tags := []*gbgp.LargeCommunity{gbgp.NewLargeCommunity(s.cfg.AS, tagFromNeighbor, uint32(a.from+1))}
	if s.internal(a.from) {
		tags = append(tags, gbgp.NewLargeCommunity(s.cfg.AS, tagFromIBGP, 0))
	}
	lp.Attrs = append(lp.Attrs, gbgp.NewPathAttributeLargeCommunities(tags))
	return lp, nil
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
