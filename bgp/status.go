package bgp

import (
	"context"
	"net/netip"
	"sort"
	"time"

	api "github.com/osrg/gobgp/v4/api"
)

// Neighbors returns each neighbour's state, in configuration order.
func (s *Speaker) Neighbors() []NeighborStatus {
	s.mu.Lock()
	out := make([]NeighborStatus, len(s.cfg.Neighbors))
	for i, n := range s.cfg.Neighbors {
		ps := s.peers[i]
		st := NeighborStatus{
			Address: n.Address.String(), RemoteAS: n.RemoteAS, State: ps.state,
			Local: n.Local.String(), NextHopSelf: n.NextHopSelf,
		}
		if !ps.since.IsZero() {
			st.Since = ps.since.UTC().Format(time.RFC3339)
		}
		for _, f := range families(n) {
			st.Families = append(st.Families, FamilyStatus{
				Family: f.String(), Received: ps.receivedCount(f), Accepted: ps.received[f-1], Installed: ps.installed[f-1],
			})
		}
		out[i] = st
	}
	s.mu.Unlock()
	// Advertised comes from GoBGP's own counters.
	_ = s.srv.ListPeer(context.Background(), &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
		a, err := netip.ParseAddr(p.GetConf().GetNeighborAddress())
		if err != nil {
			return
		}
		i, ok := s.alias[a]
		if !ok {
			return
		}
		for _, as := range p.GetAfiSafis() {
			st := as.GetState()
			if st == nil {
				continue
			}
			for j := range out[i].Families {
				if apiFamily(parseFamily(out[i].Families[j].Family)).String() == st.GetFamily().String() {
					out[i].Families[j].Advertised = int(st.GetAdvertised())
				}
			}
		}
		if t := p.GetState(); t != nil {
			// GoBGP says "invalid IP" before the OPEN arrives.
			if id, err := netip.ParseAddr(t.GetRouterId()); err == nil && !id.IsUnspecified() {
				out[i].RouterID = id.String()
			}
		}
	})
	return out
}

func parseFamily(s string) Family {
	if s == IPv6LabeledUnicast.String() {
		return IPv6LabeledUnicast
	}
	return IPv4LabeledUnicast
}

// NeighborStatus is one neighbour as `mplsnode bgp neighbor` shows it.
type NeighborStatus struct {
	Address     string         `json:"address"`
	RemoteAS    uint32         `json:"remote_as"`
	RouterID    string         `json:"router_id,omitempty"`
	Local       string         `json:"local"`
	State       string         `json:"state"`
	Since       string         `json:"since,omitempty"`
	NextHopSelf bool           `json:"next_hop_self,omitempty"`
	Families    []FamilyStatus `json:"families"`
}

// FamilyStatus counts one family's prefixes from a neighbour: received
// (held by the node, those treated as withdrawn included), accepted (held
// by the node: not treated as withdrawn for an AS loop or a label stack),
// installed (best and installable, written to the tables), advertised (to
// it, GoBGP's count).
type FamilyStatus struct {
	Family     string `json:"family"`
	Received   int    `json:"received"`
	Accepted   int    `json:"accepted"`
	Installed  int    `json:"installed"`
	Advertised int    `json:"advertised"`
}

// Summary is the speaker as `mplsnode bgp summary` shows it.
type Summary struct {
	AS         uint32 `json:"as"`
	RouterID   string `json:"router_id"`
	LabelLow   uint32 `json:"label_low"`
	LabelHigh  uint32 `json:"label_high"`
	LabelsUsed int    `json:"labels_used"`
	LabelsSize int    `json:"labels_size"`
	Routes     int    `json:"routes"`
	Installed  int    `json:"installed"`
	Unresolved int    `json:"unresolved"`
	// NotInstalled counts the best paths not installed now, by reason
	// (Reason.String).
	NotInstalled map[string]int `json:"not_installed,omitempty"`
	// Refused counts, by reason, each time a route was refused: a best
	// path became not installable, or a received route was treated as
	// withdrawn.
	Refused   map[string]uint64 `json:"refused,omitempty"`
	ApplyErrs uint64            `json:"apply_errors"`
	UnknownIn uint64            `json:"unknown_peer_connections"`
	// Unnegotiated counts UPDATEs that carried routes of a family their
	// session did not negotiate, which were ignored (RFC 4760 §7).
	Unnegotiated uint64           `json:"unnegotiated_family_updates"`
	Neighbors    []NeighborStatus `json:"neighbors"`
}

// Summary returns the speaker's state and counters.
func (s *Speaker) Summary() Summary {
	nb := s.Neighbors()
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := Summary{
		AS: s.cfg.AS, RouterID: s.cfg.RouterID.String(),
		LabelLow: uint32(s.cfg.LabelLow), LabelHigh: uint32(s.cfg.LabelHigh),
		LabelsUsed: s.pool.used, LabelsSize: s.pool.size(),
		Routes: len(s.rib), ApplyErrs: s.applyErrs, UnknownIn: s.sp.unknownPeer.Load(), Neighbors: nb,
		Unnegotiated: s.sp.unnegotiated.Load(),
	}
	for _, d := range s.rib {
		if d.installed != nil {
			sum.Installed++
		}
		if d.why != ReasonNone {
			if sum.NotInstalled == nil {
				sum.NotInstalled = map[string]int{}
			}
			sum.NotInstalled[d.why.String()]++
		}
		if d.why == ReasonUnresolvedNextHop {
			sum.Unresolved++
		}
	}
	for _, r := range Reasons() {
		if n := s.refused.count[r]; n > 0 {
			if sum.Refused == nil {
				sum.Refused = map[string]uint64{}
			}
			sum.Refused[r.String()] = n
		}
	}
	return sum
}

// RouteStatus is one prefix as `mplsnode bgp routes` shows it.
type RouteStatus struct {
	Prefix     string   `json:"prefix"`
	Neighbor   string   `json:"neighbor,omitempty"`
	NextHop    string   `json:"next_hop,omitempty"`
	Labels     []uint32 `json:"labels"`
	ASPath     []uint32 `json:"as_path,omitempty"`
	Installed  bool     `json:"installed"`
	Push       []uint32 `json:"push,omitempty"`
	Via        string   `json:"via,omitempty"`
	Dev        string   `json:"dev,omitempty"`
	LocalLabel uint32   `json:"local_label,omitempty"`
	Local      bool     `json:"local,omitempty"`
}

// Routes returns the received best paths and the local networks, sorted
// by prefix.
func (s *Speaker) Routes() []RouteStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]RouteStatus, 0, len(s.rib)+len(s.cfg.Networks))
	for _, nw := range s.cfg.Networks {
		r := RouteStatus{Prefix: nw.Prefix.String(), Local: true, Installed: true}
		switch nw.Mode {
		case LabelFromRange, LabelFixed:
			r.Labels = []uint32{uint32(s.netLabels[nw.Prefix])}
		case LabelExplicitNull:
			r.Labels = []uint32{0}
			if nw.Prefix.Addr().Is6() {
				r.Labels = []uint32{2}
			}
		case LabelImplicitNull:
			r.Labels = []uint32{labelImplicitNull}
		}
		out = append(out, r)
	}
	for p, d := range s.rib {
		b := d.best
		if b < 0 {
			b = bestOf(d.cands)
		}
		if b < 0 {
			continue
		}
		c := d.cands.at(b)
		r := RouteStatus{
			Prefix: p.String(), Neighbor: s.cfg.Neighbors[b].Address.String(), NextHop: c.nh.String(),
			Labels: c.labels, ASPath: c.asPath, Installed: d.installed != nil, LocalLabel: uint32(d.local),
		}
		if d.installed != nil {
			hop := &d.installed[0]
			for _, l := range hop.Labels {
				r.Push = append(r.Push, uint32(l))
			}
			r.Via = hop.Via.String()
			r.Dev = hop.Device
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := netip.MustParsePrefix(out[i].Prefix), netip.MustParsePrefix(out[j].Prefix)
		if a.Addr() != b.Addr() {
			return a.Addr().Less(b.Addr())
		}
		return a.Bits() < b.Bits()
	})
	return out
}
