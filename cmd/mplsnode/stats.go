package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/mplsnode/mplsnode/node"
)

const statsUsage = `usage: mplsnode stats [--socket PATH] [--json | --drops]

Asks a running node (mplsnode run) for its counters over its control
socket and prints them: per link the mode its lower link runs (link_mode
ring: memory-mapped packet rings, mmsg: recvmmsg/sendmmsg, what "mode auto"
chose; - for a TAP) and its fanout queues, rx/tx frames, drops by reason
(every reason, zero ones included), FIB pushes and ILM hits; the label switch counters;
the userspace stack's IP and TCP counters, each labelled with its name in
the --json document (docs/METRICS.md). The control socket is root-only
(mode 0600). --drops prints only the drop counters that are not
zero, one "where reason count" a line, or "no drops", for scripts that
must see nothing was lost.

Examples:

	mplsnode stats
	ip netns exec ns1 mplsnode stats --socket /run/mplsnode-ns1.sock --json
	mplsnode stats --drops || echo "the node dropped frames"

Exit codes: 0 ok, 1 the node cannot be reached or answered an error,
2 usage error, 3 --drops found a drop counter that is not zero.

Options:
`

// statsTimeout bounds the whole request: the node answers from memory, so
// a healthy node takes milliseconds.
const statsTimeout = 5 * time.Second

func runStats(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("stats", statsUsage, stderr)
	socket := fs.String("socket", node.DefaultControlSocket, "control socket `PATH` of the running node")
	asJSON := fs.Bool("json", false, "print the raw JSON document")
	dropsOnly := fs.Bool("drops", false, "print only the non-zero drop counters; exit 3 if there is one")
	if code, stop := parseFlags(fs, args, stdout, stderr); stop {
		return code
	}
	if *asJSON && *dropsOnly {
		return usageError(stderr, "stats", "--json and --drops are exclusive")
	}
	body, err := fetchStats(ctx, *socket)
	if err != nil {
		return controlError(stderr, "stats", *socket, err)
	}
	if *asJSON {
		stdout.Write(body)
		return exitOK
	}
	var r node.Report
	if err := json.Unmarshal(body, &r); err != nil {
		fmt.Fprintf(stderr, "mplsnode stats: bad answer from %s: %v\n", *socket, err)
		return exitFailure
	}
	if *dropsOnly {
		drops := nonZeroDrops(&r)
		if len(drops) == 0 {
			fmt.Fprintln(stdout, "no drops")
			return exitOK
		}
		for _, d := range drops {
			fmt.Fprintln(stdout, d)
		}
		return exitDrops
	}
	printReport(stdout, &r)
	return exitOK
}

// exitDrops is stats --drops' exit code when something was dropped.
const exitDrops = 3

// nonZeroDrops lists the report's non-zero drop counters as "where reason
// count": a link's name, "label-switch", "ip" or "lsp-ping".
func nonZeroDrops(r *node.Report) []string {
	var out []string
	add := func(where string, m map[string]uint64) {
		for _, k := range sortedKeys(m) {
			if m[k] != 0 {
				out = append(out, fmt.Sprintf("%s %s %d", where, k, m[k]))
			}
		}
	}
	for _, l := range r.Links {
		add(l.Name, l.Drops)
	}
	add("label-switch", r.LabelSwitch.Drops)
	add("ip", r.IP.Drops)
	add("lsp-ping", r.LSPPing.Drops)
	return out
}

// fetchStats sends `stats` to the control socket and returns the answer.
func fetchStats(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	return controlCall(ctx, path, "stats")
}

// printReport writes r as aligned tables. Every counter is labelled with
// its name in the JSON document (stats --json) and each section with the
// JSON object it comes from, so the two forms use the same names.
func printReport(w io.Writer, r *node.Report) {
	// One column a link, one row a counter: the table stays narrow however
	// many counters a link has.
	fmt.Fprintln(w, "links")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "name\t")
	for _, l := range r.Links {
		fmt.Fprintf(tw, "%s\t", l.Name)
	}
	fmt.Fprintln(tw)
	for _, c := range linkColumns {
		fmt.Fprintf(tw, "%s\t", c.name)
		for i := range r.Links {
			fmt.Fprintf(tw, "%s\t", c.value(&r.Links[i]))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()

	fmt.Fprintln(w, "\nlinks drops by reason")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "reason\t")
	for _, l := range r.Links {
		fmt.Fprintf(tw, "%s\t", l.Name)
	}
	fmt.Fprintln(tw)
	reasons := map[string]struct{}{}
	for _, l := range r.Links {
		for k := range l.Drops {
			reasons[k] = struct{}{}
		}
	}
	for _, k := range sortedKeys(reasons) {
		fmt.Fprintf(tw, "%s\t", k)
		for _, l := range r.Links {
			fmt.Fprintf(tw, "%d\t", l.Drops[k])
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()

	s := r.LabelSwitch
	printSection(w, "label_switch (the userspace forwarding plane)", []namedCount{{"forwarded", s.Forwarded}, {"swapped", s.Swapped},
		{"popped_ip", s.PoppedIP}, {"popped_labelled", s.PoppedLabelled}, {"queued", s.Queued},
		{"icmp_sent", s.ICMPSent}, {"icmp_via_lsp", s.ICMPViaLSP}, {"fragmented", s.Fragmented}, {"coalesced", s.Coalesced},
		{"ip_forwarded", s.IPForwarded}, {"pushed", s.Pushed}},
		s.Drops, sortedKeys(s.Drops))
	ip := r.IP
	printSection(w, "ip (the userspace stack)", []namedCount{{"packets_received", ip.PacketsReceived},
		{"packets_delivered", ip.PacketsDelivered}, {"packets_sent", ip.PacketsSent}, {"icmp_errors_sent", ip.ICMPErrorsSent}},
		ip.Drops, node.IPDropReasons)
	t := r.TCP
	printSection(w, "tcp", []namedCount{{"active_opens", t.ActiveOpens}, {"passive_opens", t.PassiveOpens},
		{"current_established", t.CurrentEstablished}, {"failed_attempts", t.FailedAttempts},
		{"established_resets", t.EstablishedResets}, {"segments_sent", t.SegmentsSent},
		{"segments_received", t.SegmentsReceived}, {"invalid_segments_received", t.InvalidSegmentsReceived},
		{"retransmits", t.Retransmits}, {"timeouts", t.Timeouts}, {"checksum_errors", t.ChecksumErrors}},
		nil, nil)
	printXDP(w, r.XDP)
	printLSPPing(w, &r.LSPPing)
	c := r.Control
	printSection(w, "control (the control socket)", []namedCount{{"closed_idle", c.ClosedIdle}, {"busy", c.Busy},
		{"accept_errors", c.AcceptErrors}}, nil, nil)

	printSection(w, "runtime", []namedCount{{"goroutines", uint64(r.Runtime.Goroutines)},
		{"heap_objects_bytes", r.Runtime.HeapObjectsBytes}}, nil, nil)
}

// linkColumns are the rows of the links table, named as in the JSON
// document.
var linkColumns = []struct {
	name  string
	value func(l *node.LinkReport) string
}{
	{"link_mode", func(l *node.LinkReport) string { return cmp.Or(l.LinkMode, "-") }},
	{"queues", func(l *node.LinkReport) string { return fmt.Sprint(l.Queues) }},
	{"rx_frames", func(l *node.LinkReport) string { return fmt.Sprint(l.RXFrames) }},
	{"tx_frames", func(l *node.LinkReport) string { return fmt.Sprint(l.TXFrames) }},
	{"rx_delivered", func(l *node.LinkReport) string { return fmt.Sprint(l.RXDelivered) }},
	{"rx_forwarded", func(l *node.LinkReport) string { return fmt.Sprint(l.RXForwarded) }},
	{"tx_packets", func(l *node.LinkReport) string { return fmt.Sprint(l.TXPackets) }},
	{"gso_packets", func(l *node.LinkReport) string { return fmt.Sprint(l.GSOPackets) }},
	{"stack_rx_bytes", func(l *node.LinkReport) string { return fmt.Sprint(l.StackRXBytes) }},
	{"stack_tx_bytes", func(l *node.LinkReport) string { return fmt.Sprint(l.StackTXBytes) }},
	{"ilm_hits", func(l *node.LinkReport) string { return fmt.Sprint(l.ILMHits) }},
	{"fib_pushes", func(l *node.LinkReport) string { return fmt.Sprint(l.FIBPushes) }},
	{"rx_blocks", func(l *node.LinkReport) string { return fmt.Sprint(l.RXBlocks) }},
	{"tx_ring_full", func(l *node.LinkReport) string { return fmt.Sprint(l.TXRingFull) }},
	{"busy_polls", func(l *node.LinkReport) string { return fmt.Sprint(l.BusyPolls) }},
	{"busy_poll_hits", func(l *node.LinkReport) string { return fmt.Sprint(l.BusyPollHits) }},
	{"busy_poll_us", func(l *node.LinkReport) string { return fmt.Sprint(l.BusyPollUS) }},
	{"rx_coalesced", func(l *node.LinkReport) string { return fmt.Sprint(l.RXCoalesced) }},
	{"rx_checksum_partial_form", func(l *node.LinkReport) string { return fmt.Sprint(l.RXChecksumPartialForm) }},
	{"rx_fragments_held", func(l *node.LinkReport) string { return fmt.Sprint(l.RXFragmentsHeld) }},
	{"rx_ring_frames", func(l *node.LinkReport) string { return fmt.Sprint(l.RXRingFrames) }},
}

// namedCount is one line of a printed section.
type namedCount struct {
	name  string
	count uint64
}

// printSection writes a titled block of counters, then, when order is not
// empty, a "drops" block with the drops of order (in that order), one
// "REASON COUNT" a line.
func printSection(w io.Writer, title string, counts []namedCount, drops map[string]uint64, order []string) {
	fmt.Fprintf(w, "\n%s\n", title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range counts {
		fmt.Fprintf(tw, "  %s\t%d\n", c.name, c.count)
	}
	if len(order) > 0 {
		fmt.Fprintln(tw, "  drops")
	}
	for _, k := range order {
		fmt.Fprintf(tw, "    %s\t%d\n", k, drops[k])
	}
	tw.Flush()
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// claimObservability listens on the control socket and the metrics
// address (either "" for off) before the node opens any link: a second
// node on the same socket or port fails here (node.ErrInUse, naming the
// first one's pid) instead of forwarding next to it. On error nothing is
// left listening.
func claimObservability(ctlSock, metricsAddr string) (ctl, metrics net.Listener, err error) {
	if ctlSock != "" {
		if ctl, err = node.ListenControl(ctlSock); err != nil {
			if !errors.Is(err, node.ErrInUse) {
				err = fmt.Errorf("%w (choose another with --control-socket PATH, or turn it off with --control-socket \"\")", err)
			}
			return nil, nil, err
		}
	}
	if metricsAddr != "" {
		if metrics, err = node.ListenMetrics(metricsAddr); err != nil {
			if ctl != nil {
				ctl.Close()
			}
			return nil, nil, err
		}
	}
	return ctl, metrics, nil
}

// startObservability serves the control socket and the metrics on the
// listeners claimObservability returned (nil ones are off) until stop is
// called.
func startObservability(ctx context.Context, n *node.Node, ctl, metrics net.Listener, logger *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	serve := func(what string, ln net.Listener, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			where := ln.Addr().String()
			logger.Info(what+" listening", "addr", where)
			if err := f(ctx); err != nil {
				logger.Error(what+" stopped", "addr", where, "err", err)
			}
		}()
	}
	if ctl != nil {
		serve("control socket", ctl, func(ctx context.Context) error { return node.ServeControlListener(ctx, n, ctl) })
	}
	if metrics != nil {
		serve("metrics", metrics, func(ctx context.Context) error { return node.ServeMetricsListener(ctx, n, metrics) })
	}
	return func() {
		cancel()
		wg.Wait()
	}
}
