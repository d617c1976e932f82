package netperf

import (
	"time"
)

// Result is what one test measured, with every value netperf prints.
type Result struct {
	Test    TestType `json:"test"`
	Classic bool     `json:"classic,omitempty"`
	// Elapsed is the client's own wall-clock test time.
	Elapsed time.Duration `json:"elapsed_ns"`
	// Throughput is 10^6 bits/s (or the -f units) for STREAM/MAERTS,
	// transactions/s for RR; with -f, TCP_RR, TCP_CRR and UDP_RR report
	// the bytes the server moved both ways in the -f units, as stock.
	Throughput float64 `json:"throughput"`
	// TransactionRate is transactions/s of an RR test, whatever -f says.
	TransactionRate float64 `json:"transaction_rate,omitempty"`
	// ThroughputUnits names Throughput's unit.
	ThroughputUnits string `json:"throughput_units"`

	BytesSent           uint64  `json:"bytes_sent"`     // by this client
	BytesReceived       uint64  `json:"bytes_received"` // by this client
	RemoteBytesSent     uint64  `json:"remote_bytes_sent"`
	RemoteBytesReceived uint64  `json:"remote_bytes_received"`
	Transactions        uint64  `json:"transactions,omitempty"`
	RemoteTransactions  uint64  `json:"remote_transactions,omitempty"`
	RemoteElapsed       float64 `json:"remote_elapsed_s"`

	LocalSendBuf  int32 `json:"local_send_socket_size"`
	LocalRecvBuf  int32 `json:"local_recv_socket_size"`
	RemoteSendBuf int32 `json:"remote_send_socket_size"`
	RemoteRecvBuf int32 `json:"remote_recv_socket_size"`
	LocalSendSize int32 `json:"local_send_size"`
	LocalRecvSize int32 `json:"local_recv_size"`
	// RemoteSendSize is the server's per-send size (MAERTS "Send Message Size").
	RemoteSendSize int32 `json:"remote_send_size"`
	RequestSize    int32 `json:"request_size,omitempty"`
	ResponseSize   int32 `json:"response_size,omitempty"`
	NoDelay        bool  `json:"nodelay,omitempty"`

	// CPU utilisation in percent; -1 when not measured.
	LocalCPU  float64 `json:"local_cpu_util"`
	RemoteCPU float64 `json:"remote_cpu_util"`
	// Service demand: us/KB (STREAM/MAERTS) or us/Tr (RR); -1 when unknown.
	LocalServiceDemand  float64 `json:"local_service_demand"`
	RemoteServiceDemand float64 `json:"remote_service_demand"`
	LocalCPUMethod      uint32  `json:"local_cpu_method"`
	RemoteCPUMethod     uint32  `json:"remote_cpu_method"`
	RemoteNumCPUs       uint32  `json:"remote_num_cpus"`
	RemoteCongControl   string  `json:"remote_cong_control,omitempty"`

	// Send and receive calls here (UDP_STREAM: the messages sent), failed
	// sends, messages the server received and the throughput it saw
	// (UDP_STREAM's second result line).
	SendCalls        uint64  `json:"send_calls,omitempty"`
	RecvCalls        uint64  `json:"recv_calls,omitempty"`
	SendErrors       uint64  `json:"send_errors,omitempty"`
	RemoteRecvCalls  uint64  `json:"remote_recv_calls,omitempty"`
	RemoteThroughput float64 `json:"remote_throughput,omitempty"`
	// RecvTimeouts counts UDP_RR responses given up after -e.
	RecvTimeouts uint64 `json:"recv_timeouts,omitempty"`

	// Latency holds the transaction times of RR tests, in microseconds.
	Latency LatencyStats `json:"latency_us"`
	// Histogram holds the same times as netperf's -v 2 histogram; nil
	// outside RR tests.
	Histogram *Histogram `json:"-"`
	// The buffer ring widths of the omni tests: ours as sent in DO_OMNI
	// (stock's send_width, recv_width), the server's as it answered; 0
	// where the direction has none or the test is classic.
	LocalSendWidth, LocalRecvWidth   uint32 `json:"-"`
	RemoteSendWidth, RemoteRecvWidth int32  `json:"-"`
	// Final socket sizes the server reported, its receive size per call,
	// and its send and receive calls.
	RemoteSendBufEnd int32  `json:"remote_send_socket_size_end"`
	RemoteRecvBufEnd int32  `json:"remote_recv_socket_size_end"`
	RemoteRecvSize   int32  `json:"remote_recv_size"`
	RemoteSendCalls  uint64 `json:"remote_send_calls,omitempty"`
	// RemoteRetrans and LocalRetrans are the TCP retransmissions (-1 for
	// UDP or when the socket cannot tell); TransportMSS is the data
	// connection's MSS (-1 unknown); LocalCongControl its congestion
	// control ("TCP Only" for UDP, as netperf).
	RemoteRetrans    int32  `json:"remote_transport_retrans"`
	LocalRetrans     int32  `json:"local_transport_retrans"`
	TransportMSS     int32  `json:"transport_mss"`
	LocalCongControl string `json:"local_cong_control,omitempty"`
	// LocalInterface is the kernel interface holding the data
	// connection's local address ("" on the userspace stack or when none
	// does): LOCAL_INTERFACE_NAME and its driver outputs.
	LocalInterface string `json:"local_interface,omitempty"`
	// LocalCPUNum and RemoteCPUNum are the CPU counts; the peaks are the
	// busiest CPU's utilisation.
	LocalNumCPUs  int     `json:"local_num_cpus,omitempty"`
	LocalPeakCPU  float64 `json:"local_peak_cpu_util,omitempty"`
	RemotePeakCPU float64 `json:"remote_peak_cpu_util,omitempty"`
	// LocalPeakCPUID and RemotePeakCPUID number the busiest CPU (0 when
	// not measured, as netperf's zeroed globals).
	LocalPeakCPUID  int     `json:"local_peak_cpu_id,omitempty"`
	RemotePeakCPUID int     `json:"remote_peak_cpu_id,omitempty"`
	LocalCPUUser    float64 `json:"local_cpu_user,omitempty"`
	LocalCPUSys     float64 `json:"local_cpu_system,omitempty"`
	RemoteCPUUser   float64 `json:"remote_cpu_user,omitempty"`
	RemoteCPUSys    float64 `json:"remote_cpu_system,omitempty"`
	// The rest of netperf's CPU breakdown (percent).
	LocalCPUIOWait   float64 `json:"local_cpu_iowait,omitempty"`
	LocalCPUIRQ      float64 `json:"local_cpu_irq,omitempty"`
	LocalCPUSoftIRQ  float64 `json:"local_cpu_swintr,omitempty"`
	RemoteCPUIOWait  float64 `json:"remote_cpu_iowait,omitempty"`
	RemoteCPUIRQ     float64 `json:"remote_cpu_irq,omitempty"`
	RemoteCPUSoftIRQ float64 `json:"remote_cpu_swintr,omitempty"`
}

// Report is the outcome of Run: every iteration and their mean.
type Report struct {
	Config     Config   `json:"-"`
	Family     uint32   `json:"-"`
	Result     Result   `json:"result"` // the mean over Iterations
	Iterations []Result `json:"iterations"`
	// ConfidenceMet is false when -i ran out of iterations before the
	// confidence interval narrowed to ConfidenceWidth.
	ConfidenceMet bool `json:"confidence_met"`
	// Achieved full-width confidence intervals, percent of the mean.
	ThroughputInterval float64 `json:"throughput_interval_pct"`
	LocalCPUInterval   float64 `json:"local_cpu_interval_pct"`
	RemoteCPUInterval  float64 `json:"remote_cpu_interval_pct"`
	// UUID names this run (the UUID output), a random (version 4) UUID
	// as netperf makes one per run.
	UUID string `json:"uuid"`
	// BannerPrinted says the banner went out before the test (-D prints
	// it ahead of the interim results), so WriteText leaves it out.
	BannerPrinted bool `json:"-"`
}
