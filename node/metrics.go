package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/mplsnode/mplsnode/internal/buildinfo"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsNamespace prefixes every metric name: mplsnode_<what>_<unit>_total.
const metricsNamespace = "mplsnode"

// metric is one value of a report R, exported as mplsnode_<name>.
type metric[R any] struct {
	name, help string
	get        func(*R) uint64
}

// linkCounters are the per-link counters, exported with the label device.
var linkCounters = []metric[LinkReport]{
	{"rx_frames_total", "Frames received from the lower link.", func(l *LinkReport) uint64 { return l.RXFrames }},
	{"tx_frames_total", "Frames written to the lower link (after segmentation).", func(l *LinkReport) uint64 { return l.TXFrames }},
	{"rx_delivered_packets_total", "Packets delivered up to the userspace stack.", func(l *LinkReport) uint64 { return l.RXDelivered }},
	{"rx_forwarded_frames_total", "Labelled frames handed to the label switch.", func(l *LinkReport) uint64 { return l.RXForwarded }},
	{"tx_packets_total", "Packets the stack handed to the link (before segmentation).", func(l *LinkReport) uint64 { return l.TXPackets }},
	{"gso_packets_total", "GSO packets segmented by the link.", func(l *LinkReport) uint64 { return l.GSOPackets }},
	{"stack_rx_bytes_total", "Bytes received by the userspace stack on the link (network layer, label-switched frames excluded).", func(l *LinkReport) uint64 { return l.StackRXBytes }},
	{"stack_tx_bytes_total", "Bytes sent by the userspace stack on the link (network layer, label-switched frames excluded).", func(l *LinkReport) uint64 { return l.StackTXBytes }},
	{"fib_pushes_total", "Outgoing packets that got the label stack of their FIB route's hop.", func(l *LinkReport) uint64 { return l.FIBPushes }},
	{"ilm_hits_total", "Incoming labels that matched an ILM entry.", func(l *LinkReport) uint64 { return l.ILMHits }},
	{"rx_ring_blocks_total", "Receive ring blocks read (afpacket ring mode): one wakeup and one receive batch each.", func(l *LinkReport) uint64 { return l.RXBlocks }},
	{"rx_coalesced_segments_total", "Received TCP segments merged by the host's receive coalescing (GRO) into the packet before them.", func(l *LinkReport) uint64 { return l.RXCoalesced }},
	{"rx_checksum_partial_form_total", "Frames of an AF_XDP link whose TCP or UDP checksum held the pseudo-header sum (a peer offloading transmit checksums: they fail verification; ethtool -K PEER tx off).", func(l *LinkReport) uint64 { return l.RXChecksumPartialForm }},
	{"tx_ring_full_total", "Sends that found the transmit ring full and waited for the kernel (afpacket ring mode).", func(l *LinkReport) uint64 { return l.TXRingFull }},
	{"busy_polls_total", "Busy polls (link option busy-poll) the link's receive goroutines ran.", func(l *LinkReport) uint64 { return l.BusyPolls }},
	{"busy_poll_hits_total", "The link's receive batches a busy poll delivered without a wake-up (whichever busy-polled link's goroutine spun).", func(l *LinkReport) uint64 { return l.BusyPollHits }},
}

// linkMicros are per-link counters kept in microseconds, exported in
// seconds (the base unit Prometheus wants).
var linkMicros = []metric[LinkReport]{
	{"busy_poll_seconds_total", "Time the link's busy polls spent spinning, time yielded to other threads included: at most their CPU.", func(l *LinkReport) uint64 { return l.BusyPollUS }},
}

// linkGauges are per-link values that go up and down.
var linkGauges = []metric[LinkReport]{
	{"rx_fragments_held", "IP fragments for this host held until their datagram is complete and its checksum verified.", func(l *LinkReport) uint64 { return l.RXFragmentsHeld }},
	{"rx_ring_frames", "Slots of each queue's receive ring (afpacket ring mode, rx-ring-frames): the frames the kernel holds while the node is not reading; 0 without one.", func(l *LinkReport) uint64 { return uint64(l.RXRingFrames) }},
}

// switchCounters are the label switch counters, exported without labels.
var switchCounters = []metric[SwitchReport]{
	{"labelswitch_forwarded_frames_total", "Frames the label switch wrote to an egress link.", func(s *SwitchReport) uint64 { return s.Forwarded }},
	{"labelswitch_swapped_frames_total", "Frames whose top label was swapped.", func(s *SwitchReport) uint64 { return s.Swapped }},
	{"labelswitch_popped_ip_frames_total", "Frames popped to IP and forwarded.", func(s *SwitchReport) uint64 { return s.PoppedIP }},
	{"labelswitch_popped_labelled_frames_total", "Frames popped and forwarded still labelled.", func(s *SwitchReport) uint64 { return s.PoppedLabelled }},
	{"labelswitch_queued_frames_total", "Frames that waited for a next hop's MAC address.", func(s *SwitchReport) uint64 { return s.Queued }},
	{"labelswitch_icmp_sent_messages_total", "ICMP errors (time exceeded, fragmentation needed, packet too big) sent by the label switch.", func(s *SwitchReport) uint64 { return s.ICMPSent }},
	{"labelswitch_icmp_via_lsp_messages_total", "ICMP errors among those sent that went down the offending packet's LSP, for want of an IP route back to its source.", func(s *SwitchReport) uint64 { return s.ICMPViaLSP }},
	{"labelswitch_fragmented_packets_total", "IPv4 packets fragmented to fit the egress link once labelled.", func(s *SwitchReport) uint64 { return s.Fragmented }},
	{"labelswitch_coalesced_frames_total", "Popped TCP segments merged into a GSO frame for an egress link that takes them.", func(s *SwitchReport) uint64 { return s.Coalesced }},
	{"labelswitch_ip_forwarded_packets_total", "Transit IP packets the forwarding plane routed, plain or labelled.", func(s *SwitchReport) uint64 { return s.IPForwarded }},
	{"labelswitch_pushed_packets_total", "Transit IP packets that left labelled (LER push).", func(s *SwitchReport) uint64 { return s.Pushed }},
}

// tcpCounters are the TCP counters, exported without labels.
var tcpCounters = []metric[TCPReport]{
	{"tcp_active_opens_total", "TCP connections opened by a local connect.", func(t *TCPReport) uint64 { return t.ActiveOpens }},
	{"tcp_passive_opens_total", "TCP connections accepted by a listener.", func(t *TCPReport) uint64 { return t.PassiveOpens }},
	{"tcp_failed_attempts_total", "TCP connection attempts that failed.", func(t *TCPReport) uint64 { return t.FailedAttempts }},
	{"tcp_established_resets_total", "Established TCP connections reset.", func(t *TCPReport) uint64 { return t.EstablishedResets }},
	{"tcp_sent_segments_total", "TCP segments sent.", func(t *TCPReport) uint64 { return t.SegmentsSent }},
	{"tcp_received_segments_total", "Valid TCP segments received.", func(t *TCPReport) uint64 { return t.SegmentsReceived }},
	{"tcp_invalid_segments_total", "TCP segments dropped as invalid.", func(t *TCPReport) uint64 { return t.InvalidSegmentsReceived }},
	{"tcp_retransmitted_segments_total", "TCP segments retransmitted.", func(t *TCPReport) uint64 { return t.Retransmits }},
	{"tcp_timeouts_total", "TCP retransmission timeouts.", func(t *TCPReport) uint64 { return t.Timeouts }},
	{"tcp_checksum_errors_total", "TCP segments with a bad checksum.", func(t *TCPReport) uint64 { return t.ChecksumErrors }},
}

// tcpGauges are the TCP values that go up and down, exported without
// labels.
var tcpGauges = []metric[TCPReport]{
	{"tcp_established_connections", "TCP connections in ESTABLISHED or CLOSE-WAIT now.", func(t *TCPReport) uint64 { return t.CurrentEstablished }},
}

// ipCounters are the IP counters, exported without labels.
var ipCounters = []metric[IPReport]{
	{"ip_received_packets_total", "IP packets the links handed to the userspace stack.", func(r *IPReport) uint64 { return r.PacketsReceived }},
	{"ip_delivered_packets_total", "IP packets delivered to the userspace stack's transports.", func(r *IPReport) uint64 { return r.PacketsDelivered }},
	{"ip_sent_packets_total", "IP packets the userspace stack sent, forwarded ones included.", func(r *IPReport) uint64 { return r.PacketsSent }},
	{"ip_icmp_errors_sent_total", "ICMP and ICMPv6 errors the userspace stack sent.", func(r *IPReport) uint64 { return r.ICMPErrorsSent }},
}

// metricSet exports a table of metrics of a report R, all of one value
// type and with the same variable labels.
type metricSet[R any] struct {
	metrics []metric[R]
	descs   []*prometheus.Desc
	kind    prometheus.ValueType
	// unit divides every value: 1e6 exports microseconds in seconds (the
	// base unit Prometheus wants), 1 the value as counted.
	unit float64
}

// newMetricSet describes metrics, of value type kind, with the variable
// labels labels.
func newMetricSet[R any](metrics []metric[R], kind prometheus.ValueType, unit float64, labels ...string) metricSet[R] {
	s := metricSet[R]{metrics: metrics, kind: kind, unit: unit}
	for _, m := range metrics {
		s.descs = append(s.descs, prometheus.NewDesc(metricName(m.name), m.help, labels, nil))
	}
	return s
}

// collect sends every metric of the set read from r, with the label
// values labels.
func (s *metricSet[R]) collect(ch chan<- prometheus.Metric, r *R, labels ...string) {
	for i, m := range s.metrics {
		ch <- prometheus.MustNewConstMetric(s.descs[i], s.kind, float64(m.get(r))/s.unit, labels...)
	}
}

// metricName is mplsnode_<s>.
func metricName(s string) string { return prometheus.BuildFQName(metricsNamespace, "", s) }

// collector is a prometheus.Collector that reads the node's counters at
// scrape time; it keeps no state of its own.
type collector struct {
	n                            *Node
	link, linkMicros, linkGauges metricSet[LinkReport]
	linkDrops                    *prometheus.Desc
	linkInfo                     *prometheus.Desc
	sw                           metricSet[SwitchReport]
	swDrops                      *prometheus.Desc
	tcp, tcpGauges               metricSet[TCPReport]
	ip                           metricSet[IPReport]
	ipDrops                      *prometheus.Desc
	everything                   []*prometheus.Desc
}

// NewCollector returns a prometheus.Collector exporting n's counters as
// mplsnode_* metrics (see docs/METRICS.md) with the labels device (the
// link name) and reason (a drop reason name) only.
func NewCollector(n *Node) prometheus.Collector {
	c := &collector{
		n:          n,
		link:       newMetricSet(linkCounters, prometheus.CounterValue, 1, "device"),
		linkMicros: newMetricSet(linkMicros, prometheus.CounterValue, 1e6, "device"),
		linkGauges: newMetricSet(linkGauges, prometheus.GaugeValue, 1, "device"),
		linkDrops:  prometheus.NewDesc(metricName("drops_total"), "Frames or packets a link discarded, by reason.", []string{"device", "reason"}, nil),
		linkInfo:   prometheus.NewDesc(metricName("link_info"), "Always 1; the labels say how the link's lower link moves frames (mode: ring, mmsg, or none for a link that is not afpacket) and its number of fanout queues.", []string{"device", "mode", "queues"}, nil),
		sw:         newMetricSet(switchCounters, prometheus.CounterValue, 1),
		swDrops:    prometheus.NewDesc(metricName("labelswitch_drops_total"), "Frames the label switch discarded, by reason.", []string{"reason"}, nil),
		tcp:        newMetricSet(tcpCounters, prometheus.CounterValue, 1),
		tcpGauges:  newMetricSet(tcpGauges, prometheus.GaugeValue, 1),
		ip:         newMetricSet(ipCounters, prometheus.CounterValue, 1),
		ipDrops:    prometheus.NewDesc(metricName("ip_drops_total"), "IP packets the userspace stack discarded (forwarding errors, bad addresses, malformed), by reason.", []string{"reason"}, nil),
	}
	for _, ds := range [][]*prometheus.Desc{
		c.link.descs, c.linkMicros.descs, c.linkGauges.descs, {c.linkDrops, c.linkInfo},
		c.sw.descs, {c.swDrops}, c.tcp.descs, c.tcpGauges.descs, c.ip.descs, {c.ipDrops},
	} {
		c.everything = append(c.everything, ds...)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.everything {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	r := c.n.Report()
	for i := range r.Links {
		l := &r.Links[i]
		c.link.collect(ch, l, l.Name)
		c.linkMicros.collect(ch, l, l.Name)
		c.linkGauges.collect(ch, l, l.Name)
		collectByReason(ch, c.linkDrops, l.Drops, l.Name)
		mode := l.LinkMode
		if mode == "" {
			mode = "none"
		}
		ch <- prometheus.MustNewConstMetric(c.linkInfo, prometheus.GaugeValue, 1, l.Name, mode, strconv.Itoa(l.Queues))
	}
	c.sw.collect(ch, &r.LabelSwitch)
	collectByReason(ch, c.swDrops, r.LabelSwitch.Drops)
	c.tcp.collect(ch, &r.TCP)
	c.tcpGauges.collect(ch, &r.TCP)
	c.ip.collect(ch, &r.IP)
	collectByReason(ch, c.ipDrops, r.IP.Drops)
}

// collectByReason sends counter d once per reason of counts, with the
// label values labels and then the reason.
func collectByReason(ch chan<- prometheus.Metric, d *prometheus.Desc, counts map[string]uint64, labels ...string) {
	for reason, v := range counts {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append(labels, reason)...)
	}
}

// metricsReadTimeout bounds reading a scrape request's headers, so idle or
// slow clients cannot pile up connections.
const metricsReadTimeout = 10 * time.Second

// MetricsHandler returns an http.Handler serving n's metrics in the
// Prometheus text format: the mplsnode_* metrics, mplsnode_build_info, and
// the standard go_* and process_* metrics of the process.
func MetricsHandler(n *Node) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(n), newXDPCollector(n), newLabelCollector(n), newLSPPingCollector(n), newBuildInfo(),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if n.BGP() != nil {
		reg.MustRegister(newBGPCollector(n))
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// newBuildInfo is the gauge mplsnode_build_info, always 1, whose labels
// say what binary runs (the values `mplsnode version` prints).
func newBuildInfo() prometheus.Collector {
	bi := buildinfo.Read()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metricsNamespace,
		Name:      "build_info",
		Help:      "Always 1; the labels name the module version, VCS revision and Go version of the running binary.",
		ConstLabels: prometheus.Labels{
			"version":   bi.Version,
			"revision":  bi.Revision,
			"goversion": bi.GoVersion,
		},
	})
	g.Set(1)
	return g
}

// ServeMetrics serves n's metrics at http://addr/metrics until ctx is
// done; it returns nil then, or the error that stopped it (e.g. the
// address is in use). An addr without a host (":9477") listens on
// loopback (127.0.0.1) only: counters are for the local Prometheus unless
// an address is named (0.0.0.0:9477 for every IPv4 address).
func ServeMetrics(ctx context.Context, n *Node, addr string) error {
	ln, err := ListenMetrics(addr)
	if err != nil {
		return err
	}
	return ServeMetricsListener(ctx, n, ln)
}

// metricsDefaultHost is where ServeMetrics listens when its address names
// only a port.
const metricsDefaultHost = "127.0.0.1"

// ServeMetricsListener is ServeMetrics on an existing listener (tests use
// 127.0.0.1:0 and read the port from ln). It closes ln. It answers GET
// (and HEAD) /metrics and /debug/pprof/heap (heapProfile) only: other methods get 405 Method Not Allowed,
// other paths 404; nothing it serves changes the node.
func ServeMetricsListener(ctx context.Context, n *Node, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", MetricsHandler(n))
	mux.HandleFunc("GET /debug/pprof/heap", heapProfile)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: metricsReadTimeout}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) && ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("metrics: %w", err)
}
