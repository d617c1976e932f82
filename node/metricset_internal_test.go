package node

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// linkSets collects the collector's per-link metric sets for one link
// report, without a node.
type linkSets struct {
	c *collector
	l *LinkReport
}

func (s linkSets) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(s, ch) }

func (s linkSets) Collect(ch chan<- prometheus.Metric) {
	s.c.link.collect(ch, s.l, s.l.Name)
	s.c.linkMicros.collect(ch, s.l, s.l.Name)
	s.c.linkGauges.collect(ch, s.l, s.l.Name)
}

// TestMetricSetUnitsAndTypes: microsecond counters are exported in
// seconds, gauges as gauges, counters as counters, each with its device.
func TestMetricSetUnitsAndTypes(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(linkSets{NewCollector(nil).(*collector), &LinkReport{Name: "in0", BusyPollUS: 1_500_000, RXFragmentsHeld: 3, ILMHits: 7}})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		typ   string
		value float64
	}{
		"mplsnode_busy_poll_seconds_total": {"COUNTER", 1.5},
		"mplsnode_ilm_hits_total":          {"COUNTER", 7},
		"mplsnode_rx_fragments_held":       {"GAUGE", 3},
	}
	for _, mf := range mfs {
		w, ok := want[mf.GetName()]
		if !ok {
			continue
		}
		delete(want, mf.GetName())
		m := mf.GetMetric()
		if len(m) != 1 || len(m[0].GetLabel()) != 1 || m[0].GetLabel()[0].GetName() != "device" || m[0].GetLabel()[0].GetValue() != "in0" {
			t.Errorf("%s: got %v, want one sample with device=in0", mf.GetName(), m)
			continue
		}
		got := m[0].GetCounter().GetValue() + m[0].GetGauge().GetValue()
		if mf.GetType().String() != w.typ || got != w.value {
			t.Errorf("%s: got %s %v, want %s %v", mf.GetName(), mf.GetType(), got, w.typ, w.value)
		}
	}
	for name := range want {
		t.Errorf("got no %s", name)
	}
}
