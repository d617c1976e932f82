package netperf

import (
	"math"
	"slices"
	"time"
)

// latencyExact is how many microseconds the histogram counts one by one;
// longer transactions are kept as values (they are rare).
const latencyExact = 10000

// latencyHist records transaction times in whole microseconds, for the
// omni latency outputs (MIN/MAX/P50/P90/P99/MEAN/STDDEV_LATENCY).
type latencyHist struct {
	counts   [latencyExact]uint32
	long     []uint32
	n        uint64
	sum, sq  float64
	min, max uint32
}

func (h *latencyHist) add(d time.Duration) {
	us := uint32(min(d.Microseconds(), math.MaxUint32))
	if us < latencyExact {
		h.counts[us]++
	} else {
		h.long = append(h.long, us)
	}
	if h.n == 0 || us < h.min {
		h.min = us
	}
	h.max = max(h.max, us)
	h.n++
	h.sum += float64(us)
	h.sq += float64(us) * float64(us)
}

// LatencyStats are a test's transaction times in microseconds; -1 when
// the test has no transactions (as netperf prints them).
type LatencyStats struct {
	Min, Max, P50, P90, P99 int
	Mean, StdDev            float64
}

// noLatency is what a test without transactions reports.
var noLatency = LatencyStats{-1, -1, -1, -1, -1, -1, -1}

// stats returns the statistics of the recorded times.
func (h *latencyHist) stats() LatencyStats {
	if h == nil || h.n == 0 {
		return noLatency
	}
	mean := h.sum / float64(h.n)
	v := h.sq/float64(h.n) - mean*mean
	s := LatencyStats{Min: int(h.min), Max: int(h.max), Mean: mean, StdDev: math.Sqrt(max(v, 0))}
	slices.Sort(h.long)
	s.P50, s.P90, s.P99 = h.percentile(0.50), h.percentile(0.90), h.percentile(0.99)
	return s
}

// percentile returns the smallest time with at least p of the
// transactions at or below it.
func (h *latencyHist) percentile(p float64) int {
	want := uint64(math.Ceil(p * float64(h.n)))
	var seen uint64
	for us, c := range h.counts {
		seen += uint64(c)
		if seen >= want && c > 0 {
			return us
		}
	}
	for _, us := range h.long {
		seen++
		if seen >= want {
			return int(us)
		}
	}
	return int(h.max)
}

// Histogram is netperf's histogram of transaction times (netlib.c's HIST,
// as a netperf built with --enable-histogram keeps it): ten buckets per
// decade from 1 usec to 100 s, each decade's bucket i counting the times
// t with t/10^decade == i, and the times of 100 s and longer.
type Histogram struct {
	Rows    [8][10]uint64
	Over100 uint64
	Total   uint64
}

// histogramRows are HIST_report's row titles, one per decade.
var histogramRows = [8]string{"UNIT_USEC     ", "TEN_USEC      ", "HUNDRED_USEC  ", "UNIT_MSEC     ",
	"TEN_MSEC      ", "HUNDRED_MSEC  ", "UNIT_SEC      ", "TEN_SEC       "}

// add counts one time of us microseconds, as HIST_add: divide by ten
// until it is a single digit, the number of divisions being the decade.
func (h *Histogram) add(us uint64, n uint64) {
	h.Total += n
	for row := range h.Rows {
		if us <= 9 {
			h.Rows[row][us] += n
			return
		}
		us /= 10
	}
	h.Over100 += n
}

// histogram returns the recorded times as netperf's histogram.
func (h *latencyHist) histogram() *Histogram {
	if h == nil {
		return nil
	}
	var out Histogram
	for us, c := range h.counts {
		if c > 0 {
			out.add(uint64(us), uint64(c))
		}
	}
	for _, us := range h.long {
		out.add(uint64(us), 1)
	}
	return &out
}

// merge adds o's counts to h.
func (h *Histogram) merge(o *Histogram) {
	for r := range h.Rows {
		for i := range h.Rows[r] {
			h.Rows[r][i] += o.Rows[r][i]
		}
	}
	h.Over100 += o.Over100
	h.Total += o.Total
}
