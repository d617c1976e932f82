package node

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"gvisor.dev/gvisor/pkg/tcpip"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mplsnode/mplsnode/forward"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/stack"
)

// Report is the counters document of a running node: what the control
// socket answers to `stats` and what `mplsnode stats` prints. Every drop
// reason is present, zero ones included, so readers see they are zero.
type Report struct {
	// Links holds each link's counters, in configuration order.
	Links []LinkReport `json:"links"`
	// LabelSwitch holds the label switch counters.
	LabelSwitch SwitchReport `json:"label_switch"`
	// IP holds the userspace stack's IP counters: plain IP it forwarded
	// between links (not through the label switch) and what it discarded.
	IP IPReport `json:"ip"`
	// TCP holds the userspace stack's TCP counters.
	TCP TCPReport `json:"tcp"`
	// Runtime holds the node process's Go runtime figures, where a leak
	// shows first.
	Runtime RuntimeReport `json:"runtime"`
	// XDP holds the XDP label switch's state and counters; nil unless
	// the node runs it (`set forward xdp`, or a forwarding node's default).
	XDP *XDPReport `json:"xdp,omitempty"`
	// Control holds what the control socket met besides commands.
	Control ControlReport `json:"control"`
	// LSPPing holds the MPLS echo responder's counters (LSP ping and
	// traceroute, RFC 8029).
	LSPPing LSPPingReport `json:"lsp_ping"`
}

// ControlReport is what the control socket (ServeControlListener) met
// besides commands: clients that said nothing, clients that had to wait
// for a free connection, and accept failures it survived
// (Node.ControlReport). The counts run while a control socket serves the
// node; they are zero when none does (and start again from zero when one
// starts again). Each kind is also logged, at most one line every 5 s.
// They are not part of Report (the `stats` document): `mplsnode stats`
// prints every key of that document as text, and its printer
// (cmd/mplsnode) has no place for these yet.
type ControlReport struct {
	// ClosedIdle counts connections closed because the client sent no
	// command line within the idle timeout (2 s).
	ClosedIdle uint64 `json:"closed_idle"`
	// Busy counts the times all MaxControlConns (64) connections were
	// open at once, so that new clients waited in the socket's backlog
	// until one closed.
	Busy uint64 `json:"busy"`
	// AcceptErrors counts accept failures the socket retried after a
	// pause (too many open files: EMFILE, ENFILE; no memory: ENOBUFS,
	// ENOMEM; ECONNABORTED).
	AcceptErrors uint64 `json:"accept_errors"`
}

// RuntimeReport is the Go runtime's view of the process the node runs in
// (the whole process: an embedder's goroutines and heap count too).
type RuntimeReport struct {
	// Goroutines is the number of goroutines when the report was made.
	Goroutines int `json:"goroutines"`
	// HeapObjectsBytes is the memory held by live and not yet swept heap
	// objects (runtime/metrics /memory/classes/heap/objects:bytes).
	HeapObjectsBytes uint64 `json:"heap_objects_bytes"`
}

// runtimeReport reads the figures without stopping the world.
func runtimeReport() RuntimeReport {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	r := RuntimeReport{Goroutines: runtime.NumGoroutine()}
	if s[0].Value.Kind() == metrics.KindUint64 {
		r.HeapObjectsBytes = s[0].Value.Uint64()
	}
	return r
}

// IPReport is the userspace stack's IP layer (gVisor's tcpip.IPStats, IPv4
// and IPv6 together): packets in and out, ICMP errors it sent, and every
// packet it discarded, by reason.
type IPReport struct {
	// PacketsReceived counts IP packets the links handed to the stack.
	PacketsReceived uint64 `json:"packets_received"`
	// PacketsDelivered counts packets delivered to the stack's transports.
	PacketsDelivered uint64 `json:"packets_delivered"`
	// PacketsSent counts packets the stack sent, forwarded ones included.
	PacketsSent uint64 `json:"packets_sent"`
	// ICMPErrorsSent counts ICMP and ICMPv6 errors the stack sent
	// (destination unreachable, fragmentation needed, packet too big,
	// time exceeded, parameter problem).
	ICMPErrorsSent uint64 `json:"icmp_errors_sent"`
	// Drops counts discarded packets by reason (IPDropReasons), every
	// reason present.
	Drops map[string]uint64 `json:"drops"`
}

// LowerDropReasons are the LinkReport.Drops keys for frames the lower link
// (AF_PACKET socket, TAP device) lost, next to the endpoint's own reasons:
//
//	lower_rx_overflow    the socket's receive queue was full: the node did
//	                     not read fast enough (PACKET_STATISTICS drops)
//	lower_rx_truncated   a frame longer than the receive buffer
//	lower_rx_error       a failed receive call
//	lower_tx_queue_full  the device queue refused a frame (ENOBUFS)
var LowerDropReasons = []string{"lower_rx_overflow", "lower_rx_truncated", "lower_rx_error", "lower_tx_queue_full"}

// IPDropReasons are the IPReport.Drops keys, in display order:
//
//	forward_unroutable      no route to the destination
//	forward_ttl_exceeded    TTL or hop limit ran out (ICMP time exceeded sent)
//	forward_packet_too_big  larger than the egress route's MTU (ICMP sent)
//	forward_host_unreachable  the next hop did not answer ARP/NDP
//	forward_link_local      link-local source or destination, not forwarded
//	forward_no_buffer_space the egress link was full
//	forward_other           any other forwarding error
//	invalid_destination     not for the node and forwarding is off
//	invalid_source          a source address no one may use
//	malformed               bad header or fragment
//	send_error              the stack could not send a packet it made
var IPDropReasons = []string{
	"forward_unroutable", "forward_ttl_exceeded", "forward_packet_too_big",
	"forward_host_unreachable", "forward_link_local", "forward_no_buffer_space",
	"forward_other", "invalid_destination", "invalid_source", "malformed", "send_error",
}

// ipReport reads the stack's IP and ICMP counters.
func ipReport(st tcpip.Stats) IPReport {
	f := st.IP.Forwarding
	named := []uint64{
		f.Unrouteable.Value(), f.ExhaustedTTL.Value(), f.PacketTooBig.Value(),
		f.HostUnreachable.Value(), f.LinkLocalSource.Value() + f.LinkLocalDestination.Value(),
		f.OutgoingDeviceNoBufferSpace.Value(),
	}
	var sum uint64
	for _, v := range named {
		sum += v
	}
	other := uint64(0)
	if e := f.Errors.Value(); e > sum {
		other = e - sum
	}
	vals := append(named, other,
		st.IP.InvalidDestinationAddressesReceived.Value(),
		st.IP.InvalidSourceAddressesReceived.Value(),
		st.IP.MalformedPacketsReceived.Value()+st.IP.MalformedFragmentsReceived.Value(),
		st.IP.OutgoingPacketErrors.Value())
	r := IPReport{
		PacketsReceived:  st.IP.PacketsReceived.Value(),
		PacketsDelivered: st.IP.PacketsDelivered.Value(),
		PacketsSent:      st.IP.PacketsSent.Value(),
		Drops:            make(map[string]uint64, len(IPDropReasons)),
	}
	v4, v6 := st.ICMP.V4.PacketsSent, st.ICMP.V6.PacketsSent
	r.ICMPErrorsSent = v4.DstUnreachable.Value() + v4.TimeExceeded.Value() + v4.ParamProblem.Value() +
		v6.DstUnreachable.Value() + v6.PacketTooBig.Value() + v6.TimeExceeded.Value() + v6.ParamProblem.Value()
	for i, k := range IPDropReasons {
		r.Drops[k] = vals[i]
	}
	return r
}

// LinkReport is one link's counters.
type LinkReport struct {
	// Name is the link's name.
	Name string `json:"name"`
	// RXFrames counts frames received from the lower link.
	RXFrames uint64 `json:"rx_frames"`
	// TXFrames counts frames written to the lower link.
	TXFrames uint64 `json:"tx_frames"`
	// RXDelivered counts packets delivered up to the stack.
	RXDelivered uint64 `json:"rx_delivered"`
	// RXForwarded counts labelled frames handed to the label switch.
	RXForwarded uint64 `json:"rx_forwarded"`
	// TXPackets counts packets the stack handed to the link (before
	// segmentation).
	TXPackets uint64 `json:"tx_packets"`
	// GSOPackets counts GSO packets segmented by the link.
	GSOPackets uint64 `json:"gso_packets"`
	// StackRXBytes and StackTXBytes are the bytes gVisor's NIC counted:
	// packets through the userspace stack only (label-switched frames
	// bypass it), without link headers.
	StackRXBytes uint64 `json:"stack_rx_bytes"`
	// StackTXBytes: see StackRXBytes.
	StackTXBytes uint64 `json:"stack_tx_bytes"`
	// FIBPushes counts outgoing packets that got the label stack of their
	// FIB route's hop.
	FIBPushes uint64 `json:"fib_pushes"`
	// ILMHits counts incoming labels that matched an ILM entry.
	ILMHits uint64 `json:"ilm_hits"`
	// Drops counts discards by reason name (mplsendpoint.DropReason's
	// String), every reason present.
	Drops map[string]uint64 `json:"drops"`
	// LinkMode is how the lower link moves frames: "ring" (packet
	// rings) or "mmsg" (recvmmsg/sendmmsg) for an afpacket link, what
	// runs after `mode auto` chose; "" for other links.
	LinkMode string `json:"link_mode"`
	// Queues is the afpacket link's number of fanout queues (sockets).
	Queues int `json:"queues"`
	// RXRingFrames is the slots of each queue's receive ring (`link add
	// ... rx-ring-frames N`, rounded up to whole blocks; 2048 by default):
	// the frames the kernel holds for the node while it is not reading.
	// 0 for links without one (mmsg mode, tap, xdp).
	RXRingFrames int `json:"rx_ring_frames"`
	// RXBlocks counts receive ring blocks read (ring mode): one wakeup
	// and one receive batch each.
	RXBlocks uint64 `json:"rx_blocks"`
	// TXRingFull counts sends that found the transmit ring full and
	// waited for the kernel (ring mode).
	TXRingFull uint64 `json:"tx_ring_full"`
	// RXCoalesced counts received TCP segments merged by the host's
	// receive coalescing (GRO) into the packet before them.
	RXCoalesced uint64 `json:"rx_coalesced"`
	// RXChecksumPartialForm counts frames of an AF_XDP link whose TCP or
	// UDP checksum held the pseudo-header sum (a peer offloading transmit
	// checksums; they fail verification: `ethtool -K PEER tx off`).
	RXChecksumPartialForm uint64 `json:"rx_checksum_partial_form"`
	// RXFragmentsHeld is the number of IP fragments for this host held
	// now until their datagram is complete and its checksum verified.
	RXFragmentsHeld uint64 `json:"rx_fragments_held"`
	// BusyPolls counts the busy polls (link option busy-poll) the link's
	// goroutines ran, BusyPollHits the link's receive batches a busy poll
	// delivered without a wake-up (whichever busy-polled link's goroutine
	// spun), and BusyPollUS the
	// microseconds they spent spinning (yielded time included: at most
	// their CPU).
	BusyPolls    uint64 `json:"busy_polls"`
	BusyPollHits uint64 `json:"busy_poll_hits"`
	BusyPollUS   uint64 `json:"busy_poll_us"`
}

// SwitchReport is the label switch counters.
type SwitchReport struct {
	// Forwarded counts frames written to an egress link.
	Forwarded uint64 `json:"forwarded"`
	// Swapped counts frames whose top label was swapped.
	Swapped uint64 `json:"swapped"`
	// PoppedIP counts frames popped to IP and forwarded.
	PoppedIP uint64 `json:"popped_ip"`
	// PoppedLabelled counts frames popped and forwarded still labelled.
	PoppedLabelled uint64 `json:"popped_labelled"`
	// Queued counts frames that waited for a next hop's MAC address.
	Queued uint64 `json:"queued"`
	// ICMPSent counts ICMP errors sent (time exceeded, fragmentation
	// needed, Packet Too Big).
	ICMPSent uint64 `json:"icmp_sent"`
	// ICMPViaLSP counts the ICMP errors among ICMPSent sent down the LSP
	// the offending packet was on, for want of an IP route back to its
	// source (RFC 3032 §2.3.2).
	ICMPViaLSP uint64 `json:"icmp_via_lsp"`
	// Fragmented counts IPv4 packets fragmented to fit the egress link.
	Fragmented uint64 `json:"fragmented"`
	// Coalesced counts popped TCP segments merged into a GSO frame for an
	// egress link that takes them.
	Coalesced uint64 `json:"coalesced"`
	// IPForwarded counts transit IP packets the forwarding plane routed
	// (plain or labelled), outside the userspace stack.
	IPForwarded uint64 `json:"ip_forwarded"`
	// Pushed counts transit IP packets that left labelled (LER push).
	Pushed uint64 `json:"pushed"`
	// Drops counts discards by reason name (forward.Drop's String), every
	// reason present.
	Drops map[string]uint64 `json:"drops"`
}

// TCPReport is the userspace stack's TCP counters (from gVisor's
// tcpip.TCPStats).
type TCPReport struct {
	// ActiveOpens counts connections opened by a local connect.
	ActiveOpens uint64 `json:"active_opens"`
	// PassiveOpens counts connections accepted by a listener.
	PassiveOpens uint64 `json:"passive_opens"`
	// CurrentEstablished is the number of connections in ESTABLISHED or
	// CLOSE-WAIT now (a gauge).
	CurrentEstablished uint64 `json:"current_established"`
	// FailedAttempts counts connection attempts that failed.
	FailedAttempts uint64 `json:"failed_attempts"`
	// EstablishedResets counts established connections reset.
	EstablishedResets uint64 `json:"established_resets"`
	// SegmentsSent counts segments sent.
	SegmentsSent uint64 `json:"segments_sent"`
	// SegmentsReceived counts valid segments received.
	SegmentsReceived uint64 `json:"segments_received"`
	// InvalidSegmentsReceived counts segments dropped as invalid.
	InvalidSegmentsReceived uint64 `json:"invalid_segments_received"`
	// Retransmits counts retransmitted segments.
	Retransmits uint64 `json:"retransmits"`
	// Timeouts counts retransmission timeouts.
	Timeouts uint64 `json:"timeouts"`
	// ChecksumErrors counts segments with a bad checksum.
	ChecksumErrors uint64 `json:"checksum_errors"`
}

// Report returns the node's counters as one document.
func (n *Node) Report() Report {
	st := n.Stats()
	ns := n.stack.Netstack()
	nics := ns.NICInfo()
	r := Report{Links: []LinkReport{}, Control: n.ControlReport(), LSPPing: n.echo.report()}
	lower := map[string]stack.LowerStats{}
	for _, l := range n.stack.Stats().Links {
		lower[l.Name] = l.Lower
	}
	for _, name := range n.stack.LinkNames() {
		ls := st.Links[name]
		lr := LinkReport{
			Name: name, RXFrames: ls.RXFrames, TXFrames: ls.TXFrames,
			RXDelivered: ls.RXDelivered, RXForwarded: ls.RXForwarded,
			TXPackets: ls.TXPackets, GSOPackets: ls.GSOPackets,
			FIBPushes: ls.FIBPushes, ILMHits: ls.ILMHits,
			Drops: map[string]uint64{},
		}
		for _, d := range mplsendpoint.DropReasons() {
			lr.Drops[d.String()] = ls.Drop(d)
		}
		lo := lower[name]
		lr.LinkMode, lr.Queues, lr.RXBlocks, lr.TXRingFull = lo.Mode, lo.Queues, lo.RXBlocks, lo.TXRingFull
		lr.RXRingFrames = lo.RXRingFrames
		lr.RXCoalesced, lr.RXChecksumPartialForm = ls.RXCoalesced, lo.RXChecksumPartialForm
		lr.RXFragmentsHeld = ls.RXFragmentsHeld
		lr.BusyPolls, lr.BusyPollHits, lr.BusyPollUS = lo.BusyPolls, lo.BusyPollHits, uint64(lo.BusyPollTime.Microseconds())
		for i, v := range []uint64{lo.RXOverflow, lo.RXTruncated, lo.RXErrors, lo.TXQueueFull} {
			lr.Drops[LowerDropReasons[i]] = v
		}
		for k, v := range lo.Drops {
			lr.Drops[k] = v
		}
		for _, info := range nics {
			if info.Name == name {
				lr.StackRXBytes = info.Stats.Rx.Bytes.Value()
				lr.StackTXBytes = info.Stats.Tx.Bytes.Value()
			}
		}
		r.Links = append(r.Links, lr)
	}
	sw := st.Switch
	r.LabelSwitch = SwitchReport{
		Forwarded: sw.Forwarded, Swapped: sw.Swapped, PoppedIP: sw.PoppedIP,
		PoppedLabelled: sw.PoppedLabelled, Queued: sw.Queued, ICMPSent: sw.ICMPSent, ICMPViaLSP: sw.ICMPViaLSP,
		Fragmented: sw.Fragmented, Coalesced: sw.Coalesced, IPForwarded: sw.IPForwarded, Pushed: sw.Pushed,
		Drops: map[string]uint64{},
	}
	for _, d := range forward.Drops() {
		r.LabelSwitch.Drops[d.String()] = sw.Drop(d)
	}
	r.IP = ipReport(ns.Stats())
	t := ns.Stats().TCP
	r.TCP = TCPReport{
		ActiveOpens:             t.ActiveConnectionOpenings.Value(),
		PassiveOpens:            t.PassiveConnectionOpenings.Value(),
		CurrentEstablished:      t.CurrentEstablished.Value(),
		FailedAttempts:          t.FailedConnectionAttempts.Value(),
		EstablishedResets:       t.EstablishedResets.Value(),
		SegmentsSent:            t.SegmentsSent.Value(),
		SegmentsReceived:        t.ValidSegmentsReceived.Value(),
		InvalidSegmentsReceived: t.InvalidSegmentsReceived.Value(),
		Retransmits:             t.Retransmits.Value(),
		Timeouts:                t.Timeouts.Value(),
		ChecksumErrors:          t.ChecksumErrors.Value(),
	}
	r.Runtime = runtimeReport()
	r.XDP = n.xdp.report()
	return r
}

// DefaultControlSocket is where `mplsnode run` listens for control
// requests and `mplsnode stats` connects by default.
const DefaultControlSocket = "/run/mplsnode.sock"

const (
	// controlTimeout bounds one control connection (read the command,
	// write the answer) so a stuck client cannot hold a goroutine forever.
	controlTimeout = 5 * time.Second
	// controlIdleTimeout is how long a connection may stay silent: the
	// command line must arrive within it, and the client must close after
	// the answer within it. Every command is one line sent right after
	// connecting and answered from memory (mplsnode stats, route and bgp
	// write it at once; none streams or watches), so a client silent this
	// long is stuck or hostile. It is well under the clients' own 5 s
	// (statsTimeout), so that a client waiting for one of the
	// MaxControlConns connections while idle ones hold them all is still
	// answered in time.
	controlIdleTimeout = 2 * time.Second
	// maxCommandLen is the longest command line accepted; `stats` needs 6.
	maxCommandLen = 256
)

// MaxControlConns bounds the control connections served at once. Each one
// holds a file descriptor and a goroutine; without a bound, clients that
// connect and say nothing (20,000 of them, for the default limit of open
// files) exhaust the process's descriptors, and then the links, the
// userspace stack and the metrics server cannot open any either. A
// client beyond the bound is not refused: it waits in the socket's listen
// backlog, unaccepted (holding no descriptor of the node's), until a
// connection closes; idle ones close within controlIdleTimeout. So a
// burst of `mplsnode stats` is answered a little later rather than
// failing, and 64 is far more than people and scripts run at once (each
// answer takes milliseconds).
const MaxControlConns = 64

// Accept failures that say the process or the system is short of
// something for a while (descriptors, memory) or that the client left
// first. The loop pauses controlAcceptBackoffMin, doubling up to
// controlAcceptBackoffMax, and accepts again, as net/http's Server.Serve
// does; the pause resets after an accept succeeds.
const (
	controlAcceptBackoffMin = 5 * time.Millisecond
	controlAcceptBackoffMax = time.Second
)

// controlLogEvery is the least time between two log lines of one kind
// (accept failures, busy, idle connections closed); the lines in between
// are counted in the next one's "suppressed".
const controlLogEvery = 5 * time.Second

// temporaryAcceptError reports whether Accept's err is worth retrying.
func temporaryAcceptError(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// controlCounters are a served node's ControlReport counts.
type controlCounters struct {
	closedIdle, busy, acceptErrors atomic.Uint64
	idleLog, busyLog, acceptLog    rateLog
	refs                           int // ServeControlListener calls serving the node; under controlServed.mu
}

// controlServed holds the counters of the nodes a control socket serves.
// Node itself has no field for them: the control socket is an add-on.
var controlServed struct {
	mu sync.Mutex
	m  map[*Node]*controlCounters
}

// serveCounters returns n's counters for one more ServeControlListener,
// and the func that releases them.
func serveCounters(n *Node) (*controlCounters, func()) {
	controlServed.mu.Lock()
	defer controlServed.mu.Unlock()
	if controlServed.m == nil {
		controlServed.m = map[*Node]*controlCounters{}
	}
	cc := controlServed.m[n]
	if cc == nil {
		cc = &controlCounters{}
		controlServed.m[n] = cc
	}
	cc.refs++
	return cc, func() {
		controlServed.mu.Lock()
		defer controlServed.mu.Unlock()
		if cc.refs--; cc.refs == 0 {
			delete(controlServed.m, n)
		}
	}
}

// ControlReport returns the counters of the control socket serving n
// (zero if none does).
func (n *Node) ControlReport() ControlReport {
	controlServed.mu.Lock()
	cc := controlServed.m[n]
	controlServed.mu.Unlock()
	if cc == nil {
		return ControlReport{}
	}
	return ControlReport{ClosedIdle: cc.closedIdle.Load(), Busy: cc.busy.Load(), AcceptErrors: cc.acceptErrors.Load()}
}

// rateLog lets one log line through every controlLogEvery.
type rateLog struct {
	mu         sync.Mutex
	next       time.Time
	suppressed int
}

// allow reports whether to log now and, if so, how many lines were held
// back since the last one.
func (r *rateLog) allow() (ok bool, suppressed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if now.Before(r.next) {
		r.suppressed++
		return false, 0
	}
	r.next = now.Add(controlLogEvery)
	suppressed, r.suppressed = r.suppressed, 0
	return true, suppressed
}

// ServeControl serves the control protocol on a Unix socket at path until
// ctx is done: ListenControl, then ServeControlListener.
//
// Protocol: the client sends one line; `stats` is answered with the
// node's Report as one JSON document (followed by a newline), the other
// queries and the route changes (`route add|replace LINE`, `route del PREFIX`,
// `mpls route add|replace LINE`, `mpls route del LABEL`: see Node.AddRoute) with
// theirs, anything else or a refused change with a line `error: ...`.
// Then the server closes the connection. Only the route changes change
// the node, and only until its next reload.
//
// At most MaxControlConns connections are served at once; more clients
// wait, unaccepted, until one closes. A client that sends no line within
// 2 s gets `error: ...` and is closed. Accept failures for lack of
// descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM, ECONNABORTED)
// pause accepting (5 ms, doubling up to 1 s) and are logged at most every
// 5 s; they do not stop the socket. Node.ControlReport counts all three.
//
// ServeControl returns nil when ctx ends, or the error that stopped it
// from listening.
func ServeControl(ctx context.Context, n *Node, path string) error {
	ln, err := ListenControl(path)
	if err != nil {
		return err
	}
	return ServeControlListener(ctx, n, ln)
}

// ListenControl creates the control socket at path with mode 0600 (root
// only). A stale socket file at path (one nobody answers on) is removed
// first; a live one is an *InUseError (errors.Is ErrInUse) naming the
// process that listens on it. The listener removes the socket file when
// closed.
func ListenControl(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("control socket %s: exists and is not a socket", path)
		}
		// A socket someone answers on belongs to a running node: keep it.
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			pid := socketPeerPID(c.(*net.UnixConn))
			c.Close()
			return nil, &InUseError{What: "control socket " + path, PID: pid, Hint: "choose another with --control-socket"}
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("control socket: remove stale %s: %w", path, err)
		}
	}
	ln, err := listenUnix0600(path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return ln, nil
}

// ServeControlListener serves the control protocol (see ServeControl) on
// ln, from ListenControl, until ctx is done; it closes ln. It returns nil
// when ctx ends; otherwise the accept error that stopped it: ln closed by
// someone else, or a failure that is not one of the temporary ones
// ServeControl retries.
func ServeControlListener(ctx context.Context, n *Node, ln net.Listener) error {
	cc, release := serveCounters(n)
	defer release()
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	end := func(err error) error {
		ln.Close()
		wg.Wait()
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("control socket: %w", err)
	}
	// slots holds a token for each connection being served.
	slots := make(chan struct{}, MaxControlConns)
	var backoff time.Duration
	for {
		select {
		case slots <- struct{}{}:
		default:
			cc.busy.Add(1)
			if ok, sup := cc.busyLog.allow(); ok {
				n.log.Warn("control socket busy: new clients wait until a connection closes",
					"addr", ln.Addr().String(), "open", MaxControlConns, "suppressed", sup)
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return end(ctx.Err())
			}
		}
		c, err := ln.Accept()
		if err != nil {
			<-slots
			if ctx.Err() != nil || !temporaryAcceptError(err) {
				return end(err)
			}
			if backoff == 0 {
				backoff = controlAcceptBackoffMin
			} else if backoff *= 2; backoff > controlAcceptBackoffMax {
				backoff = controlAcceptBackoffMax
			}
			cc.acceptErrors.Add(1)
			if ok, sup := cc.acceptLog.allow(); ok {
				n.log.Warn("control socket: accept failed; retrying", "addr", ln.Addr().String(),
					"err", err, "retry_in", backoff, "suppressed", sup)
			}
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return end(ctx.Err())
			}
			continue
		}
		backoff = 0
		wg.Add(1)
		go func() {
			defer func() {
				<-slots
				wg.Done()
			}()
			serveControlConn(n, cc, c)
		}()
	}
}

// listenUnix0600 listens on path so that the socket file is never
// accessible to others: the socket is created in a private temporary
// directory, chmodded to 0600 there, then renamed to path.
func listenUnix0600(path string) (net.Listener, error) {
	dir, err := os.MkdirTemp(dirOf(path), ".mplsnode-sock-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tmp := dir + "/s"
	ln, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, err
	}
	ul := ln.(*net.UnixListener)
	// The temporary path is renamed away; do not let Close unlink it.
	ul.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		return nil, err
	}
	// The bound socket keeps working under its new name; the wrapper
	// unlinks the final path on Close.
	return &unlinkListener{Listener: ln, path: path}, nil
}

func dirOf(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		if i == 0 {
			return "/"
		}
		return path[:i]
	}
	return "."
}

// unlinkListener removes its socket file on Close.
type unlinkListener struct {
	net.Listener
	path string
	once sync.Once
}

// Addr returns the socket's final path (the bound one was renamed).
func (l *unlinkListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

func (l *unlinkListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { os.Remove(l.path) })
	return err
}

// serveControlConn answers one request and closes c.
func serveControlConn(n *Node, cc *controlCounters, c net.Conn) {
	defer c.Close()
	deadline := time.Now().Add(controlTimeout)
	_ = c.SetDeadline(deadline)
	_ = c.SetReadDeadline(time.Now().Add(controlIdleTimeout))
	line, err := bufio.NewReaderSize(c, maxCommandLen).ReadSlice('\n')
	if errors.Is(err, os.ErrDeadlineExceeded) {
		cc.closedIdle.Add(1)
		if ok, sup := cc.idleLog.allow(); ok {
			n.log.Info("control socket: closed a connection that sent no command", "after", controlIdleTimeout, "suppressed", sup)
		}
		// Nothing is left unread (what came is in the reader): no drain.
		fmt.Fprintf(c, "error: no command line within %v, e.g. \"stats\\n\"\n", controlIdleTimeout)
		return
	}
	_ = c.SetReadDeadline(deadline)
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		fmt.Fprintf(c, "error: want one line ending in a newline, e.g. \"stats\\n\"\n")
		drainControlConn(c, deadline)
		return
	}
	switch cmd := strings.TrimSpace(string(line)); {
	case cmd == "stats":
		enc := json.NewEncoder(c)
		enc.SetIndent("", "  ")
		_ = enc.Encode(n.Report())
	case strings.HasPrefix(cmd, cmdLSP):
		controlLSP(n, c, cmd)
	default:
		answer, ok, err := controlQuery(n, cmd)
		if !ok {
			answer, ok, err = controlChange(n, cmd)
		}
		switch {
		case !ok:
			fmt.Fprintf(c, "error: unknown command %q (commands: stats, lsp ping JSON, lsp trace JSON, route show, route add LINE, route replace LINE, route del PREFIX, mpls route show, mpls route add LINE, mpls route replace LINE, mpls route del LABEL, bgp summary, bgp neighbor, bgp routes)\n", cmd)
		case err != nil:
			fmt.Fprintf(c, "error: %v\n", err)
		default:
			enc := json.NewEncoder(c)
			enc.SetIndent("", "  ")
			_ = enc.Encode(answer)
		}
	}
	drainControlConn(c, deadline)
}

// maxControlDrain bounds what is read and discarded after the answer.
const maxControlDrain = 64 << 10

// drainControlConn ends the answer (the client reads EOF) and discards
// what the client still sends, up to a bound and until the connection's
// deadline or controlIdleTimeout, whichever comes first, so that closing
// a connection with unread input (an overlong line, a second command)
// does not reset it and lose the answer already written, and a client
// that keeps the connection open after the answer does not hold one of
// the MaxControlConns for long.
func drainControlConn(c net.Conn, deadline time.Time) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	if idle := time.Now().Add(controlIdleTimeout); idle.Before(deadline) {
		deadline = idle
	}
	_ = c.SetReadDeadline(deadline)
	_, _ = io.CopyN(io.Discard, c, maxControlDrain)
}
