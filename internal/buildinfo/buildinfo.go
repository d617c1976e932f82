// Package buildinfo reads what the Go toolchain recorded in the binary
// (runtime/debug.ReadBuildInfo): the module version and the VCS revision it
// was built from. The CLI's version command and the mplsnode_build_info
// metric print the same values.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Info is the build of the running binary. A field the toolchain did not
// record is "unknown" (Revision, Time) or "(devel)" (Version, go build in a
// checkout without a tag).
type Info struct {
	// Module is the main module's path.
	Module string
	// Version is the main module's version ("v0.3.1", "(devel)").
	Version string
	// Revision is the VCS commit the binary was built from.
	Revision string
	// Time is the commit's time (RFC 3339).
	Time string
	// Modified reports whether the working tree had uncommitted changes.
	Modified bool
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// Read returns the running binary's build information.
var Read = sync.OnceValue(func() Info {
	in := Info{Module: "github.com/mplsnode/mplsnode", Version: "(devel)", Revision: "unknown", Time: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	if bi.Main.Path != "" {
		in.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		in.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
})

// String is the one-line form the CLI prints:
// "mplsnode MODULE VERSION (revision REV[, modified], TIME) GOVERSION".
func (i Info) String() string {
	rev := i.Revision
	if i.Modified {
		rev += ", modified"
	}
	return "mplsnode " + i.Module + " " + i.Version + " (revision " + rev + ", " + i.Time + ") " + i.GoVersion
}
