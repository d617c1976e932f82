// Package planetest holds the test helpers that compare a node's
// forwarding-plane counters between modes (userspace switch and XDP
// program): one view of the counters that the same input must move the
// same way in both, their difference, and a bounded wait for them to move;
// the two modes themselves (Modes), what a mode put on the wire and
// counted (Result), and the comparison of the modes (CompareModes).
// It is for tests of node and cmd/mplsnode only.
package planetest

import (
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/node"
)

// Counts returns the forwarding plane's counters of r, the userspace
// switch's and the XDP program's summed: in XDP mode what the program
// carried shows in its counters, what it passed up in the switch's. Only
// counters that the same input must move the same way in both modes are
// kept (not queued or coalesced, which depend on timing), and only those
// that are not zero.
func Counts(r node.Report) map[string]uint64 {
	sw := r.LabelSwitch
	m := map[string]uint64{
		"swapped": sw.Swapped, "popped_ip": sw.PoppedIP, "popped_labelled": sw.PoppedLabelled,
		"icmp_sent": sw.ICMPSent, "icmp_via_lsp": sw.ICMPViaLSP, "fragmented": sw.Fragmented, "ip_forwarded": sw.IPForwarded, "pushed": sw.Pushed,
	}
	for k, v := range sw.Drops {
		m["drop "+k] = v
	}
	if x := r.XDP; x != nil {
		m["swapped"] += x.Swapped
		m["popped_ip"] += x.PoppedIP
		m["popped_labelled"] += x.PoppedLabelled
		m["ip_forwarded"] += x.IPForwarded
		m["pushed"] += x.Pushed
	}
	for k, v := range m {
		if v == 0 {
			delete(m, k)
		}
	}
	return m
}

// Delta returns after - before for every counter of after that moved.
func Delta(before, after map[string]uint64) map[string]uint64 {
	d := map[string]uint64{}
	for k, v := range after {
		if v != before[k] {
			d[k] = v - before[k]
		}
	}
	return d
}

// Settle polls report's plane counters until they have moved from before
// by at least want's values (or 10 s passed), waits a moment for
// stragglers and returns the delta.
func Settle(t *testing.T, report func() node.Report, before, want map[string]uint64) map[string]uint64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := Delta(before, Counts(report()))
		done := true
		for k, v := range want {
			done = done && d[k] >= v
		}
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	return Delta(before, Counts(report()))
}
