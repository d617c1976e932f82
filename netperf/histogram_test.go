package netperf

import (
	"strings"
	"testing"
	"time"
)

// TestHistogram checks -v 2's histogram against netlib.c's HIST_add and
// HIST_report: a time lands in the row of its decade (times divided by ten
// until one digit is left), 100 s and longer count in >100_SECS, each row
// is its title and ten ": %4d" counts; the kind follows the test
// (send_omni_inner), and the counts of -i iterations add up. The expected
// text was written from the C formats, not from this code. Planted bug:
// the decade loop comparing "us < 9": 9 us went to TEN_USEC[0] and this
// test failed.
func TestHistogram(t *testing.T) {
	var lat latencyHist
	for _, us := range []int{0, 9, 10, 99, 100, 12345, 99999999, 100000000, 10000} {
		lat.add(time.Duration(us) * time.Microsecond)
	}
	it := Result{Histogram: lat.histogram()}
	rep := &Report{Config: Config{Test: TCPCRR}, Iterations: []Result{it, it}}
	var b strings.Builder
	if err := rep.WriteHistogram(&b); err != nil {
		t.Fatal(err)
	}
	want := "\nHistogram of connect/request/response/close times\n" +
		"UNIT_USEC     :    2:    0:    0:    0:    0:    0:    0:    0:    0:    2\n" +
		"TEN_USEC      :    0:    2:    0:    0:    0:    0:    0:    0:    0:    2\n" +
		"HUNDRED_USEC  :    0:    2:    0:    0:    0:    0:    0:    0:    0:    0\n" +
		"UNIT_MSEC     :    0:    0:    0:    0:    0:    0:    0:    0:    0:    0\n" +
		"TEN_MSEC      :    0:    4:    0:    0:    0:    0:    0:    0:    0:    0\n" +
		"HUNDRED_MSEC  :    0:    0:    0:    0:    0:    0:    0:    0:    0:    0\n" +
		"UNIT_SEC      :    0:    0:    0:    0:    0:    0:    0:    0:    0:    0\n" +
		"TEN_SEC       :    0:    0:    0:    0:    0:    0:    0:    0:    0:    2\n" +
		">100_SECS: 2\n" +
		"HIST_TOTAL:      18\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	for test, kind := range map[TestType]string{TCPRR: "request/response", UDPRR: "request/response", TCPCC: "connect/close", TCPStream: ""} {
		b.Reset()
		r := &Report{Config: Config{Test: test}, Result: it}
		if err := r.WriteHistogram(&b); err != nil {
			t.Fatal(err)
		}
		if kind == "" && b.Len() != 0 {
			t.Errorf("%s: got a histogram, want none (send/recv times are not kept)", test)
		}
		if kind != "" && !strings.HasPrefix(b.String(), "\nHistogram of "+kind+" times\n") {
			t.Errorf("%s: got %q, want the %s kind", test, b.String(), kind)
		}
	}
}
