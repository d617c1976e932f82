package main

import (
	"context"
	"fmt"
	"io"

	"github.com/mplsnode/mplsnode/internal/buildinfo"
)

const versionUsage = `usage: mplsnode version   (or mplsnode --version)

Prints the module version, the VCS revision the binary was built from (with
", modified" when the tree had uncommitted changes), the commit time and
the Go toolchain, as the Go toolchain recorded them (debug.ReadBuildInfo).
Exit code 0.
`

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", versionUsage, stderr)
	if code, stop := parseFlags(fs, args, stdout, stderr); stop {
		return code
	}
	fmt.Fprintln(stdout, buildinfo.Read())
	return exitOK
}
