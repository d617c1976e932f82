package bgp

import (
	"context"
	"fmt"
	"math"
	"slices"

	api "github.com/osrg/gobgp/v4/api"
)

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
//
// GoBGP's own AS-loop check takes up to 255 of the node's AS in a path,
// its largest limit: GoBGP drops a looped path before its watch, so the
// node, for the UPDATEs GoBGP reads, would hear neither of it nor of the
// path it replaces going (an implicit withdrawal). The node treats such a
// path as withdrawn itself (process), as it does those it reads; the
// import policy keeps it from GoBGP's RIB as any received path.
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
			AllowOwnAsn:     math.MaxUint8,
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

func neighborSetName(i int) string { return fmt.Sprintf("mplsnode-neighbor-%d", i) }

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
	sts, err := s.splitHorizonStatements(ctx)
	if err != nil {
		return err
	}
	sts = append(sts, s.exportStatements(sets)...)
	if err := s.installExportPolicy(ctx, sts); err != nil {
		return err
	}
	s.policies = true
	return nil
}

// splitHorizonStatements defines each neighbour's neighbour set and
// returns the statements that reject, before any export, the routes a
// neighbour must not get back.
func (s *Speaker) splitHorizonStatements(ctx context.Context) ([]*api.Statement, error) {
	var sts []*api.Statement
	for i := range s.cfg.Neighbors {
		if err := s.srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: &api.DefinedSet{
			DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: neighborSetName(i),
			List: []string{loopbackAlias(i).String() + "/32"},
		}}); err != nil {
			return nil, fmt.Errorf("bgp: neighbor set: %w", err)
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
	return sts, nil
}

// exportStatements returns the statements that accept local paths per
// neighbour and family (the node's networks, from the prefix sets sets,
// or every local path to a next-hop-self neighbour), setting the
// neighbour's next hop; a family without a next hop exports nothing.
func (s *Speaker) exportStatements(sets map[Family]*api.DefinedSet) []*api.Statement {
	var sts []*api.Statement
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
	return sts
}

// installExportPolicy adds the export policy of statements sts (one that
// rejects everything when there are none) and assigns it globally, with
// reject as the default.
func (s *Speaker) installExportPolicy(ctx context.Context, sts []*api.Statement) error {
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
