package node

import "github.com/prometheus/client_golang/prometheus"

// lspPingCollector exports the MPLS echo responder's counters
// (LSPPingReport) at scrape time.
type lspPingCollector struct {
	n                        *Node
	requests, replies, drops *prometheus.Desc
}

func newLSPPingCollector(n *Node) prometheus.Collector {
	name := func(s string) string { return prometheus.BuildFQName(metricsNamespace, "", s) }
	return &lspPingCollector{n: n,
		requests: prometheus.NewDesc(name("lsp_ping_requests_total"), "MPLS echo requests (LSP ping, RFC 8029) the responder received, the reason being where the data plane stopped them (egress, ttl_expired, no_label_entry).", []string{"reason"}, nil),
		replies:  prometheus.NewDesc(name("lsp_ping_replies_total"), "MPLS echo replies the responder sent, the reason being the return code name.", []string{"reason"}, nil),
		drops:    prometheus.NewDesc(name("lsp_ping_drops_total"), "MPLS echo requests the responder did not answer, by reason.", []string{"reason"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *lspPingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.requests
	ch <- c.replies
	ch <- c.drops
}

// Collect implements prometheus.Collector.
func (c *lspPingCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.n.echo.report()
	for k, v := range r.Requests {
		ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(v), k)
	}
	for k, v := range r.Replies {
		ch <- prometheus.MustNewConstMetric(c.replies, prometheus.CounterValue, float64(v), k)
	}
	for k, v := range r.Drops {
		ch <- prometheus.MustNewConstMetric(c.drops, prometheus.CounterValue, float64(v), k)
	}
}
