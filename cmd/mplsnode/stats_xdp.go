package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/mplsnode/mplsnode/node"
)

// printXDP writes the XDP label switch's section of `mplsnode stats`:
// where it runs, what it forwarded in the kernel and what it passed up.
func printXDP(w io.Writer, x *node.XDPReport) {
	if x == nil {
		return
	}
	printSection(w, "xdp (the XDP label switch)", []namedCount{
		{"swapped", x.Swapped}, {"popped_ip", x.PoppedIP}, {"popped_labelled", x.PoppedLabelled},
		{"ip_forwarded", x.IPForwarded}, {"pushed", x.Pushed},
		{"entries_resolved", uint64(x.Entries)}, {"fib_entries_resolved", uint64(x.FIBEntries)},
		{"fib_map_entries", uint64(x.FIBMapEntries)}, {"fib_capacity", uint64(x.FIBCapacity)},
		{"fib_routes_not_carried", uint64(x.FIBNotCarried)}, {"fib_walks", x.FIBWalks}, {"fib_updates", x.FIBUpdates}, {"verified_instructions", uint64(x.VerifiedInstructions)}}, nil, nil)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  fib_sync_seconds\t%.3f\n", x.FIBSyncSeconds)
	if x.FIBError != "" {
		fmt.Fprintf(tw, "  fib_error\t%s\n", x.FIBError)
	}
	fmt.Fprintf(tw, "  links\t%s\n", strings.Join(x.Links, " "))
	var userspace []string
	for _, l := range x.Links {
		if !slices.Contains(x.EgressOK, l) {
			userspace = append(userspace, l)
		}
	}
	fmt.Fprintf(tw, "  egress_ok\t%s (redirects in the kernel)\n", strings.Join(x.EgressOK, " "))
	if len(userspace) > 0 {
		fmt.Fprintf(tw, "  \t%s: frames for it take the userspace path (veth peer without NAPI)\n", strings.Join(userspace, " "))
	}
	for _, l := range sortedKeys(x.Skipped) {
		fmt.Fprintf(tw, "  skipped %s\t%s\n", l, x.Skipped[l])
	}
	if len(x.Passed) > 0 {
		fmt.Fprintln(tw, "  passed (up to the userspace path; non-zero reasons)")
	}
	for _, k := range sortedKeys(x.Passed) {
		if x.Passed[k] != 0 {
			fmt.Fprintf(tw, "    %s\t%d\n", k, x.Passed[k])
		}
	}
	tw.Flush()
}
