package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mplsnode/mplsnode/node"
)

// printXDP writes the XDP label switch's section of `mplsnode stats`:
// where it runs, what it forwarded in the kernel and what it passed up.
func printXDP(w io.Writer, x *node.XDPReport) {
	if x == nil {
		return
	}
	printSection(w, "XDP label switch ("+strings.Join(x.Links, ", ")+")", []namedCount{
		{"swapped", x.Swapped}, {"popped to IP", x.PoppedIP}, {"popped, still labelled", x.PoppedLabelled},
		{"ILM entries resolved", uint64(x.Entries)}, {"verified instructions", uint64(x.VerifiedInstructions)}}, nil, nil)
	for _, l := range x.Links {
		mode := "redirects in the kernel"
		if !slices.Contains(x.EgressOK, l) {
			mode = "frames for it take the userspace path (veth peer without NAPI)"
		}
		fmt.Fprintf(w, "  egress %s: %s\n", l, mode)
	}
	for _, l := range sortedKeys(x.Skipped) {
		fmt.Fprintf(w, "  not on %s: %s\n", l, x.Skipped[l])
	}
	for _, k := range sortedKeys(x.Passed) {
		if x.Passed[k] != 0 {
			fmt.Fprintf(w, "  passed up %s\t%d\n", k, x.Passed[k])
		}
	}
}
