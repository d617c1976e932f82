package node

import (
	"strconv"

	"github.com/mplsnode/mplsnode/forward/labelstats"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/prometheus/client_golang/prometheus"
)

// LabelStats returns the packets and bytes per incoming label of the
// frames the node carried, by plane: userspace (the label switch's
// forwarded frames and the frames the links popped for the node) and xdp
// (the frames the XDP program forwarded; nil when XDP is off). A frame
// counts once, in the plane that carried it, under the label whose ILM
// entry decided it, its bytes from the label stack on as received
// (package labelstats). The counts outlive table changes: a label
// unbound keeps them, and they only grow.
func (n *Node) LabelStats() (user, xdp labelstats.Snapshot) {
	user = n.ls.LabelStats().AddTo(nil)
	for _, name := range n.stack.LinkNames() {
		if ep := n.stack.Endpoint(name); ep != nil {
			ep.LabelStats().AddTo(user)
		}
	}
	if n.xdp != nil && n.xdp.prog != nil {
		if s, err := n.xdp.prog.LabelStats(); err == nil {
			xdp = s
		} else {
			n.log.Warn("XDP label counters unreadable", "err", err)
		}
	}
	return user, xdp
}

// withLabelStats fills in the counters of each entry of es (LabelRoutes).
func (n *Node) withLabelStats(es []ILMEntry) {
	user, xdp := n.LabelStats()
	for i := range es {
		u, x := user[mpls.Label(es[i].Label)], xdp[mpls.Label(es[i].Label)]
		es[i].Packets, es[i].Bytes = u.Packets+x.Packets, u.Bytes+x.Bytes
		es[i].XDPPackets, es[i].XDPBytes = x.Packets, x.Bytes
	}
}

// labelCollector exports LabelStats as mplsnode_label_packets_total and
// mplsnode_label_bytes_total with the labels label (the incoming label)
// and plane (userspace or xdp): every label counted so far, and every
// label of the ILM (at 0 until its first frame).
type labelCollector struct {
	n              *Node
	packets, bytes *prometheus.Desc
}

func newLabelCollector(n *Node) prometheus.Collector {
	name := func(s string) string { return prometheus.BuildFQName(metricsNamespace, "", s) }
	return &labelCollector{n: n,
		packets: prometheus.NewDesc(name("label_packets_total"), "Labelled packets the node carried (forwarded, or popped for itself), by the incoming label that decided them and the plane that carried them.", []string{"label", "plane"}, nil),
		bytes:   prometheus.NewDesc(name("label_bytes_total"), "Bytes of those packets from the label stack on, as received, by incoming label and plane.", []string{"label", "plane"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *labelCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.packets
	ch <- c.bytes
}

// Collect implements prometheus.Collector.
func (c *labelCollector) Collect(ch chan<- prometheus.Metric) {
	user, xdp := c.n.LabelStats()
	for _, e := range c.n.stack.Tables().ILM().Entries() {
		if _, ok := user[e.Label]; !ok {
			user[e.Label] = labelstats.Count{}
		}
	}
	planes := []struct {
		name string
		s    labelstats.Snapshot
	}{{"userspace", user}, {"xdp", xdp}}
	for _, p := range planes {
		if p.s == nil {
			continue
		}
		for l, v := range p.s {
			ls := strconv.FormatUint(uint64(l), 10)
			ch <- prometheus.MustNewConstMetric(c.packets, prometheus.CounterValue, float64(v.Packets), ls, p.name)
			ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(v.Bytes), ls, p.name)
		}
	}
}
