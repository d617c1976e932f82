package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/mplsnode/mplsnode/bgp"
	"github.com/mplsnode/mplsnode/node"
)

func init() {
	register(command{name: "bgp", summary: "show a running node's BGP sessions and routes (summary, neighbor, routes)", run: runBGP})
	register(command{name: "route", summary: "show a running node's routes (route show; -f mpls route show for the ILM)", run: runRoute})
}

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

Prints a running node's IP routes (static from its config file and those
BGP installed, each with its protocol and administrative distance: static
1 wins over bgp 20), or with -f mpls its incoming label map (ILM), in
iproute2's words.

Examples:

	mplsnode route show
	mplsnode -f mpls route show --json

Exit codes: 0 ok, 1 the node cannot be reached, 2 usage error.

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
		fmt.Fprintf(stderr, "mplsnode bgp: want summary, neighbor or routes, got %q\n", what)
		return exitUsage
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
	switch what {
	case "summary":
		var s bgp.Summary
		if !decode(body, &s, stderr) {
			return exitFailure
		}
		fmt.Fprintf(tw, "AS %d, router-id %s, labels %d-%d: %d of %d bound\n", s.AS, s.RouterID, s.LabelLow, s.LabelHigh, s.LabelsUsed, s.LabelsSize)
		fmt.Fprintf(tw, "routes %d, installed %d, unresolved next hop %d\n\n", s.Routes, s.Installed, s.Unresolved)
		fmt.Fprintln(tw, "NEIGHBOR\tAS\tSTATE\tSINCE\tRECEIVED\tINSTALLED")
		for _, n := range s.Neighbors {
			var rx, in int
			for _, f := range n.Families {
				rx += f.Received
				in += f.Installed
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\n", n.Address, n.RemoteAS, n.State, n.Since, rx, in)
		}
	case "neighbor":
		var ns []bgp.NeighborStatus
		if !decode(body, &ns, stderr) {
			return exitFailure
		}
		fmt.Fprintln(tw, "NEIGHBOR\tAS\tROUTER-ID\tSTATE\tFAMILY\tRECEIVED\tACCEPTED\tINSTALLED\tADVERTISED")
		for _, n := range ns {
			for _, f := range n.Families {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", n.Address, n.RemoteAS, dash(n.RouterID), n.State, f.Family, f.Received, f.Accepted, f.Installed, f.Advertised)
			}
		}
	case "routes":
		var rs []bgp.RouteStatus
		if !decode(body, &rs, stderr) {
			return exitFailure
		}
		fmt.Fprintln(tw, "PREFIX\tFROM\tNEXT-HOP\tLABELS\tINSTALLED\tPUSH\tVIA\tDEV\tLOCAL-LABEL")
		for _, r := range rs {
			from := r.Neighbor
			if r.Local {
				from = "local"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%s\t%s\t%s\t%s\n", r.Prefix, from, dash(r.NextHop), labels(r.Labels),
				r.Installed, labels(r.Push), dash(r.Via), dash(r.Dev), dash(localLabel(r.LocalLabel)))
		}
	}
	return exitOK
}

func runRoute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("route", routeUsage, stderr)
	socket := fs.String("socket", node.DefaultControlSocket, "control socket `PATH` of the running node")
	asJSON := fs.Bool("json", false, "print the raw JSON document")
	mplsFamily := fs.Bool("mpls", false, "show the incoming label map (as -f mpls)")
	if len(args) == 0 || args[0] != "show" {
		if len(args) > 0 && (args[0] == "add" || args[0] == "del") {
			fmt.Fprintln(stderr, "mplsnode route: only show is available; change routes in the config file and send SIGHUP")
		} else {
			fmt.Fprintln(stderr, "mplsnode route: want show")
		}
		return exitUsage
	}
	if code, stop := parseFlags(fs, args[1:], stdout, stderr); stop {
		return code
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
	if *mplsFamily {
		var es []node.ILMEntry
		if !decode(body, &es, stderr) {
			return exitFailure
		}
		for _, e := range es {
			fmt.Fprintln(stdout, e.String())
		}
		return exitOK
	}
	var rs []node.RouteEntry
	if !decode(body, &rs, stderr) {
		return exitFailure
	}
	for _, r := range rs {
		fmt.Fprintln(stdout, r.String())
	}
	return exitOK
}

// query sends one command to the control socket and returns the answer.
func query(ctx context.Context, name, socket, cmd string, stderr io.Writer) ([]byte, int) {
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			fmt.Fprintf(stderr, "mplsnode %s: no node answers on %s: is `mplsnode run` running? (choose the socket with --socket PATH)\n", name, socket)
		} else {
			fmt.Fprintf(stderr, "mplsnode %s: %v\n", name, err)
		}
		return nil, exitFailure
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	body, err := func() ([]byte, error) {
		if _, err := io.WriteString(c, cmd+"\n"); err != nil {
			return nil, err
		}
		return io.ReadAll(c)
	}()
	if err != nil {
		fmt.Fprintf(stderr, "mplsnode %s: %v\n", name, err)
		return nil, exitFailure
	}
	if msg, ok := strings.CutPrefix(string(body), "error: "); ok {
		fmt.Fprintf(stderr, "mplsnode %s: node answered: %s\n", name, strings.TrimSpace(msg))
		return nil, exitFailure
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

func labels(ls []uint32) string {
	if len(ls) == 0 {
		return "-"
	}
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = fmt.Sprint(l)
	}
	return strings.Join(s, "/")
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
