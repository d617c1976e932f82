package bgp

import (
	"context"
	"fmt"

	api "github.com/osrg/gobgp/v4/api"
)

// importPolicy keeps every received path out of GoBGP's RIB.
const importPolicy = "mplsnode-import"

// fromIBGPSetName is the large community set of paths learned over iBGP.
const fromIBGPSetName = "mplsnode-from-ibgp"

// fromNeighborSetName is the large community set of paths learned from
// neighbour i.
func fromNeighborSetName(i int) string { return fmt.Sprintf("mplsnode-from-neighbor-%d", i) }

// splitHorizon defines the sets the export policy's split horizon
// matches (the tags readvertisedPath puts on), and keeps received paths
// out of GoBGP's RIB.
//
// The node reads received paths before import policy (WatchUpdate) and
// decides itself what to install and re-advertise, as local paths. Were
// the received paths in GoBGP's RIB too, a local path for the same prefix
// would become best over the received one, and GoBGP would send the
// sender an explicit withdrawal of its own route (server.go,
// filterPathFromSourcePeer and the AS-loop case of filterpath: "old" is
// the received path, withdrawn towards every peer that cannot take the new
// best). With only local paths in the RIB there is no such "old" path.
func (s *Speaker) splitHorizon(ctx context.Context) error {
	for i := range s.cfg.Neighbors {
		if err := s.srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: &api.DefinedSet{
			DefinedType: api.DefinedType_DEFINED_TYPE_LARGE_COMMUNITY, Name: fromNeighborSetName(i),
			List: []string{fmt.Sprintf("%d:%d:%d", s.cfg.AS, tagFromNeighbor, i+1)},
		}}); err != nil {
			return fmt.Errorf("bgp: split-horizon set: %w", err)
		}
	}
	if err := s.srv.AddDefinedSet(ctx, &api.AddDefinedSetRequest{DefinedSet: &api.DefinedSet{
		DefinedType: api.DefinedType_DEFINED_TYPE_LARGE_COMMUNITY, Name: fromIBGPSetName,
		List: []string{fmt.Sprintf("%d:%d:0", s.cfg.AS, tagFromIBGP)},
	}}); err != nil {
		return fmt.Errorf("bgp: split-horizon set: %w", err)
	}
	// GoBGP applies the global import policy to the paths the node adds
	// too: those (route type local) pass.
	if err := s.srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{Name: importPolicy, Statements: []*api.Statement{{
		Name:       importPolicy + "-local",
		Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
		Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
	}, {
		Name: importPolicy + "-received", Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
	}}}}); err != nil {
		return fmt.Errorf("bgp: import policy: %w", err)
	}
	if err := s.srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name: "global", Direction: api.PolicyDirection_POLICY_DIRECTION_IMPORT,
		Policies: []*api.Policy{{Name: importPolicy}}, DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT,
	}}); err != nil {
		return fmt.Errorf("bgp: import policy assignment: %w", err)
	}
	return nil
}
