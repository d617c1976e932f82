package netperf

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestInterimBandUnits: with -f on an RR test stock's -D line runs the
// transaction count through calc_thruput_interval in the -f units and
// names them (format_units), instead of "Trans". 1000 transactions over
// 0.5 s in 'K' are 1000/1024/0.5 = 1.95 "KBytes/s". Planted bug (the RR
// flag regardless of -f: 2000.00 Trans/s) caught.
func TestInterimBandUnits(t *testing.T) {
	var out strings.Builder
	cfg := Config{Test: TCPRR, Units: 'K', Interim: time.Millisecond, InterimOut: &out}
	start := time.Now().Add(-500 * time.Millisecond)
	ir := newInterim(&cfg, start)
	ir.add(1000)
	re := regexp.MustCompile(`^Interim result: +([0-9.]+) KBytes/s over 0\.5[0-9]{2} seconds ending at [0-9]+\.[0-9]{3}\n$`)
	m := re.FindStringSubmatch(out.String())
	if m == nil || (m[1] != "1.95" && m[1] != "1.94") {
		t.Errorf("interim line %q, want about 1.95 KBytes/s", out.String())
	}
}
