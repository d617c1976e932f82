package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"text/tabwriter"

	"github.com/mplsnode/mplsnode/lspping"
	"github.com/mplsnode/mplsnode/node"
)

const pingUsage = `usage: mplsnode ping mpls ipv4|ipv6 PREFIX [--fec ldp|bgp|generic|nil] [-c N]
       [-s SIZE] [--exp TC] [--ttl N] [--reply-mode 2] [-i MS] [-W MS]
       [--socket PATH] [--json]

Checks the LSP of PREFIX with MPLS echo requests (LSP ping, RFC 8029),
sent by a running node (mplsnode run, over its control socket) from its
own address, down the label stack its FIB gives PREFIX, to a 127/8
destination (::ffff:127/104 for IPv6) so that no IP router can carry it
past a broken LSR. Each request carries the Target FEC (--fec: the LDP
prefix FEC most routers answer, the BGP labeled prefix, the generic
prefix, or a Nil FEC with the route's label); the node that answers says
whether its data plane matches: return code 3 "Replying router is an
egress for the FEC" is the answer of a working LSP.

One line a probe: a code letter (! egress, L label switched, N no label
entry, F no mapping for the FEC, D downstream mismatch, M malformed,
m TLV not understood, . no reply, Q not sent, X another code), the
sequence number, the replying address, the return code in the RFC's
words and the round-trip time; then a summary.

Examples:

	mplsnode ping mpls ipv4 10.10.10.10/32
	mplsnode ping mpls ipv4 10.10.10.10/32 --fec bgp -c 10 -s 200 --exp 5
	ip netns exec ns0 mplsnode ping mpls ipv4 10.10.10.10/32 --socket /run/ns0.sock --json

Exit codes: 0 every request got return code 3, 1 some did not (or the
node cannot be reached, or has no labelled route for PREFIX), 2 usage
error.

Options:
`

const tracerouteUsage = `usage: mplsnode traceroute mpls ipv4|ipv6 PREFIX [--fec ldp|bgp|generic|nil]
       [--ttl-max N] [--multipath] [--exp TC] [-W MS] [--socket PATH] [--json]

Traces the LSP of PREFIX hop by hop with MPLS echo requests (LSP
traceroute, RFC 8029 §4.6), sent by a running node over its control
socket: label TTL 1, 2, ... each request carrying the Downstream Detailed
Mapping the previous hop answered. Each LSR whose label TTL runs out
answers with its return code and its downstream: the next hop and the
labels it pushes (3 is the implicit null: the label popped); the egress
answers 3. A hop answering another code is where the LSP breaks (N: no
label entry for the label it received, D: it received a label or was
reached from a hop its upstream did not name).

With --multipath every next hop is followed: the node's own multipath
route, and each multipath label route on the way, where each LSR says
which of 32 127/8 destinations take which hop.

Examples:

	mplsnode traceroute mpls ipv4 10.10.10.10/32
	mplsnode traceroute mpls ipv4 10.10.10.10/32 --multipath --json

Exit codes: 0 the egress answered (on every path), 1 it did not (a hop
broke the LSP, no reply, or the node cannot be reached), 2 usage error.

Options:
`

// lspFlags are the options both commands take.
type lspFlags struct {
	socket string
	fec    string
	asJSON bool
	exp    uint
	waitMS int
}

func (f *lspFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.socket, "socket", node.DefaultControlSocket, "control socket `PATH` of the running node")
	fs.StringVar(&f.fec, "fec", "ldp", "Target FEC `TYPE`: ldp, bgp, generic or nil")
	fs.BoolVar(&f.asJSON, "json", false, "print the result as JSON")
	fs.UintVar(&f.exp, "exp", 0, "traffic class `TC` (0-7) of the labels")
	fs.IntVar(&f.waitMS, "W", 2000, "`MS` to wait for each reply")
}

// lspArgs splits args into the words `mpls ipv4|ipv6 PREFIX` and the
// options, parses the options, and checks both.
func lspArgs(name string, fs *flag.FlagSet, f *lspFlags, args []string, stdout, stderr io.Writer) (netip.Prefix, int, bool) {
	var words []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") && len(words) < 3 {
		words, args = append(words, args[0]), args[1:]
	}
	if code, stop := parseFlags(fs, args, stdout, stderr); stop {
		return netip.Prefix{}, code, true
	}
	bad := func(format string, a ...any) (netip.Prefix, int, bool) {
		fmt.Fprintf(stderr, "mplsnode %s: "+format+"\n\n", append([]any{name}, a...)...)
		fs.SetOutput(stderr)
		fs.Usage()
		return netip.Prefix{}, exitUsage, true
	}
	if len(words) != 3 || words[0] != "mpls" || (words[1] != "ipv4" && words[1] != "ipv6") {
		return bad("want `mpls ipv4 PREFIX` or `mpls ipv6 PREFIX` first, got %q", strings.Join(words, " "))
	}
	p, err := netip.ParsePrefix(words[2])
	if err != nil {
		a, aerr := netip.ParseAddr(words[2])
		if aerr != nil {
			return bad("%q is not a prefix such as 10.10.10.10/32", words[2])
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Is4() != (words[1] == "ipv4") {
		return bad("%s is not an %s prefix", p, words[1])
	}
	switch f.fec {
	case "ldp", "bgp", "generic", "nil":
	default:
		return bad("--fec %q: want ldp, bgp, generic or nil", f.fec)
	}
	if f.exp > 7 {
		return bad("--exp %d: a traffic class is 0 to 7", f.exp)
	}
	if f.waitMS <= 0 {
		return bad("-W %d: want a positive number of milliseconds", f.waitMS)
	}
	return p.Masked(), exitOK, false
}

func runPing(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("ping", pingUsage, stderr)
	var f lspFlags
	f.add(fs)
	count := fs.Int("c", 5, "`N` requests")
	size := fs.Int("s", 0, "pad each echo message to `SIZE` bytes")
	ttl := fs.Uint("ttl", 255, "label TTL `N` (1-255)")
	mode := fs.Uint("reply-mode", 2, "reply `MODE`: 2 reply by UDP, 3 by UDP with router alert, 1 no reply")
	interval := fs.Int("i", 1000, "`MS` between requests")
	p, code, stop := lspArgs("ping", fs, &f, args, stdout, stderr)
	if stop {
		return code
	}
	switch {
	case *count < 1 || *count > 100000:
		return usageError(stderr, "ping", "-c %d: want 1 to 100000", *count)
	case *ttl < 1 || *ttl > 255:
		return usageError(stderr, "ping", "--ttl %d: want 1 to 255", *ttl)
	case *mode < 1 || *mode > 3:
		return usageError(stderr, "ping", "--reply-mode %d: want 1, 2 or 3", *mode)
	case *size < 0 || *size > 9000:
		return usageError(stderr, "ping", "-s %d: want 0 to 9000", *size)
	case *interval < 0:
		return usageError(stderr, "ping", "-i %d: want 0 or more milliseconds", *interval)
	}
	req := node.LSPRequest{Prefix: p.String(), FEC: f.fec, Count: *count, IntervalMS: max(*interval, 1), TimeoutMS: f.waitMS,
		Size: *size, TC: uint8(f.exp), TTL: uint8(*ttl), ReplyMode: uint8(*mode)}
	res, code := lspCall(ctx, "ping", "ping", &f, &req, stdout, stderr, func(w io.Writer, res *node.LSPPingResult) {
		printPing(w, res, f.waitMS)
	})
	if res == nil {
		return code
	}
	if res.Egress != res.Sent || res.Sent == 0 {
		return exitFailure
	}
	return exitOK
}

func runTraceroute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("traceroute", tracerouteUsage, stderr)
	var f lspFlags
	f.add(fs)
	maxTTL := fs.Uint("ttl-max", 30, "largest label TTL `N` tried (1-255)")
	multipath := fs.Bool("multipath", false, "follow every next hop (ECMP)")
	p, code, stop := lspArgs("traceroute", fs, &f, args, stdout, stderr)
	if stop {
		return code
	}
	if *maxTTL < 1 || *maxTTL > 255 {
		return usageError(stderr, "traceroute", "--ttl-max %d: want 1 to 255", *maxTTL)
	}
	req := node.LSPRequest{Prefix: p.String(), FEC: f.fec, TimeoutMS: f.waitMS, TC: uint8(f.exp),
		MaxTTL: uint8(*maxTTL), Multipath: *multipath}
	res, code := lspCall(ctx, "traceroute", "trace", &f, &req, stdout, stderr, func(w io.Writer, res *node.LSPTraceResult) {
		printTrace(w, res, int(*maxTTL))
	})
	if res == nil {
		return code
	}
	ok := len(res.Paths) > 0
	for _, pt := range res.Paths {
		ok = ok && pt.Reached
	}
	if !ok {
		return exitFailure
	}
	return exitOK
}

// lspCall sends `lsp VERB JSON` to the control socket and decodes the
// answer: with --json it writes the answer as it came, else print shows
// it. A failure is printed as command name's and gives a nil result and
// the exit code. The node bounds the command's time; ctx (the user's ^C)
// ends it early.
func lspCall[T any](ctx context.Context, name, verb string, f *lspFlags, req *node.LSPRequest, stdout, stderr io.Writer, print func(io.Writer, *T)) (*T, int) {
	arg, err := json.Marshal(req)
	var body []byte
	if err == nil {
		body, err = controlCall(ctx, f.socket, fmt.Sprintf("lsp %s %s", verb, arg))
	}
	if err != nil {
		return nil, controlError(stderr, name, f.socket, err)
	}
	res := new(T)
	if err := json.Unmarshal(body, res); err != nil {
		fmt.Fprintf(stderr, "mplsnode %s: bad answer from %s: %v\n", name, f.socket, err)
		return nil, exitFailure
	}
	if f.asJSON {
		stdout.Write(body)
	} else {
		print(stdout, res)
	}
	return res, exitOK
}

// codeLetter is the one-letter code operators know from LSP ping.
func codeLetter(p *node.LSPProbe) string {
	switch {
	case p.Error != "":
		return "Q"
	case !p.Replied:
		return "."
	}
	switch lspping.ReturnCode(p.Code) {
	case lspping.CodeEgress:
		return "!"
	case lspping.CodeLabelSwitched, lspping.CodeLabelSwitchedFECChange:
		return "L"
	case lspping.CodeNoLabelEntry:
		return "N"
	case lspping.CodeNoMapping:
		return "F"
	case lspping.CodeWrongLabel:
		return "f"
	case lspping.CodeDownstreamMismatch:
		return "D"
	case lspping.CodeMalformed:
		return "M"
	case lspping.CodeTLVNotUnderstood:
		return "m"
	case lspping.CodeSwitchedNoMPLS:
		return "B"
	case lspping.CodePrematureTermination:
		return "p"
	}
	return "X"
}

func pathText(p node.LSPPath) string {
	return fmt.Sprintf("via %s dev %s labels %s", p.Via, p.Device, labelsText(p.Labels))
}

func labelsText(l []uint32) string {
	if len(l) == 0 {
		return "none"
	}
	s := make([]string, len(l))
	for i, x := range l {
		s[i] = fmt.Sprint(x)
		if x == 3 {
			s[i] = "3 (implicit-null)"
		}
	}
	return strings.Join(s, "/")
}

func printPing(w io.Writer, r *node.LSPPingResult, waitMS int) {
	fmt.Fprintf(w, "Sending %d MPLS echo requests for %s %s, timeout %d ms\n", len(r.Probes), r.FEC, pathText(r.Path), waitMS)
	var lo, hi, sum float64
	for i := range r.Probes {
		p := &r.Probes[i]
		switch {
		case p.Error != "":
			fmt.Fprintf(w, "Q seq=%d not sent: %s\n", p.Seq, p.Error)
		case !p.Replied:
			fmt.Fprintf(w, ". seq=%d no reply\n", p.Seq)
		default:
			fmt.Fprintf(w, "%s seq=%d reply from %s: return code %d (%s), rtt %.3f ms\n", codeLetter(p), p.Seq, p.Replier, p.Code, p.Words, p.RTTMillis)
			if lo == 0 || p.RTTMillis < lo {
				lo = p.RTTMillis
			}
			hi = max(hi, p.RTTMillis)
			sum += p.RTTMillis
		}
	}
	fmt.Fprintf(w, "--- %s lsp ping statistics ---\n", r.FEC)
	fmt.Fprintf(w, "%d requests sent, %d replies, %d egress (return code 3), %d%% not as expected", r.Sent, r.Replies, r.Egress,
		100*(r.Sent-r.Egress)/max(r.Sent, 1))
	if r.Replies > 0 {
		fmt.Fprintf(w, ", rtt min/avg/max = %.3f/%.3f/%.3f ms", lo, sum/float64(r.Replies), hi)
	}
	fmt.Fprintln(w)
}

func printTrace(w io.Writer, r *node.LSPTraceResult, maxTTL int) {
	for i, pt := range r.Paths {
		if len(r.Paths) > 1 {
			fmt.Fprintf(w, "path %d (destination %s):\n", i+1, pt.Destination)
		}
		fmt.Fprintf(w, "Tracing MPLS LSP for %s %s, max TTL %d\n", r.FEC, pathText(pt.Path), maxTTL)
		for j := range pt.Hops {
			h := &pt.Hops[j]
			if !h.Replied {
				fmt.Fprintf(w, "%s %2d *\n", codeLetter(h), h.TTL)
				continue
			}
			fmt.Fprintf(w, "%s %2d %s  rtt %.3f ms  return code %d (%s)\n", codeLetter(h), h.TTL, h.Replier, h.RTTMillis, h.Code, h.Words)
			for _, d := range h.Downstreams {
				extra := ""
				if d.Destinations > 0 {
					extra = fmt.Sprintf("  (%d of the destinations asked)", d.Destinations)
				}
				fmt.Fprintf(w, "       downstream %s mtu %d labels %s%s\n", d.Address, d.MTU, labelsText(d.Labels), extra)
			}
		}
		switch {
		case pt.Reached:
			fmt.Fprintf(w, "--- egress reached at hop %d\n", len(pt.Hops))
		case pt.BrokenAt > 0:
			h := pt.Hops[len(pt.Hops)-1]
			fmt.Fprintf(w, "--- LSP breaks at hop %d: %s answered return code %d (%s)\n", pt.BrokenAt, h.Replier, h.Code, h.Words)
		default:
			fmt.Fprintf(w, "--- egress not reached\n")
		}
	}
}

// printLSPPing writes the MPLS echo responder's counters (stats): the
// requests by where the planes stopped them, the replies by return code,
// the drops by reason.
func printLSPPing(w io.Writer, r *node.LSPPingReport) {
	fmt.Fprintf(w, "\nlsp_ping (the MPLS echo responder)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  requests")
	for _, k := range []string{"egress", "ttl_expired", "no_label_entry"} {
		fmt.Fprintf(tw, "    %s\t%d\n", k, r.Requests[k])
	}
	fmt.Fprintln(tw, "  replies")
	for _, c := range lspping.Codes() {
		fmt.Fprintf(tw, "    %s\t%d\n", c, r.Replies[c.String()])
	}
	fmt.Fprintln(tw, "  drops")
	for _, k := range node.LSPPingDropReasons {
		fmt.Fprintf(tw, "    %s\t%d\n", k, r.Drops[k])
	}
	tw.Flush()
}
