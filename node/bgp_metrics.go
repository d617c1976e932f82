package node

import (
	"github.com/mplsnode/mplsnode/bgp"
	"github.com/prometheus/client_golang/prometheus"
)

// bgpCollector exports the BGP speaker's state at scrape time.
type bgpCollector struct {
	n                             *Node
	up, state, prefixes           *prometheus.Desc
	labelsUsed, labelsSize, unres *prometheus.Desc
	refused, notInstalled         *prometheus.Desc
	unnegotiated                  *prometheus.Desc
}

func newBGPCollector(n *Node) *bgpCollector {
	name := func(s string) string { return prometheus.BuildFQName(metricsNamespace, "bgp", s) }
	return &bgpCollector{
		n:     n,
		up:    prometheus.NewDesc(name("session_established"), "1 when the BGP session with the neighbour is established, else 0.", []string{"neighbor"}, nil),
		state: prometheus.NewDesc(name("session_state"), "The BGP session's FSM state (RFC 4271 §8.2.2): 1 idle, 2 connect, 3 active, 4 opensent, 5 openconfirm, 6 established.", []string{"neighbor"}, nil),
		prefixes: prometheus.NewDesc(name("prefixes"), "Prefixes per neighbour and family at each stage: received (held by the node from it, those treated as withdrawn included), accepted (held by the node: not treated as withdrawn), installed (best, installable, written to the tables), advertised (to it).",
			[]string{"neighbor", "family", "stage"}, nil),
		labelsUsed: prometheus.NewDesc(name("labels_used"), "Labels of the bgp label-range bound now.", nil, nil),
		labelsSize: prometheus.NewDesc(name("labels_size"), "Labels in the bgp label-range.", nil, nil),
		unres:      prometheus.NewDesc(name("unresolved_routes"), "Received best paths not installed because their next hop has no route.", nil, nil),
		refused: prometheus.NewDesc(name("routes_refused_total"), "Received routes refused, by reason: each time a best path became not installable, or a received route was treated as withdrawn.",
			[]string{"reason"}, nil),
		notInstalled: prometheus.NewDesc(name("routes_not_installed"), "Received best paths not installed now, by reason.", []string{"reason"}, nil),
		unnegotiated: prometheus.NewDesc(name("unnegotiated_family_updates_total"), "UPDATEs that carried routes of a family their session did not negotiate, ignored (RFC 4760 §7).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *bgpCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.state, c.prefixes, c.labelsUsed, c.labelsSize, c.unres, c.refused, c.notInstalled, c.unnegotiated} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *bgpCollector) Collect(ch chan<- prometheus.Metric) {
	sp := c.n.BGP()
	if sp == nil {
		return
	}
	s := sp.Summary()
	for _, nb := range s.Neighbors {
		up := 0.0
		if nb.State == "established" {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, nb.Address)
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, float64(fsmStates[nb.State]), nb.Address)
		for _, f := range nb.Families {
			for _, st := range []struct {
				stage string
				v     int
			}{{"received", f.Received}, {"accepted", f.Accepted}, {"installed", f.Installed}, {"advertised", f.Advertised}} {
				ch <- prometheus.MustNewConstMetric(c.prefixes, prometheus.GaugeValue, float64(st.v), nb.Address, f.Family, st.stage)
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(c.labelsUsed, prometheus.GaugeValue, float64(s.LabelsUsed))
	ch <- prometheus.MustNewConstMetric(c.labelsSize, prometheus.GaugeValue, float64(s.LabelsSize))
	ch <- prometheus.MustNewConstMetric(c.unres, prometheus.GaugeValue, float64(s.Unresolved))
	ch <- prometheus.MustNewConstMetric(c.unnegotiated, prometheus.CounterValue, float64(s.Unnegotiated))
	for _, r := range bgp.Reasons() {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(s.Refused[r.String()]), r.String())
		if r.Held() {
			ch <- prometheus.MustNewConstMetric(c.notInstalled, prometheus.GaugeValue, float64(s.NotInstalled[r.String()]), r.String())
		}
	}
}

// fsmStates numbers the session states as RFC 4271 lists them.
var fsmStates = map[string]int{"idle": 1, "connect": 2, "active": 3, "opensent": 4, "openconfirm": 5, "established": 6}
