package bench

import (
	"fmt"
	"sort"
)

// Median returns the median of v (the mean of the middle two for an even
// count) and false when v is empty. v is not modified.
func Median(v []float64) (float64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2], true
	}
	return (s[n/2-1] + s[n/2]) / 2, true
}

// MinMax returns the smallest and largest value of v, and false when v is
// empty.
func MinMax(v []float64) (lo, hi float64, ok bool) {
	if len(v) == 0 {
		return 0, 0, false
	}
	lo, hi = v[0], v[0]
	for _, x := range v[1:] {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi, true
}

// ProcSummary is one process role's cost over a configuration's runs.
type ProcSummary struct {
	Role     string `json:"role"`
	Mplsnode bool   `json:"mplsnode"`
	// UserSeconds and SysSeconds are medians over the successful runs.
	UserSeconds float64 `json:"user_s_median"`
	SysSeconds  float64 `json:"sys_s_median"`
	// PeakRSSKiB is the largest peak over the runs.
	PeakRSSKiB int64 `json:"peak_rss_kib_max"`
}

// Summary is one configuration over its runs.
type Summary struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Test  string `json:"test"`
	Units string `json:"units"`
	// Runs counts successful runs, Failed the others.
	Runs   int `json:"runs"`
	Failed int `json:"failed"`
	// Median, Min and Max are the throughput over the successful runs.
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	// MachineCPUSeconds is the median busy CPU time of the machine per run.
	MachineCPUSeconds float64 `json:"machine_cpu_s_median"`
	// CPUSecondsPerGB is the median over the runs of the machine's busy
	// CPU seconds per GB (10^9 bytes) carried; 0 for rows not in Mbit/s.
	CPUSecondsPerGB float64 `json:"machine_cpu_s_per_gb_median"`
	// Procs are the processes, in the order of the runs.
	Procs []ProcSummary `json:"procs"`
	// PeakRSSKiB is the largest peak RSS of any mplsnode process (0: none).
	PeakRSSKiB int64 `json:"mplsnode_peak_rss_kib_max"`
}

// Summarize reduces runs (round 0, the profile runs, excluded) to one
// Summary per configuration, in the order of cfgs.
func Summarize(cfgs []Config, runs []Run) []Summary {
	var out []Summary
	for i := range cfgs {
		c := &cfgs[i]
		s := Summary{ID: c.ID, Name: c.Name, Test: string(c.Test), Units: c.Units()}
		var tput, machine, perGB []float64
		type acc struct {
			mplsnode  bool
			user, sys []float64
			peak      int64
		}
		roles := map[string]*acc{}
		var order []string
		for _, r := range runs {
			if r.Config != c.ID || r.Round == 0 {
				continue
			}
			if !r.OK {
				s.Failed++
				continue
			}
			s.Runs++
			tput = append(tput, r.Throughput)
			machine = append(machine, r.MachineCPUSeconds)
			if r.Result != nil && s.Units == "Mbit/s" {
				if gb := r.Throughput * r.Result.Elapsed.Seconds() / 8 / 1000; gb > 0 {
					perGB = append(perGB, r.MachineCPUSeconds/gb)
				}
			}
			for _, p := range r.Procs {
				a := roles[p.Role]
				if a == nil {
					a = &acc{mplsnode: p.Mplsnode}
					roles[p.Role] = a
					order = append(order, p.Role)
				}
				a.user = append(a.user, p.UserSeconds)
				a.sys = append(a.sys, p.SysSeconds)
				a.peak = max(a.peak, p.PeakRSSKiB)
			}
		}
		s.Median, _ = Median(tput)
		s.Min, s.Max, _ = MinMax(tput)
		s.MachineCPUSeconds, _ = Median(machine)
		s.CPUSecondsPerGB, _ = Median(perGB)
		sort.Strings(order) // ns0, ns1, ns2
		for _, role := range order {
			a := roles[role]
			u, _ := Median(a.user)
			sy, _ := Median(a.sys)
			s.Procs = append(s.Procs, ProcSummary{Role: role, Mplsnode: a.mplsnode, UserSeconds: u, SysSeconds: sy, PeakRSSKiB: a.peak})
			if a.mplsnode {
				s.PeakRSSKiB = max(s.PeakRSSKiB, a.peak)
			}
		}
		out = append(out, s)
	}
	return out
}

// Target is one of the targets, checked on one run's medians.
type Target struct {
	// Name says what is compared, e.g. "5/4 (labels cost nothing)".
	Name string `json:"name"`
	// Value is the measured ratio (or MiB for the RSS target).
	Value float64 `json:"value"`
	// Op and Want state the target: Value Op Want.
	Op   string  `json:"op"`
	Want float64 `json:"want"`
	// Available is false when a configuration it needs did not run or
	// failed; Met is then false too.
	Available bool `json:"available"`
	Met       bool `json:"met"`
}

// String renders the target for the table and the chart.
func (t Target) String() string {
	if !t.Available {
		return fmt.Sprintf("%s: not measured (want %s %g)", t.Name, t.Op, t.Want)
	}
	verdict := "met"
	if !t.Met {
		verdict = "NOT met"
	}
	return fmt.Sprintf("%s = %.2f (want %s %g): %s", t.Name, t.Value, t.Op, t.Want, verdict)
}

// RSSLimitMiB is the limit on each mplsnode's peak RSS under load.
const RSSLimitMiB = 64

// Targets checks the targets on the summaries and the LSR rows.
func Targets(sums []Summary, lsr []LSRResult) []Target {
	out := ratioTargets(sums)
	out = append(out, overflowTargets(lsr)...)
	out = append(out, lsrRateTargets(lsr)...)
	return append(out, rssTarget(sums))
}

// ratioTargets are the throughput ratios between configurations.
func ratioTargets(sums []Summary) []Target {
	byID := map[string]*Summary{}
	for i := range sums {
		if sums[i].Runs > 0 {
			byID[sums[i].ID] = &sums[i]
		}
	}
	ratio := func(name, num, den string, want float64) Target {
		t := Target{Name: name, Op: ">=", Want: want}
		a, b := byID[num], byID[den]
		if a != nil && b != nil && b.Median > 0 {
			t.Value = a.Median / b.Median
			t.Available = true
			t.Met = t.Value >= want
		}
		return t
	}
	out := []Target{
		ratio("5/4 (labels cost nothing)", "5", "4", 0.95),
		ratio("5/3 (ahead of stock netstack)", "5", "3", 5),
		ratio("5/2 (ahead of the kernel segmenting per frame)", "5", "2", 1.0),
		ratio("7/5 (TAP near AF_PACKET)", "7", "5", 0.9),
		ratio("5u/4 (labelled over MPLS-in-UDP at unlabelled speed)", "5u", "4", 0.9),
		ratio("5u/2 (MPLS-in-UDP ahead of the kernel segmenting per frame)", "5u", "2", 1.0),
		ratio("9h/9g (TCP_RR through our LSR near the kernel's forwarding)", "9h", "9g", 0.8),
		ratio("9i/9g (the same, the LSR's links with busy-poll 50)", "9i", "9g", 0.8),
	}
	// 5/2 on the best link mode of configuration 5 (5, 5m, 5q).
	best := ""
	for _, id := range []string{"5", "5m", "5q"} {
		if s := byID[id]; s != nil && (best == "" || s.Median > byID[best].Median) {
			best = id
		}
	}
	if best != "" {
		out = append(out, ratio("best of 5, 5m, 5q ("+best+")/2 (the best link mode ahead of the kernel per frame)", best, "2", 1.0))
	}
	return out
}

// overflowTargets are the ingress drops of mplsnode's default (ring) LSR
// offered the rate the kernel forwarder reached (mplsnode-swap@kernel-pps);
// without that row, at the rate the generator offers both.
func overflowTargets(lsr []LSRResult) []Target {
	var out []Target
	overflowRow := "mplsnode-swap"
	for _, r := range lsr {
		if r.Config == "mplsnode-swap@kernel-pps" {
			overflowRow = r.Config
		}
	}
	for _, r := range lsr {
		if r.Config == overflowRow {
			out = append(out, Target{Name: fmt.Sprintf("LSR lower_rx_overflow at %.0f frames/s offered (%s), %d B (frames)", r.OfferedPPS, r.Config, r.FrameSize), Op: "<=", Want: 0,
				Value: float64(r.IngressDrops), Available: true, Met: r.IngressDrops == 0})
		}
	}
	return out
}

// lsrRateTargets are, per frame size, mplsnode's swap rates (ring, AF_XDP
// link, XDP label switch) over the kernel's IP forwarding rate.
func lsrRateTargets(lsr []LSRResult) []Target {
	sizes := map[int][4]float64{}
	var order []int
	for _, r := range lsr {
		v, seen := sizes[r.FrameSize]
		if !seen {
			order = append(order, r.FrameSize)
		}
		switch r.Config {
		case "mplsnode-swap":
			v[0] = r.PPS
		case "kernel-ipfwd":
			v[1] = r.PPS
		case "mplsnode-swap-xdp":
			v[2] = r.PPS
		case "mplsnode-xdp-fwd":
			v[3] = r.PPS
		}
		sizes[r.FrameSize] = v
	}
	sort.Ints(order)
	var out []Target
	if len(order) == 0 {
		out = append(out, Target{Name: "LSR pps / kernel IP forwarding", Op: ">=", Want: 1.0})
	}
	for _, size := range order {
		v := sizes[size]
		out = append(out, rateTarget(fmt.Sprintf("LSR pps / kernel IP forwarding, %d B", size), v[0], v[1], 1.0))
		if v[2] > 0 { // the AF_XDP link type: want twice the kernel
			out = append(out, rateTarget(fmt.Sprintf("LSR pps on xdp / kernel IP forwarding, %d B", size), v[2], v[1], 2.0))
		}
		if v[3] > 0 { // the node's XDP label switch: want three times the kernel
			out = append(out, rateTarget(fmt.Sprintf("LSR pps in-kernel (forward xdp) / kernel IP forwarding, %d B", size), v[3], v[1], 3.0))
		}
	}
	return out
}

// rateTarget wants pps/kernel >= want; it is available when both rates
// were measured.
func rateTarget(name string, pps, kernel, want float64) Target {
	t := Target{Name: name, Op: ">=", Want: want}
	if pps > 0 && kernel > 0 {
		t.Value, t.Available = pps/kernel, true
		t.Met = t.Value >= want
	}
	return t
}

// rssTarget is the largest peak RSS of an mplsnode over all runs, under
// RSSLimitMiB.
func rssTarget(sums []Summary) Target {
	rss := Target{Name: "peak RSS of each mplsnode (MiB)", Op: "<", Want: RSSLimitMiB}
	for _, s := range sums {
		if s.PeakRSSKiB > 0 {
			rss.Available = true
			rss.Value = max(rss.Value, float64(s.PeakRSSKiB)/1024)
		}
	}
	rss.Met = rss.Available && rss.Value < RSSLimitMiB
	return rss
}
