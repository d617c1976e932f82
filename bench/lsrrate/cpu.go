package lsrrate

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
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
