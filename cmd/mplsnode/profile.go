package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
)

// startCPUProfile starts a CPU profile written to path (the --cpuprofile
// flag of run, netperf and netserver; the seed-topology bench uses it to
// show where a configuration's time goes). An empty path does nothing. A
// profile that cannot start is reported on stderr as command's and ok is
// false (a usage error). The returned stop function ends the profile and
// closes the file; call it once, before exit.
func startCPUProfile(command, path string, stderr io.Writer) (stop func() error, ok bool) {
	if path == "" {
		return func() error { return nil }, true
	}
	f, err := os.Create(path)
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "mplsnode %s: --cpuprofile: %v\n", command, err)
		return nil, false
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, true
}
