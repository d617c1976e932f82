package bgp

import (
	"net/netip"

	"github.com/mplsnode/mplsnode/internal/enum"
	"github.com/mplsnode/mplsnode/internal/lograte"
)

// Reason says why a received route is not installed.
type Reason uint8

// Reasons a received route is not installed. The first group refuses a
// best path when it is computed (the route stays held and is tried again
// when the node's routes change); the second treats the received route
// as withdrawn (RFC 7606), it is not held at all.
const (
	// ReasonNone: installed (or nothing to install).
	ReasonNone Reason = iota
	// ReasonUnresolvedNextHop: no route to the next hop.
	ReasonUnresolvedNextHop
	// ReasonReservedLabel: a label of 0-15 that may not be pushed where it
	// stands (RFC 3032 §2.1): router alert 1, entropy label indicator 7,
	// an explicit null of the other family or not at the bottom, ...
	ReasonReservedLabel
	// ReasonInvalidLabel: a label past 2^20-1.
	ReasonInvalidLabel
	// ReasonNextHopFamily: an IPv4 prefix over an IPv6 next hop (6PE goes
	// the other way only).
	ReasonNextHopFamily
	// ReasonSixPEWithoutLabel: an IPv6 prefix over an IPv4 next hop with
	// no label to push (implicit null): IPv6 cannot cross the IPv4 path
	// unlabelled (RFC 4798 §3).
	ReasonSixPEWithoutLabel
	// ReasonNextHopInOwnRoute: the next hop lies inside the prefix and is
	// reached through a route other than the connected one.
	ReasonNextHopInOwnRoute
	// ReasonStackTooDeep: the transport and BGP labels together exceed
	// the labels the node pushes.
	ReasonStackTooDeep
	// ReasonTablesRefused: the forwarding tables refused the entry.
	ReasonTablesRefused
	// ReasonMultipleLabels: more than one label, and the Multiple Labels
	// capability (RFC 8277 §2.1) is not negotiated (GoBGP has none):
	// treated as withdrawn.
	ReasonMultipleLabels
	// ReasonASLoop: the AS path holds the node's own AS (RFC 4271
	// §9.1.2): treated as withdrawn.
	ReasonASLoop
	numReasons
)

var reasonNames = [numReasons]string{
	ReasonNone:              "none",
	ReasonUnresolvedNextHop: "unresolved_next_hop",
	ReasonReservedLabel:     "reserved_label",
	ReasonInvalidLabel:      "invalid_label",
	ReasonNextHopFamily:     "next_hop_family",
	ReasonSixPEWithoutLabel: "sixpe_without_label",
	ReasonNextHopInOwnRoute: "next_hop_in_own_route",
	ReasonStackTooDeep:      "label_stack_too_deep",
	ReasonTablesRefused:     "tables_refused",
	ReasonMultipleLabels:    "multiple_labels",
	ReasonASLoop:            "as_loop",
}

// String returns the reason's metric label value.
func (r Reason) String() string { return enum.Name(reasonNames[:], r) }

// Reasons lists every reason but ReasonNone, in order.
func Reasons() []Reason { return enum.Range(ReasonNone+1, numReasons) }

// refusals counts and logs refused routes: one count per route each time
// it becomes refused for a reason, one warning per reason per
// lograte.Interval (saying how many were held back).
type refusals struct {
	count [numReasons]uint64
	limit [numReasons]lograte.Limiter
}

// refuse records that route p from neighbour peer (its best path c) is
// not installed for reason r. The speaker's lock is held.
func (s *Speaker) refuse(p netip.Prefix, peer int, c cand, r Reason) {
	s.refused.count[r]++
	held, ok := s.refused.limit[r].Allow(1)
	if !ok {
		return
	}
	nb := ""
	if peer >= 0 && peer < len(s.cfg.Neighbors) {
		nb = s.cfg.Neighbors[peer].Address.String()
	}
	nh := ""
	if c.nh.IsValid() {
		nh = c.nh.String()
	}
	s.log.Warn("bgp: route not installed", "prefix", p.String(), "neighbor", nb, "next_hop", nh,
		"labels", c.labels, "reason", r.String(), "suppressed", held)
}

// Held reports whether r refuses a best path that stays held (and is
// tried again when the node's routes change), not a route treated as
// withdrawn.
func (r Reason) Held() bool { return r != ReasonNone && r < ReasonMultipleLabels }
