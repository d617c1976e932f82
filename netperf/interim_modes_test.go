package netperf

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestInterimModes prints one interim interval in each output mode and
// matches it against stock's demo_interval_display formats (netlib.c):
// "Interim result: %7.2f %s/s over %.3f seconds ending at %ld.%.3ld",
// "%7.2f,%s/s,%.3f,%ld.%.3ld", and the four NETPERF_*[n]= lines, n
// counting from 0, which flent parses. final prints the last, shorter
// interval; reset prints what the interval holds at once. Checked by
// planting the bug: with OmniKeyval printed as the human line, mode 3
// fails with the "Interim result:" line it printed.
func TestInterimModes(t *testing.T) {
	want := map[OmniMode]string{
		0:       `^Interim result: +[0-9]+\.[0-9]{2} 10\^6bits/s over 0\.0[0-9]{2} seconds ending at [0-9]+\.[0-9]{3}\n$`,
		OmniCSV: `^ *[0-9]+\.[0-9]{2},10\^6bits/s,0\.0[0-9]{2},[0-9]+\.[0-9]{3}\n$`,
		OmniKeyval: `^NETPERF_INTERIM_RESULT\[0\]=[0-9]+\.[0-9]{2}\nNETPERF_UNITS\[0\]=10\^6bits/s\nNETPERF_INTERVAL\[0\]=0\.0[0-9]{2}\nNETPERF_ENDING\[0\]=[0-9]+\.[0-9]{3}\n` +
			`NETPERF_INTERIM_RESULT\[1\]=[0-9]+\.[0-9]{2}\nNETPERF_UNITS\[1\]=10\^6bits/s\nNETPERF_INTERVAL\[1\]=0\.0[0-9]{2}\nNETPERF_ENDING\[1\]=[0-9]+\.[0-9]{3}\n$`,
	}
	for mode, re := range want {
		var out strings.Builder
		cfg := Config{Test: TCPStream, Units: 'm', Interim: 10 * time.Millisecond, InterimOut: &out, InterimMode: mode}
		ir := newInterim(&cfg, time.Now())
		time.Sleep(15 * time.Millisecond)
		ir.add(1e6)
		if mode == OmniKeyval {
			ir.add(1) // within the interval: no line
			ir.final()
		}
		ir.final() // nothing counted since: no line
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("mode %v printed\n%s\nwant %s", mode, out.String(), re)
		}
	}
	var out strings.Builder
	cfg := Config{Test: UDPRR, Interim: time.Hour, InterimOut: &out, InterimMode: OmniKeyval}
	ir := newInterim(&cfg, time.Now())
	ir.add(3)
	ir.reset()
	if !strings.Contains(out.String(), "NETPERF_UNITS[0]=Trans/s\n") || !strings.HasPrefix(out.String(), "NETPERF_INTERIM_RESULT[0]=") {
		t.Errorf("reset printed %q, want the interval's Trans/s lines", out.String())
	}
}
