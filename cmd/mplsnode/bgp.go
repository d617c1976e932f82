package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/mplsnode/mplsnode/bgp"
	"github.com/mplsnode/mplsnode/config"
	"github.com/mplsnode/mplsnode/node"
)

const bgpUsage = `usage: mplsnode bgp summary|neighbor|routes [--socket PATH] [--json]

Asks a running node (mplsnode run) over its control socket about its BGP
labeled unicast speaker:

	summary    AS, router-id, label range use, routes held and installed,
	           one line per neighbour (state, prefixes received/installed)
	neighbor   each neighbour per family: received, accepted, installed,
	           advertised prefixes, session state and since when
	routes     each received best path (neighbour, next hop, labels) and
	           what was installed (labels pushed, via, dev), and the
	           node's own networks with their labels

Examples:

	mplsnode bgp summary
	ip netns exec ns1 mplsnode bgp routes --socket /run/mplsnode-ns1.sock --json

Exit codes: 0 ok, 1 the node cannot be reached or runs no BGP, 2 usage error.

Options:
`

const routeUsage = `usage: mplsnode [-f mpls] route show [--socket PATH] [--json]
       mplsnode -f mpls route show -s|--stats [--socket PATH] [--json]
       mplsnode route add|replace PREFIX ... [--socket PATH] [--json]
       mplsnode route del PREFIX [--socket PATH] [--json]
       mplsnode -f mpls route add|replace LABEL ... [--socket PATH] [--json]
       mplsnode -f mpls route del LABEL [--socket PATH] [--json]

route show prints a running node's IP routes (the connected subnet of each
address, "proto kernel scope link" as ip route shows it; static from its
config file and those BGP installed, each with its protocol and
administrative distance: static 1 wins over bgp 20), or with -f mpls its
incoming label map (ILM), in iproute2's words. Each line it prints is
accepted by route add and route replace (and in a config file after
"route add "): proto, metric and scope change nothing there.

With -f mpls, -s (--stats) prints under each label route the packets and
bytes the node carried under that incoming label (forwarded, or popped
for itself), both forwarding planes summed, the XDP program's share in
parentheses: "    packets 12 bytes 3400 (xdp packets 10 bytes 3000)".
A frame counts under the label that decided it (below an explicit null,
the label exposed), its bytes from the label stack on, as received;
dropped frames count in mplsnode stats by reason. The counts grow from
the node's start and survive route changes. --json always holds them
(packets, bytes, xdp_packets, xdp_bytes).

route add takes the rest of a config file's "route add" line, -f mpls route
add the rest of its "-f mpls route add" line; the node checks it against
its links and addresses as it checks its file, and refuses a prefix or
label that already has a static route (delete it first, or use route
replace). route replace takes the same words and adds the route, or puts
it in the place of the static route to its prefix (label), as ip route
replace does. A static route shadows BGP's to the same prefix. route del
removes a static route (by prefix) or label route (by label); BGP's route
to the prefix, if any, shows again. Changes last until the node reloads (SIGHUP) or restarts:
then the file's routes are back. Each change is logged.

Examples:

	mplsnode route show
	mplsnode -f mpls route show --json
	mplsnode -f mpls route show -s
	mplsnode route add 10.9.0.0/16 encap mpls 100 via 10.1.0.2
	mplsnode route replace 10.9.0.0/16 encap mpls 200 via 10.1.0.2
	mplsnode route del 10.9.0.0/16
	mplsnode -f mpls route add 300 as 301 via inet 10.2.0.2
	mplsnode -f mpls route del 300

Exit codes: 0 ok, 1 the node cannot be reached or refused the change (its
error names the column in "route add ...", as control:1:COL), 2 usage
error.

Options:
`

func runBGP(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bgp", bgpUsage, stderr)
	socket := fs.String("socket", node.DefaultControlSocket, "control socket `PATH` of the running node")
	asJSON := fs.Bool("json", false, "print the raw JSON document")
	what, rest := "", args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		what, rest = args[0], args[1:]
	}
	if code, stop := parseFlags(fs, rest, stdout, stderr); stop {
		return code
	}
	switch what {
	case "summary", "neighbor", "routes":
	case "neighbors", "route":
		what = strings.TrimSuffix(what, "s")
		if what == "route" {
			what = "routes"
		}
	default:
		return usageError(stderr, "bgp", "want summary, neighbor or routes, got %q", what)
	}
	body, code := query(ctx, "bgp", *socket, "bgp "+what, stderr)
	if code != exitOK {
		return code
	}
	if *asJSON {
		stdout.Write(body)
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	printer := map[string]func(io.Writer, []byte, io.Writer) bool{
		"summary": printBGPSummary, "neighbor": printBGPNeighbors, "routes": printBGPRoutes,
	}[what]
	if !printer(tw, body, stderr) {
		return exitFailure
	}
	return exitOK
}

// printBGPSummary prints `bgp summary`'s answer body to tw: the speaker,
// its route counts and one line a neighbour; false: a bad answer.
func printBGPSummary(tw io.Writer, body []byte, stderr io.Writer) bool {
	var s bgp.Summary
	if !decode(body, &s, stderr) {
		return false
	}
	fmt.Fprintf(tw, "AS %d, router-id %s, labels %d-%d: %d of %d bound\n", s.AS, s.RouterID, s.LabelLow, s.LabelHigh, s.LabelsUsed, s.LabelsSize)
	fmt.Fprintf(tw, "routes %d, installed %d, unresolved next hop %d\n", s.Routes, s.Installed, s.Unresolved)
	reasons := func(m map[string]int) string {
		var out []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, fmt.Sprintf("%s %d", k, m[k]))
		}
		return strings.Join(out, ", ")
	}
	if len(s.NotInstalled) > 0 {
		fmt.Fprintf(tw, "not installed: %s\n", reasons(s.NotInstalled))
	}
	if len(s.Refused) > 0 {
		counts := map[string]int{}
		for k, v := range s.Refused {
			counts[k] = int(v)
		}
		fmt.Fprintf(tw, "refused so far: %s\n", reasons(counts))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "NEIGHBOR\tAS\tSTATE\tSINCE\tRECEIVED\tINSTALLED")
	for _, n := range s.Neighbors {
		var rx, in int
		for _, f := range n.Families {
			rx += f.Received
			in += f.Installed
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\n", n.Address, n.RemoteAS, n.State, n.Since, rx, in)
	}
	return true
}

// printBGPNeighbors prints `bgp neighbor`'s answer body to tw: a line per
// neighbour and family; false: a bad answer.
func printBGPNeighbors(tw io.Writer, body []byte, stderr io.Writer) bool {
	return printList(tw, body, stderr, "NEIGHBOR\tAS\tROUTER-ID\tSTATE\tFAMILY\tRECEIVED\tACCEPTED\tINSTALLED\tADVERTISED", func(w io.Writer, n bgp.NeighborStatus) {
		for _, f := range n.Families {
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", n.Address, n.RemoteAS, dash(n.RouterID), n.State, f.Family, f.Received, f.Accepted, f.Installed, f.Advertised)
		}
	})
}

// printBGPRoutes prints `bgp routes`'s answer body to tw: a line per best
// path and what it installed; false: a bad answer.
func printBGPRoutes(tw io.Writer, body []byte, stderr io.Writer) bool {
	return printList(tw, body, stderr, "PREFIX\tFROM\tNEXT-HOP\tLABELS\tINSTALLED\tPUSH\tVIA\tDEV\tLOCAL-LABEL", func(w io.Writer, r bgp.RouteStatus) {
		from := r.Neighbor
		if r.Local {
			from = "local"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%v\t%s\t%s\t%s\t%s\n", r.Prefix, from, dash(r.NextHop), dash(config.FormatStack(r.Labels)),
			r.Installed, dash(config.FormatStack(r.Push)), dash(r.Via), dash(r.Dev), dash(localLabel(r.LocalLabel)))
	})
}

// printList decodes an answer body that is a list of T and prints to w
// the header (none if empty), then each item's lines (row); false: a bad
// answer.
func printList[T any](w io.Writer, body []byte, stderr io.Writer, header string, row func(io.Writer, T)) bool {
	var items []T
	if !decode(body, &items, stderr) {
		return false
	}
	if header != "" {
		fmt.Fprintln(w, header)
	}
	for _, item := range items {
		row(w, item)
	}
	return true
}

func runRoute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("route", routeUsage, stderr)
	socket := fs.String("socket", node.DefaultControlSocket, "control socket `PATH` of the running node")
	asJSON := fs.Bool("json", false, "print the raw JSON document")
	mplsFamily := fs.Bool("mpls", false, "show the incoming label map (as -f mpls)")
	stats := fs.Bool("stats", false, "with -f mpls: print the packets and bytes carried under each incoming label")
	fs.BoolVar(stats, "s", false, "short for --stats")
	if len(args) > 0 && (args[0] == "add" || args[0] == "replace" || args[0] == "del") {
		return runRouteChange(ctx, fs, args[0], args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "show" {
		// `mplsnode route --help` (and `-f mpls route --help`, which
		// arrives as `route --help --mpls`): the help, before the verb.
		if len(args) > 0 && strings.HasPrefix(args[0], "-") {
			if code, stop := parseFlags(fs, args, stdout, stderr); stop {
				return code
			}
		}
		return usageError(stderr, "route", "want show, add, replace or del")
	}
	if code, stop := parseFlags(fs, args[1:], stdout, stderr); stop {
		return code
	}
	if *stats && !*mplsFamily {
		return usageError(stderr, "route", "-s counts per incoming label: mplsnode -f mpls route show -s")
	}
	cmd := "route show"
	if *mplsFamily {
		cmd = "mpls route show"
	}
	body, code := query(ctx, "route", *socket, cmd, stderr)
	if code != exitOK {
		return code
	}
	if *asJSON {
		stdout.Write(body)
		return exitOK
	}
	ok := false
	if *mplsFamily {
		ok = printList(stdout, body, stderr, "", func(w io.Writer, e node.ILMEntry) {
			fmt.Fprintln(w, e.String())
			if *stats {
				fmt.Fprintln(w, labelStatsLine(e))
			}
		})
	} else {
		ok = printList(stdout, body, stderr, "", func(w io.Writer, r node.RouteEntry) { fmt.Fprintln(w, r.String()) })
	}
	if !ok {
		return exitFailure
	}
	return exitOK
}

// runRouteChange sends `[mpls ]route add|replace|del WORDS` to the node: the words
// are every argument that is not one of fs's flags.
func runRouteChange(ctx context.Context, fs *flag.FlagSet, verb string, args []string, stdout, stderr io.Writer) int {
	var words, flags []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || fs.Lookup(name) == nil && name != "h" && name != "help" {
			words = append(words, a)
			continue
		}
		flags = append(flags, a)
		if name == "socket" && !hasValue && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if code, stop := parseFlags(fs, flags, stdout, stderr); stop {
		return code
	}
	mplsFamily := fs.Lookup("mpls").Value.String() == "true"
	switch {
	case len(words) == 0 && mplsFamily:
		return usageError(stderr, "route", "want a label: mplsnode -f mpls route %s LABEL ...", verb)
	case len(words) == 0:
		return usageError(stderr, "route", "want a prefix: mplsnode route %s PREFIX ...", verb)
	case verb == "del" && len(words) > 1:
		return usageError(stderr, "route", "del takes only the prefix or label, got %q after it", words[1])
	}
	cmd := "route " + verb + " " + strings.Join(words, " ")
	if mplsFamily {
		cmd = "mpls " + cmd
	}
	body, code := query(ctx, "route", fs.Lookup("socket").Value.String(), cmd, stderr)
	if code != exitOK {
		fmt.Fprintf(stderr, "  (the command sent: %q)\n", cmd)
		return code
	}
	if fs.Lookup("json").Value.String() == "true" {
		stdout.Write(body)
		return exitOK
	}
	var ch node.RouteChange
	if !decode(body, &ch, stderr) {
		return exitFailure
	}
	fmt.Fprintf(stdout, "%s: %s\n", ch.Change, ch.Route)
	return exitOK
}

// query sends one command to the control socket and returns the answer,
// or prints the failure (as command name) and returns its exit code.
func query(ctx context.Context, name, socket, cmd string, stderr io.Writer) ([]byte, int) {
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	body, err := controlCall(ctx, socket, cmd)
	if err != nil {
		return nil, controlError(stderr, name, socket, err)
	}
	return body, exitOK
}

func decode(body []byte, v any, stderr io.Writer) bool {
	if err := json.Unmarshal(body, v); err != nil {
		fmt.Fprintf(stderr, "mplsnode: bad answer from the node: %v\n", err)
		return false
	}
	return true
}

func localLabel(l uint32) string {
	if l == 0 {
		return ""
	}
	return fmt.Sprint(l)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
