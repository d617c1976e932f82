package main

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// bindToCPU binds this process to cpu, as stock netperf's -T lcpu
// (bind_to_specific_processor): every thread it has now, and so every
// thread they start, since a new thread inherits its creator's affinity.
func bindToCPU(cpu int) error {
	if cpu < 0 || cpu >= len(unix.CPUSet{})*64 {
		return fmt.Errorf("-T %d: no such CPU", cpu)
	}
	var set unix.CPUSet
	set.Set(cpu)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("-T %d: %w", cpu, err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("-T %d: sched_setaffinity: %w", cpu, err)
		}
	}
	return nil
}
