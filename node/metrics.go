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

// linkCounter is one per-link counter of LinkReport, exported as
// mplsnode_<name> with the label device.
type linkCounter struct {
	name, help string
	get        func(*LinkReport) uint64
}

var linkCounters = []linkCounter{
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
var linkMicros = []linkCounter{
	{"busy_poll_seconds_total", "Time the link's busy polls spent spinning, time yielded to other threads included: at most their CPU.", func(l *LinkReport) uint64 { return l.BusyPollUS }},
}

// linkGauges are per-link values that go up and down.
var linkGauges = []linkCounter{
	{"rx_fragments_held", "IP fragments for this host held until their datagram is complete and its checksum verified.", func(l *LinkReport) uint64 { return l.RXFragmentsHeld }},
	{"rx_ring_frames", "Slots of each queue's receive ring (afpacket ring mode, rx-ring-frames): the frames the kernel holds while the node is not reading; 0 without one.", func(l *LinkReport) uint64 { return uint64(l.RXRingFrames) }},
}

// switchCounter is one label switch counter, exported without labels.
type switchCounter struct {
	name, help string
	get        func(*SwitchReport) uint64
}

var switchCounters = []switchCounter{
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

// tcpCounter is one TCP counter, exported without labels.
type tcpCounter struct {
	name, help string
	gauge      bool
	get        func(*TCPReport) uint64
}

var tcpCounters = []tcpCounter{
	{"tcp_active_opens_total", "TCP connections opened by a local connect.", false, func(t *TCPReport) uint64 { return t.ActiveOpens }},
	{"tcp_passive_opens_total", "TCP connections accepted by a listener.", false, func(t *TCPReport) uint64 { return t.PassiveOpens }},
	{"tcp_established_connections", "TCP connections in ESTABLISHED or CLOSE-WAIT now.", true, func(t *TCPReport) uint64 { return t.CurrentEstablished }},
	{"tcp_failed_attempts_total", "TCP connection attempts that failed.", false, func(t *TCPReport) uint64 { return t.FailedAttempts }},
	{"tcp_established_resets_total", "Established TCP connections reset.", false, func(t *TCPReport) uint64 { return t.EstablishedResets }},
	{"tcp_sent_segments_total", "TCP segments sent.", false, func(t *TCPReport) uint64 { return t.SegmentsSent }},
	{"tcp_received_segments_total", "Valid TCP segments received.", false, func(t *TCPReport) uint64 { return t.SegmentsReceived }},
	{"tcp_invalid_segments_total", "TCP segments dropped as invalid.", false, func(t *TCPReport) uint64 { return t.InvalidSegmentsReceived }},
	{"tcp_retransmitted_segments_total", "TCP segments retransmitted.", false, func(t *TCPReport) uint64 { return t.Retransmits }},
	{"tcp_timeouts_total", "TCP retransmission timeouts.", false, func(t *TCPReport) uint64 { return t.Timeouts }},
	{"tcp_checksum_errors_total", "TCP segments with a bad checksum.", false, func(t *TCPReport) uint64 { return t.ChecksumErrors }},
}

// ipCounter is one IP counter, exported without labels.
type ipCounter struct {
	name, help string
	get        func(*IPReport) uint64
}

var ipCounters = []ipCounter{
	{"ip_received_packets_total", "IP packets the links handed to the userspace stack.", func(r *IPReport) uint64 { return r.PacketsReceived }},
	{"ip_delivered_packets_total", "IP packets delivered to the userspace stack's transports.", func(r *IPReport) uint64 { return r.PacketsDelivered }},
	{"ip_sent_packets_total", "IP packets the userspace stack sent, forwarded ones included.", func(r *IPReport) uint64 { return r.PacketsSent }},
	{"ip_icmp_errors_sent_total", "ICMP and ICMPv6 errors the userspace stack sent.", func(r *IPReport) uint64 { return r.ICMPErrorsSent }},
}

// collector is a prometheus.Collector that reads the node's counters at
// scrape time; it keeps no state of its own.
type collector struct {
	n          *Node
	link       []*prometheus.Desc
	linkMicros []*prometheus.Desc
	linkGauges []*prometheus.Desc
	linkDrops  *prometheus.Desc
	linkInfo   *prometheus.Desc
	sw         []*prometheus.Desc
	swDrops    *prometheus.Desc
	tcp        []*prometheus.Desc
	ip         []*prometheus.Desc
	ipDrops    *prometheus.Desc
	everything []*prometheus.Desc
}

// NewCollector returns a prometheus.Collector exporting n's counters as
// mplsnode_* metrics (see docs/METRICS.md) with the labels device (the
// link name) and reason (a drop reason name) only.
func NewCollector(n *Node) prometheus.Collector {
	name := func(s string) string { return prometheus.BuildFQName(metricsNamespace, "", s) }
	c := &collector{n: n}
	for _, m := range linkCounters {
		c.link = append(c.link, prometheus.NewDesc(name(m.name), m.help, []string{"device"}, nil))
	}
	for _, m := range linkMicros {
		c.linkMicros = append(c.linkMicros, prometheus.NewDesc(name(m.name), m.help, []string{"device"}, nil))
	}
	for _, m := range linkGauges {
		c.linkGauges = append(c.linkGauges, prometheus.NewDesc(name(m.name), m.help, []string{"device"}, nil))
	}
	c.linkDrops = prometheus.NewDesc(name("drops_total"), "Frames or packets a link discarded, by reason.", []string{"device", "reason"}, nil)
	c.linkInfo = prometheus.NewDesc(name("link_info"), "Always 1; the labels say how the link's lower link moves frames (mode: ring, mmsg, or none for a link that is not afpacket) and its number of fanout queues.", []string{"device", "mode", "queues"}, nil)
	for _, m := range switchCounters {
		c.sw = append(c.sw, prometheus.NewDesc(name(m.name), m.help, nil, nil))
	}
	c.swDrops = prometheus.NewDesc(name("labelswitch_drops_total"), "Frames the label switch discarded, by reason.", []string{"reason"}, nil)
	for _, m := range tcpCounters {
		c.tcp = append(c.tcp, prometheus.NewDesc(name(m.name), m.help, nil, nil))
	}
	c.everything = append(append(append(append([]*prometheus.Desc{}, c.link...), c.linkDrops, c.linkInfo), c.sw...), c.swDrops)
	c.everything = append(append(c.everything, c.linkMicros...), c.linkGauges...)
	for _, m := range ipCounters {
		c.ip = append(c.ip, prometheus.NewDesc(name(m.name), m.help, nil, nil))
	}
	c.ipDrops = prometheus.NewDesc(name("ip_drops_total"), "IP packets the userspace stack discarded (forwarding errors, bad addresses, malformed), by reason.", []string{"reason"}, nil)
	c.everything = append(c.everything, c.tcp...)
	c.everything = append(append(c.everything, c.ip...), c.ipDrops)
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
		for j, m := range linkCounters {
			ch <- prometheus.MustNewConstMetric(c.link[j], prometheus.CounterValue, float64(m.get(l)), l.Name)
		}
		for j, m := range linkMicros {
			ch <- prometheus.MustNewConstMetric(c.linkMicros[j], prometheus.CounterValue, float64(m.get(l))/1e6, l.Name)
		}
		for j, m := range linkGauges {
			ch <- prometheus.MustNewConstMetric(c.linkGauges[j], prometheus.GaugeValue, float64(m.get(l)), l.Name)
		}
		for reason, v := range l.Drops {
			ch <- prometheus.MustNewConstMetric(c.linkDrops, prometheus.CounterValue, float64(v), l.Name, reason)
		}
		mode := l.LinkMode
		if mode == "" {
			mode = "none"
		}
		ch <- prometheus.MustNewConstMetric(c.linkInfo, prometheus.GaugeValue, 1, l.Name, mode, strconv.Itoa(l.Queues))
	}
	for j, m := range switchCounters {
		ch <- prometheus.MustNewConstMetric(c.sw[j], prometheus.CounterValue, float64(m.get(&r.LabelSwitch)))
	}
	for reason, v := range r.LabelSwitch.Drops {
		ch <- prometheus.MustNewConstMetric(c.swDrops, prometheus.CounterValue, float64(v), reason)
	}
	for j, m := range tcpCounters {
		vt := prometheus.CounterValue
		if m.gauge {
			vt = prometheus.GaugeValue
		}
		ch <- prometheus.MustNewConstMetric(c.tcp[j], vt, float64(m.get(&r.TCP)))
	}
	for j, m := range ipCounters {
		ch <- prometheus.MustNewConstMetric(c.ip[j], prometheus.CounterValue, float64(m.get(&r.IP)))
	}
	for reason, v := range r.IP.Drops {
		ch <- prometheus.MustNewConstMetric(c.ipDrops, prometheus.CounterValue, float64(v), reason)
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
