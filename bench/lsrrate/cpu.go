package lsrrate

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// userHZ is the unit of the CPU times in /proc (USER_HZ, the clock ticks
// of times(2)): 100 on every Linux architecture Go supports.
const userHZ = 100

// ticks converts USER_HZ ticks to a duration.
func ticks(n uint64) time.Duration { return time.Duration(n) * time.Second / userHZ }

// statCPU returns utime+stime from a /proc/.../stat file: the process's
// (all threads, dead ones included) or one thread's user and system time.
func statCPU(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold blanks;
	// the fields after its closing parenthesis start at field 3 (state).
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("%s: no command name in %q", path, s)
	}
	f := strings.Fields(s[i+1:])
	const utime, stime = 14 - 3, 15 - 3 // proc(5) field numbers
	if len(f) <= stime {
		return 0, fmt.Errorf("%s: %d fields, want more than %d", path, len(f)+2, stime+3)
	}
	u, err1 := strconv.ParseUint(f[utime], 10, 64)
	k, err2 := strconv.ParseUint(f[stime], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%s: bad utime/stime %q %q", path, f[utime], f[stime])
	}
	return ticks(u + k), nil
}

// processCPU returns the user+sys CPU time of process pid.
func processCPU(pid int) (time.Duration, error) {
	return statCPU("/proc/" + strconv.Itoa(pid) + "/stat")
}

// threadCPU returns the user+sys CPU time of thread tid of this process.
func threadCPU(tid int) (time.Duration, error) {
	return statCPU("/proc/self/task/" + strconv.Itoa(tid) + "/stat")
}

// softirqTime returns the machine's total softirq time (the "softirq"
// column of the cpu line of /proc/stat, all CPUs).
func softirqTime() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	// cpu user nice system idle iowait irq softirq ...
	const softirq = 7
	if len(f) <= softirq || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	n, err := strconv.ParseUint(f[softirq], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/stat: softirq %q: %w", f[softirq], err)
	}
	return ticks(n), nil
}

// ParseCPUList parses a CPU list in taskset(1)'s and cpuset(7)'s words:
// CPU numbers and ranges, comma-separated ("0", "1,3", "0-1"). The result
// is sorted, without duplicates.
func ParseCPUList(s string) ([]int, error) {
	var set unix.CPUSet
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("CPU list %q is empty", s)
	}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("CPU list %q: %q is not a CPU number or range (N or N-M)", s, f)
		}
		b := a
		if isRange {
			b, err = strconv.Atoi(hi)
			if err != nil || b < a {
				return nil, fmt.Errorf("CPU list %q: %q is not a CPU range (N-M with N <= M)", s, f)
			}
		}
		if b >= maxCPU {
			return nil, fmt.Errorf("CPU list %q: CPU %d: want below %d", s, b, maxCPU)
		}
		for c := a; c <= b; c++ {
			set.Set(c)
		}
	}
	var cpus []int
	for c := 0; c < maxCPU; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// maxCPU bounds CPU numbers: the size of unix.CPUSet.
const maxCPU = 1024

// allowedCPUs returns the CPUs this process may run on
// (sched_getaffinity), in order.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := 0; c < maxCPU; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// checkCPUs returns an error naming flag when a CPU of cpus is not one
// this process may run on.
func checkCPUs(what string, cpus []int) error {
	allowed, err := allowedCPUs()
	if err != nil {
		return err
	}
	for _, c := range cpus {
		if !slices.Contains(allowed, c) {
			return fmt.Errorf("lsrrate: %s: CPU %d is not one this process may run on (%s)", what, c, cpuListString(allowed))
		}
	}
	return nil
}

// cpuListString formats cpus as a taskset(1) list ("0-1", "0,2").
func cpuListString(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}

// cpuSet returns cpus as a unix.CPUSet.
func cpuSet(cpus []int) unix.CPUSet {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	return set
}
