package netperf

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"strconv"
)

// CPUTicksPerSecond is the /proc/stat tick rate (USER_HZ), which netserver
// reports as cpu_rate. Linux fixes USER_HZ at 100 for every architecture.
const CPUTicksPerSecond = 100.0

// procStatPath is where CPU counters are read; a variable for tests.
var procStatPath = "/proc/stat"

// cpuTicks holds one CPU's /proc/stat counters.
type cpuTicks struct {
	user, nice, system, idle, iowait, irq, softirq, steal uint64
}

func (t cpuTicks) total() uint64 {
	return t.user + t.nice + t.system + t.idle + t.iowait + t.irq + t.softirq + t.steal
}

// CPUSnapshot is the per-CPU tick counters at one instant.
type CPUSnapshot []cpuTicks

// TakeCPUSnapshot reads the per-CPU lines ("cpuN ...") of /proc/stat.
func TakeCPUSnapshot() (CPUSnapshot, error) {
	b, err := os.ReadFile(procStatPath)
	if err != nil {
		return nil, err
	}
	var snap CPUSnapshot
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		// Per-CPU lines are "cpu0", "cpu1", ...; the aggregate "cpu" line is skipped.
		if len(f) < 5 || !bytes.HasPrefix(f[0], []byte("cpu")) || len(f[0]) == 3 {
			continue
		}
		var v [8]uint64
		for i := 0; i < len(v) && i+1 < len(f); i++ {
			v[i], _ = strconv.ParseUint(string(f[i+1]), 10, 64)
		}
		snap = append(snap, cpuTicks{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]})
	}
	if len(snap) == 0 {
		return nil, errors.New("netperf: no per-CPU lines in " + procStatPath)
	}
	return snap, nil
}

// CPUUsage is the CPU utilisation between two snapshots, in percent of all
// CPUs, as netserver's /proc/stat method reports it.
type CPUUsage struct {
	Util, User, System, IOWait, IRQ, SoftIRQ float32
	NumCPUs                                  int
	PeakCPU                                  int
	PeakUtil                                 float32
}

// Since computes the usage from start to s: for each CPU, utilisation is
// 100 - idle%; the result is the mean over CPUs, with the busiest CPU as
// the peak.
func (s CPUSnapshot) Since(start CPUSnapshot) CPUUsage {
	n := min(len(s), len(start))
	u := CPUUsage{NumCPUs: n}
	if n == 0 {
		return u
	}
	var util, user, sys, iow, irq, sirq float64
	for i := 0; i < n; i++ {
		a, b := start[i], s[i]
		tot := float64(b.total() - a.total())
		if tot <= 0 {
			continue
		}
		c := 100 * (1 - float64(b.idle-a.idle)/tot)
		util += c
		user += 100 * float64(b.user+b.nice-a.user-a.nice) / tot
		sys += 100 * float64(b.system-a.system) / tot
		iow += 100 * float64(b.iowait-a.iowait) / tot
		irq += 100 * float64(b.irq-a.irq) / tot
		sirq += 100 * float64(b.softirq-a.softirq) / tot
		if float32(c) > u.PeakUtil {
			u.PeakUtil, u.PeakCPU = float32(c), i
		}
	}
	d := float64(n)
	u.Util, u.User, u.System = float32(util/d), float32(user/d), float32(sys/d)
	u.IOWait, u.IRQ, u.SoftIRQ = float32(iow/d), float32(irq/d), float32(sirq/d)
	return u
}

// cpuMeter measures CPU usage over a test when enabled.
type cpuMeter struct {
	start CPUSnapshot
}

func startCPU(enabled bool) *cpuMeter {
	if !enabled {
		return nil
	}
	s, err := TakeCPUSnapshot()
	if err != nil {
		return nil
	}
	return &cpuMeter{start: s}
}

// stop returns the usage since start, ok=false when not measuring.
func (m *cpuMeter) stop() (CPUUsage, bool) {
	if m == nil {
		return CPUUsage{}, false
	}
	s, err := TakeCPUSnapshot()
	if err != nil {
		return CPUUsage{}, false
	}
	return s.Since(m.start), true
}
