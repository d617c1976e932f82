package netperf

import (
	"fmt"
	"io"
	"strings"
)

// OmniMode selects one of netperf's test-specific output formats.
type OmniMode int

// The output formats: -o (CSV), -O (human-readable columns), -k
// (NAME=value lines).
const (
	OmniCSV OmniMode = iota + 1
	OmniHuman
	OmniKeyval
)

// omniOutput is one output selector: its four header lines and how to
// print its value (ok false: no value, as netperf leaves it blank).
type omniOutput struct {
	lines [4]string
	value func(r *Report) (string, bool)
}

func fmtInt[T ~int | ~int32 | ~int64 | ~uint32 | ~uint64](v T) (string, bool) {
	return fmt.Sprint(v), true
}
func fmtF2(v float64) (string, bool) { return fmt.Sprintf("%.2f", v), true }
func fmtF3(v float64) (string, bool) { return fmt.Sprintf("%.3f", v), true }
func fmtStr(v string) (string, bool) { return v, true }

// sizeReq is a requested size as netperf prints it (-1: not requested).
func sizeReq(v int32) (string, bool) { return fmtInt(v) }

// omniOutputs are the selectors this client prints, with stock netperf
// 2.7.1's header lines and value formats (src/nettest_omni.c,
// print_omni_init_list). Selectors outside this table are ignored, as
// netperf ignores unknown ones.
var omniOutputs = map[string]omniOutput{
	"SOCKET_TYPE": {[4]string{"Socket", "Type"}, func(r *Report) (string, bool) {
		if r.Config.Test.IsUDP() {
			return "Datagram", true
		}
		return "Stream", true
	}},
	"PROTOCOL": {[4]string{"Protocol"}, func(r *Report) (string, bool) {
		if r.Config.Test.IsUDP() {
			return "UDP", true
		}
		return "TCP", true
	}},
	"DIRECTION": {[4]string{"Direction"}, func(r *Report) (string, bool) {
		switch {
		case r.Config.Test.IsRR():
			return "Send|Recv", true
		case r.Config.Test == TCPMaerts:
			return "Receive", true
		}
		return "Send", true
	}},
	"ELAPSED_TIME":     {[4]string{"Elapsed", "Time", "(sec)"}, func(r *Report) (string, bool) { return fmtF2(r.Result.Elapsed.Seconds()) }},
	"THROUGHPUT":       {[4]string{"Throughput"}, func(r *Report) (string, bool) { return fmtF2(r.Result.Throughput) }},
	"THROUGHPUT_UNITS": {[4]string{"Throughput", "Units"}, func(r *Report) (string, bool) { return fmtStr(r.throughputUnits() + "/s") }},
	"LSS_SIZE_REQ":     {[4]string{"Local", "Send Socket", "Size", "Requested"}, func(r *Report) (string, bool) { return sizeReq(r.Config.LocalSendBuf) }},
	"LSS_SIZE":         {[4]string{"Local", "Send Socket", "Size", "Initial"}, func(r *Report) (string, bool) { return fmtInt(r.Result.LocalSendBuf) }},
	"LSS_SIZE_END":     {[4]string{"Local", "Send Socket", "Size", "Final"}, func(r *Report) (string, bool) { return fmtInt(r.Result.LocalSendBuf) }},
	"LSR_SIZE_REQ":     {[4]string{"Local", "Recv Socket", "Size", "Requested"}, func(r *Report) (string, bool) { return sizeReq(r.Config.LocalRecvBuf) }},
	"LSR_SIZE":         {[4]string{"Local", "Recv Socket", "Size", "Initial"}, func(r *Report) (string, bool) { return fmtInt(r.Result.LocalRecvBuf) }},
	"LSR_SIZE_END":     {[4]string{"Local", "Recv Socket", "Size", "Final"}, func(r *Report) (string, bool) { return fmtInt(r.Result.LocalRecvBuf) }},
	"RSS_SIZE_REQ":     {[4]string{"Remote", "Send Socket", "Size", "Requested"}, func(r *Report) (string, bool) { return sizeReq(r.Config.RemoteSendBuf) }},
	"RSS_SIZE":         {[4]string{"Remote", "Send Socket", "Size", "Initial"}, func(r *Report) (string, bool) { return fmtInt(r.Result.RemoteSendBuf) }},
	"RSS_SIZE_END": {[4]string{"Remote", "Send Socket", "Size", "Final"}, func(r *Report) (string, bool) {
		return fmtInt(r.remoteEnd(r.Result.RemoteSendBufEnd, r.Result.RemoteSendBuf))
	}},
	"RSR_SIZE_REQ": {[4]string{"Remote", "Recv Socket", "Size", "Requested"}, func(r *Report) (string, bool) { return sizeReq(r.Config.RemoteRecvBuf) }},
	"RSR_SIZE":     {[4]string{"Remote", "Recv Socket", "Size", "Initial"}, func(r *Report) (string, bool) { return fmtInt(r.Result.RemoteRecvBuf) }},
	"RSR_SIZE_END": {[4]string{"Remote", "Recv Socket", "Size", "Final"}, func(r *Report) (string, bool) {
		return fmtInt(r.remoteEnd(r.Result.RemoteRecvBufEnd, r.Result.RemoteRecvBuf))
	}},
	"LOCAL_SEND_SIZE":  {[4]string{"Local", "Send", "Size"}, func(r *Report) (string, bool) { return fmtInt(r.Result.LocalSendSize) }},
	"LOCAL_RECV_SIZE":  {[4]string{"Local", "Recv", "Size"}, func(r *Report) (string, bool) { return fmtInt(r.Result.LocalRecvSize) }},
	"REMOTE_SEND_SIZE": {[4]string{"Remote", "Send", "Size"}, func(r *Report) (string, bool) { return fmtInt(r.Result.RemoteSendSize) }},
	"REMOTE_RECV_SIZE": {[4]string{"Remote", "Recv", "Size"}, func(r *Report) (string, bool) { return fmtInt(r.Result.RemoteRecvSize) }},
	"REQUEST_SIZE":     {[4]string{"Request", "Size", "Bytes"}, func(r *Report) (string, bool) { return fmtInt(r.rrSize(r.Config.RequestSize)) }},
	"RESPONSE_SIZE":    {[4]string{"Response", "Size", "Bytes"}, func(r *Report) (string, bool) { return fmtInt(r.rrSize(r.Config.ResponseSize)) }},
	"LOCAL_CPU_UTIL":   {[4]string{"Local", "CPU", "Util", "%"}, func(r *Report) (string, bool) { return fmtF2(r.Result.LocalCPU) }},
	"LOCAL_CPU_PERCENT_USER": {[4]string{"Local", "CPU", "User", "%"}, func(r *Report) (string, bool) {
		return fmtF2(r.Result.LocalCPUUser)
	}},
	"LOCAL_CPU_PERCENT_SYSTEM": {[4]string{"Local", "CPU", "System", "%"}, func(r *Report) (string, bool) {
		return fmtF2(r.Result.LocalCPUSys)
	}},
	"LOCAL_CPU_METHOD": {[4]string{"Local", "CPU", "Util", "Method"}, func(r *Report) (string, bool) {
		return string(CPUMethodLetter(r.localCPUMethod())), true
	}},
	"LOCAL_SD":        {[4]string{"Local", "Service", "Demand"}, func(r *Report) (string, bool) { return fmtF3(r.Result.LocalServiceDemand) }},
	"REMOTE_CPU_UTIL": {[4]string{"Remote", "CPU", "Util", "%"}, func(r *Report) (string, bool) { return fmtF2(r.Result.RemoteCPU) }},
	"REMOTE_CPU_PERCENT_USER": {[4]string{"Remote", "CPU", "User", "%"}, func(r *Report) (string, bool) {
		return fmtF2(r.Result.RemoteCPUUser)
	}},
	"REMOTE_CPU_PERCENT_SYSTEM": {[4]string{"Remote", "CPU", "System", "%"}, func(r *Report) (string, bool) {
		return fmtF2(r.Result.RemoteCPUSys)
	}},
	"REMOTE_CPU_METHOD": {[4]string{"Remote", "CPU", "Util", "Method"}, func(r *Report) (string, bool) {
		return string(CPUMethodLetter(r.Result.RemoteCPUMethod)), true
	}},
	"REMOTE_SD": {[4]string{"Remote", "Service", "Demand"}, func(r *Report) (string, bool) { return fmtF3(r.Result.RemoteServiceDemand) }},
	"SD_UNITS": {[4]string{"Service", "Demand", "Units"}, func(r *Report) (string, bool) {
		if r.Config.Test.IsRR() && !r.Config.bandUnits() {
			return "usec/Tran", true
		}
		return "usec/KB", true
	}},
	"LOCAL_CPU_COUNT":      {[4]string{"Local", "CPU", "Count"}, func(r *Report) (string, bool) { return fmtInt(r.Result.LocalNumCPUs) }},
	"REMOTE_CPU_COUNT":     {[4]string{"Remote", "CPU", "Count"}, func(r *Report) (string, bool) { return fmtInt(r.Result.RemoteNumCPUs) }},
	"LOCAL_CPU_PEAK_UTIL":  {[4]string{"Local", "Peak", "Per CPU", "Util %"}, func(r *Report) (string, bool) { return fmtF2(r.Result.LocalPeakCPU) }},
	"REMOTE_CPU_PEAK_UTIL": {[4]string{"Remote", "Peak", "Per CPU", "Util %"}, func(r *Report) (string, bool) { return fmtF2(r.Result.RemotePeakCPU) }},
	"CONFIDENCE_LEVEL": {[4]string{"Confidence", "Level", "Percent"}, func(r *Report) (string, bool) {
		return fmtInt(r.Config.confidenceLevel())
	}},
	"CONFIDENCE_INTERVAL": {[4]string{"Confidence", "Width", "Target"}, func(r *Report) (string, bool) {
		return fmt.Sprintf("%f", r.Config.confidenceWidth()), true
	}},
	"CONFIDENCE_ITERATION": {[4]string{"Confidence", "Iterations", "Run"}, func(r *Report) (string, bool) { return fmtInt(len(r.Iterations)) }},
	"THROUGHPUT_CONFID":    {[4]string{"Throughput", "Confidence", "Width (%)"}, func(r *Report) (string, bool) { return fmtF3(r.confid(r.ThroughputInterval)) }},
	"LOCAL_CPU_CONFID":     {[4]string{"Local", "CPU", "Confidence", "Width (%)"}, func(r *Report) (string, bool) { return fmtF3(r.confid(r.LocalCPUInterval)) }},
	"REMOTE_CPU_CONFID":    {[4]string{"Remote", "CPU", "Confidence", "Width (%)"}, func(r *Report) (string, bool) { return fmtF3(r.confid(r.RemoteCPUInterval)) }},
	"TRANSACTION_RATE": {[4]string{"Transaction", "Rate", "Tran/s"}, func(r *Report) (string, bool) {
		return fmtF3(r.transactionRate())
	}},
	"RT_LATENCY": {[4]string{"Round", "Trip", "Latency", "usec/tran"}, func(r *Report) (string, bool) {
		if tr := r.transactionRate(); tr > 0 && r.Config.Test.IsRR() {
			return fmtF3(1e6 / tr)
		}
		return fmtF3(-1)
	}},
	"BURST_SIZE":               {[4]string{"Initial", "Burst", "Requests"}, func(r *Report) (string, bool) { return "0", true }},
	"REMOTE_TRANSPORT_RETRANS": {[4]string{"Remote", "Transport", "Retransmissions"}, func(r *Report) (string, bool) { return fmtInt(r.Result.RemoteRetrans) }},
	"LOCAL_SEND_THROUGHPUT": {[4]string{"Local", "Send", "Throughput"}, func(r *Report) (string, bool) {
		return fmtF2(r.bytesThroughput(r.Result.BytesSent))
	}},
	"LOCAL_RECV_THROUGHPUT": {[4]string{"Local", "Recv", "Throughput"}, func(r *Report) (string, bool) {
		return fmtF2(r.bytesThroughput(r.Result.BytesReceived))
	}},
	"REMOTE_SEND_THROUGHPUT": {[4]string{"Remote", "Send", "Throughput"}, func(r *Report) (string, bool) {
		return fmtF2(r.bytesThroughput(r.Result.RemoteBytesSent))
	}},
	"REMOTE_RECV_THROUGHPUT": {[4]string{"Remote", "Recv", "Throughput"}, func(r *Report) (string, bool) {
		return fmtF2(r.bytesThroughput(r.Result.RemoteBytesReceived))
	}},
	"LOCAL_SEND_CALLS":        {[4]string{"Local", "Send", "Calls"}, func(r *Report) (string, bool) { return fmtInt(r.Result.SendCalls) }},
	"LOCAL_RECV_CALLS":        {[4]string{"Local", "Recv", "Calls"}, func(r *Report) (string, bool) { return fmtInt(r.Result.RecvCalls) }},
	"LOCAL_TRANSPORT_RETRANS": {[4]string{"Local", "Transport", "Retransmissions"}, func(r *Report) (string, bool) { return fmtInt(r.Result.LocalRetrans) }},
	"TRANSPORT_MSS":           {[4]string{"Transport", "MSS", "bytes"}, func(r *Report) (string, bool) { return fmtInt(r.Result.TransportMSS) }},
	"LOCAL_CONG_CONTROL":      {[4]string{"Local", "Congestion", "Control", "Algorithm"}, func(r *Report) (string, bool) { return fmtStr(r.Result.LocalCongControl) }},
	"REMOTE_SEND_CALLS":       {[4]string{"Remote", "Send", "Calls"}, func(r *Report) (string, bool) { return fmtInt(r.Result.RemoteSendCalls) }},
	"REMOTE_RECV_CALLS":       {[4]string{"Remote", "Recv", "Calls"}, func(r *Report) (string, bool) { return fmtInt(r.Result.RemoteRecvCalls) }},
	"LOCAL_BYTES_SENT":        {[4]string{"Local", "Bytes", "Sent"}, func(r *Report) (string, bool) { return fmtInt(r.Result.BytesSent) }},
	"LOCAL_BYTES_RECVD":       {[4]string{"Local", "Bytes", "Received"}, func(r *Report) (string, bool) { return fmtInt(r.Result.BytesReceived) }},
	"REMOTE_BYTES_SENT":       {[4]string{"Remote", "Bytes", "Sent"}, func(r *Report) (string, bool) { return fmtInt(r.Result.RemoteBytesSent) }},
	"REMOTE_BYTES_RECVD":      {[4]string{"Remote", "Bytes", "Received"}, func(r *Report) (string, bool) { return fmtInt(r.Result.RemoteBytesReceived) }},
	"LOCAL_BYTES_XFERD": {[4]string{"Local", "Bytes", "Xferred"}, func(r *Report) (string, bool) {
		return fmt.Sprintf("%.0f", float64(r.Result.BytesSent+r.Result.BytesReceived)), true
	}},
	"REMOTE_BYTES_XFERD": {[4]string{"Remote", "Bytes", "Xferred"}, func(r *Report) (string, bool) {
		return fmt.Sprintf("%.0f", float64(r.Result.RemoteBytesSent+r.Result.RemoteBytesReceived)), true
	}},
	"LOCAL_NODELAY":             {[4]string{"Local", "NODELAY"}, func(r *Report) (string, bool) { return boolInt(r.Config.NoDelay), true }},
	"REMOTE_NODELAY":            {[4]string{"Remote", "NODELAY"}, func(r *Report) (string, bool) { return boolInt(r.Config.NoDelay), true }},
	"MIN_LATENCY":               {[4]string{"Minimum", "Latency", "Microseconds"}, func(r *Report) (string, bool) { return fmtInt(r.Result.Latency.Min) }},
	"MAX_LATENCY":               {[4]string{"Maximum", "Latency", "Microseconds"}, func(r *Report) (string, bool) { return fmtInt(r.Result.Latency.Max) }},
	"P50_LATENCY":               {[4]string{"50th", "Percentile", "Latency", "Microseconds"}, func(r *Report) (string, bool) { return fmtInt(r.Result.Latency.P50) }},
	"P90_LATENCY":               {[4]string{"90th", "Percentile", "Latency", "Microseconds"}, func(r *Report) (string, bool) { return fmtInt(r.Result.Latency.P90) }},
	"P99_LATENCY":               {[4]string{"99th", "Percentile", "Latency", "Microseconds"}, func(r *Report) (string, bool) { return fmtInt(r.Result.Latency.P99) }},
	"MEAN_LATENCY":              {[4]string{"Mean", "Latency", "Microseconds"}, func(r *Report) (string, bool) { return fmtF2(r.Result.Latency.Mean) }},
	"STDDEV_LATENCY":            {[4]string{"Stddev", "Latency", "Microseconds"}, func(r *Report) (string, bool) { return fmtF2(r.Result.Latency.StdDev) }},
	"REMOTE_CONG_CONTROL":       {[4]string{"Remote", "Congestion", "Control", "Algorithm"}, func(r *Report) (string, bool) { return fmtStr(r.Result.RemoteCongControl) }},
	"LOCAL_CPU_PERCENT_IOWAIT":  {[4]string{"Local", "CPU", "I/O", "%"}, func(r *Report) (string, bool) { return fmtF2(r.Result.LocalCPUIOWait) }},
	"LOCAL_CPU_PERCENT_IRQ":     {[4]string{"Local", "CPU", "IRQ", "%"}, func(r *Report) (string, bool) { return fmtF2(r.Result.LocalCPUIRQ) }},
	"LOCAL_CPU_PERCENT_SWINTR":  {[4]string{"Local", "CPU", "swintr", "%"}, func(r *Report) (string, bool) { return fmtF2(r.Result.LocalCPUSoftIRQ) }},
	"REMOTE_CPU_PERCENT_IOWAIT": {[4]string{"Remote", "CPU", "I/O", "%"}, func(r *Report) (string, bool) { return fmtF2(r.Result.RemoteCPUIOWait) }},
	"REMOTE_CPU_PERCENT_IRQ":    {[4]string{"Remote", "CPU", "IRQ", "%"}, func(r *Report) (string, bool) { return fmtF2(r.Result.RemoteCPUIRQ) }},
	"REMOTE_CPU_PERCENT_SWINTR": {[4]string{"Remote", "CPU", "swintr", "%"}, func(r *Report) (string, bool) { return fmtF2(r.Result.RemoteCPUSoftIRQ) }},
	// Buffer handling: ring widths, offsets and alignments (netsh.c's
	// defaults: alignment 8, offset 0), dirty/clean counts (-1: netperf
	// built without DIRTY), CPU binding (-1: no -T), TCP_CORK (0: off).
	"LOCAL_BYTES_PER_RECV": {[4]string{"Local", "Bytes", "Per", "Recv"}, func(r *Report) (string, bool) { return fmtF2(perCall(r.Result.BytesReceived, r.Result.RecvCalls)) }},
	"LOCAL_BYTES_PER_SEND": {[4]string{"Local", "Bytes", "Per", "Send"}, func(r *Report) (string, bool) { return fmtF2(perCall(r.Result.BytesSent, r.Result.SendCalls)) }},
	"REMOTE_BYTES_PER_RECV": {[4]string{"Remote", "Bytes", "Per", "Recv"}, func(r *Report) (string, bool) {
		return fmtF2(perCall(r.Result.RemoteBytesReceived, r.Result.RemoteRecvCalls))
	}},
	"REMOTE_BYTES_PER_SEND": {[4]string{"Remote", "Bytes", "Per", "Send"}, func(r *Report) (string, bool) {
		return fmtF2(perCall(r.Result.RemoteBytesSent, r.Result.RemoteSendCalls))
	}},
	"LOCAL_SEND_WIDTH":        {[4]string{"Local", "Send", "Width"}, func(r *Report) (string, bool) { return fmtInt(r.Result.LocalSendWidth) }},
	"LOCAL_RECV_WIDTH":        {[4]string{"Local", "Recv", "Width"}, func(r *Report) (string, bool) { return fmtInt(r.Result.LocalRecvWidth) }},
	"REMOTE_SEND_WIDTH":       {[4]string{"Remote", "Send", "Width"}, func(r *Report) (string, bool) { return fmtInt(r.Result.RemoteSendWidth) }},
	"REMOTE_RECV_WIDTH":       {[4]string{"Remote", "Recv", "Width"}, func(r *Report) (string, bool) { return fmtInt(r.Result.RemoteRecvWidth) }},
	"LOCAL_SEND_OFFSET":       {[4]string{"Local", "Send", "Offset"}, func(r *Report) (string, bool) { return fmtInt(r.Config.LocalSendOffset) }},
	"LOCAL_RECV_OFFSET":       {[4]string{"Local", "Recv", "Offset"}, func(r *Report) (string, bool) { return fmtInt(r.Config.LocalRecvOffset) }},
	"REMOTE_SEND_OFFSET":      {[4]string{"Remote", "Send", "Offset"}, func(r *Report) (string, bool) { return fmtInt(r.Config.RemoteSendOffset) }},
	"REMOTE_RECV_OFFSET":      {[4]string{"Remote", "Recv", "Offset"}, func(r *Report) (string, bool) { return fmtInt(r.Config.RemoteRecvOffset) }},
	"LOCAL_SEND_ALIGN":        {[4]string{"Local", "Send", "Alignment"}, func(r *Report) (string, bool) { return fmtInt(defaultAlignment) }},
	"LOCAL_RECV_ALIGN":        {[4]string{"Local", "Recv", "Alignment"}, func(r *Report) (string, bool) { return fmtInt(defaultAlignment) }},
	"REMOTE_SEND_ALIGN":       {[4]string{"Remote", "Send", "Alignment"}, func(r *Report) (string, bool) { return fmtInt(defaultAlignment) }},
	"REMOTE_RECV_ALIGN":       {[4]string{"Remote", "Recv", "Alignment"}, func(r *Report) (string, bool) { return fmtInt(defaultAlignment) }},
	"LOCAL_SEND_DIRTY_COUNT":  {[4]string{"Local", "Send", "Dirty", "Count"}, func(r *Report) (string, bool) { return "-1", true }},
	"LOCAL_RECV_DIRTY_COUNT":  {[4]string{"Local", "Recv", "Dirty", "Count"}, func(r *Report) (string, bool) { return "-1", true }},
	"LOCAL_RECV_CLEAN_COUNT":  {[4]string{"Local", "Recv", "Clean", "Count"}, func(r *Report) (string, bool) { return "-1", true }},
	"REMOTE_SEND_DIRTY_COUNT": {[4]string{"Remote", "Send", "Dirty", "Count"}, func(r *Report) (string, bool) { return "-1", true }},
	"REMOTE_RECV_DIRTY_COUNT": {[4]string{"Remote", "Recv", "Dirty", "Count"}, func(r *Report) (string, bool) { return "-1", true }},
	"REMOTE_RECV_CLEAN_COUNT": {[4]string{"Remote", "Recv", "Clean", "Count"}, func(r *Report) (string, bool) { return "-1", true }},
	"LOCAL_CPU_PEAK_ID":       {[4]string{"Local", "Peak", "Per CPU", "ID"}, func(r *Report) (string, bool) { return fmtInt(r.Result.LocalPeakCPUID) }},
	"REMOTE_CPU_PEAK_ID":      {[4]string{"Remote", "Peak", "Per CPU", "ID"}, func(r *Report) (string, bool) { return fmtInt(r.Result.RemotePeakCPUID) }},
	"LOCAL_CPU_BIND":          {[4]string{"Local", "CPU", "Bind"}, func(r *Report) (string, bool) { return "-1", true }},
	"REMOTE_CPU_BIND":         {[4]string{"Remote", "CPU", "Bind"}, func(r *Report) (string, bool) { return "-1", true }},
	"LOCAL_CORK":              {[4]string{"Local", "Cork"}, func(r *Report) (string, bool) { return "0", true }},
	"REMOTE_CORK":             {[4]string{"Remote", "Cork"}, func(r *Report) (string, bool) { return "0", true }},
	// No -w/-b pacing (a netperf built without intervals reports 0).
	"LOCAL_INTERVAL_USECS":  {[4]string{"Local", "Interval", "Usecs"}, func(r *Report) (string, bool) { return "0", true }},
	"LOCAL_INTERVAL_BURST":  {[4]string{"Local", "Interval", "Burst"}, func(r *Report) (string, bool) { return "0", true }},
	"REMOTE_INTERVAL_USECS": {[4]string{"Remote", "Interval", "Usecs"}, func(r *Report) (string, bool) { return "0", true }},
	"REMOTE_INTERVAL_BURST": {[4]string{"Remote", "Interval", "Burst"}, func(r *Report) (string, bool) { return "0", true }},
	"UUID":                  {[4]string{"Test", "UUID"}, func(r *Report) (string, bool) { return fmtStr(r.UUID) }},
	// uname(2) of this host, as netperf's get_local_system_info.
	"LOCAL_SYSNAME": {[4]string{"Local", "Sysname"}, func(r *Report) (string, bool) { return fmtStr(localUname().sysname) }},
	"LOCAL_RELEASE": {[4]string{"Local", "Release"}, func(r *Report) (string, bool) { return fmtStr(localUname().release) }},
	"LOCAL_VERSION": {[4]string{"Local", "Version"}, func(r *Report) (string, bool) { return fmtStr(localUname().version) }},
	"LOCAL_MACHINE": {[4]string{"Local", "Machine"}, func(r *Report) (string, bool) { return fmtStr(localUname().machine) }},
	"COMMAND_LINE":  {[4]string{"Command", "Line"}, func(r *Report) (string, bool) { return `"` + r.Config.CommandLine + `"`, true }},
}

// perCall is bytes per call, 0 without calls (netperf's bytes_per_recv,
// bytes_per_send).
func perCall(bytes, calls uint64) float64 {
	if calls == 0 {
		return 0
	}
	return float64(bytes) / float64(calls)
}

func boolInt(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// throughputUnits is netperf's thruput_format_str: "Trans" for RR tests,
// else the -f units.
func (r *Report) throughputUnits() string {
	if r.Config.Test.IsRR() && !r.Config.bandUnits() {
		return "Trans"
	}
	return unitsName(r.Config.units())
}

// remoteEnd is a size at the end of the test, or at its start when the
// server did not report one (classic tests).
func (r *Report) remoteEnd(end, start int32) int32 {
	if end != 0 {
		return end
	}
	return start
}

// rrSize is a request or response size: -1 outside RR tests, as netperf.
func (r *Report) rrSize(v int32) int32 {
	if !r.Config.Test.IsRR() {
		return -1
	}
	return v
}

func (r *Report) localCPUMethod() uint32 {
	if r.Result.LocalCPU >= 0 {
		return r.Result.LocalCPUMethod
	}
	return CPUMethodUnknown
}

// confid is a confidence interval as netperf prints it: -1 without -i.
func (r *Report) confid(v float64) float64 {
	if r.Config.MaxIterations <= 1 {
		return -1
	}
	return v
}

// transactionRate is transactions per second (RR tests' throughput).
func (r *Report) transactionRate() float64 {
	if r.Result.TransactionRate > 0 {
		return r.Result.TransactionRate
	}
	if r.Config.Test.IsRR() && !r.Config.bandUnits() {
		return r.Result.Throughput
	}
	if secs := r.Result.Elapsed.Seconds(); secs > 0 {
		return float64(r.Result.Transactions) / secs
	}
	return 0
}

func (r *Report) bytesThroughput(b uint64) float64 {
	return throughputIn(r.Config.units(), float64(b), r.Result.Elapsed.Seconds())
}

func (c *Config) confidenceLevel() int {
	if c.ConfidenceLevel == 95 {
		return 95
	}
	return 99
}

func (c *Config) confidenceWidth() float64 {
	if c.ConfidenceWidth > 0 {
		return c.ConfidenceWidth
	}
	return 5
}

// DefaultOmniSelection is what -o, -O and -k print without a list:
// netperf's choice per test (set_output_list_by_test).
func DefaultOmniSelection(test TestType, cpu bool) string {
	const tput = "ELAPSED_TIME,THROUGHPUT,THROUGHPUT_UNITS"
	const cpuSel = "LOCAL_CPU_UTIL,LOCAL_CPU_PERCENT_USER,LOCAL_CPU_PERCENT_SYSTEM,LOCAL_CPU_PERCENT_IOWAIT,LOCAL_CPU_PERCENT_IRQ,LOCAL_CPU_PERCENT_SWINTR,LOCAL_CPU_METHOD,REMOTE_CPU_UTIL,REMOTE_CPU_PERCENT_USER,REMOTE_CPU_PERCENT_SYSTEM,REMOTE_CPU_PERCENT_IOWAIT,REMOTE_CPU_PERCENT_IRQ,REMOTE_CPU_PERCENT_SWINTR,REMOTE_CPU_METHOD,LOCAL_SD,REMOTE_SD,SD_UNITS"
	sel := "LSS_SIZE_END,RSR_SIZE_END,LOCAL_SEND_SIZE," + tput
	switch {
	case test.IsRR():
		sel = "LSS_SIZE_END,LSR_SIZE_END,RSR_SIZE_END,RSS_SIZE_END,REQUEST_SIZE,RESPONSE_SIZE," + tput
	case test == TCPMaerts:
		sel = "RSS_SIZE_END,LSR_SIZE_END,REMOTE_SEND_SIZE," + tput
	}
	if cpu {
		sel += "," + cpuSel
	}
	return sel
}

// maxOmniBlocks is NETPERF_MAX_BLOCKS: selection blocks past the fourth
// are ignored.
const maxOmniBlocks = 4

// parseSelection splits a selection into blocks (';') of names (',' or
// ' '), upper-cased, unknown names dropped as netperf drops them. A block
// keeps its position even when empty (-O numbers its blank separators by
// it); OUTPUT_END ends its block, as it ends netperf's output list.
func parseSelection(sel string) [][]string {
	var blocks [][]string
	for _, blk := range strings.Split(sel, ";") {
		if len(blocks) == maxOmniBlocks {
			break
		}
		var names []string
		for _, n := range strings.FieldsFunc(blk, func(r rune) bool { return r == ',' || r == ' ' }) {
			n = strings.ToUpper(n)
			if n == "OUTPUT_END" {
				break
			}
			if _, ok := omniOutputs[n]; ok {
				names = append(names, n)
			}
		}
		blocks = append(blocks, names)
	}
	return blocks
}

// KnownOmniOutput reports whether name is an output selector this client
// prints.
func KnownOmniOutput(name string) bool {
	_, ok := omniOutputs[strings.ToUpper(name)]
	return ok || strings.EqualFold(name, "all")
}

// WriteOmni prints the report in one of netperf's omni output formats:
// the banner (with headers), then the selected values. selection is a
// comma-separated list of output names, blocks separated by ';'; empty
// means DefaultOmniSelection.
func (r *Report) WriteOmni(w io.Writer, mode OmniMode, selection string, headers bool) error {
	if selection == "" {
		selection = DefaultOmniSelection(r.Config.Test, r.Config.LocalCPU || r.Config.RemoteCPU)
	}
	if strings.EqualFold(selection, "all") {
		selection = allOmniSelection()
	}
	var b strings.Builder
	if headers {
		b.WriteString(r.Banner())
		r.writeConfidenceWarning(&b)
	}
	blocks := parseSelection(selection)
	if mode == OmniCSV {
		writeOmniCSV(&b, r, blocks, headers)
	}
	for bi, blk := range blocks {
		if len(blk) == 0 {
			continue
		}
		switch mode {
		case OmniKeyval:
			for _, n := range blk {
				if v, ok := omniOutputs[n].value(r); ok {
					fmt.Fprintf(&b, "%s=%s\n", n, v)
				}
			}
		case OmniHuman:
			// Each column is as wide as its longest header line or its
			// value plus one, and one more for the gap; lines keep their
			// trailing spaces, as netperf prints them.
			var hdr [4]strings.Builder
			var val strings.Builder
			for _, n := range blk {
				o := omniOutputs[n]
				v, ok := o.value(r)
				width := 0
				for _, l := range o.lines {
					width = max(width, len(l))
				}
				if ok {
					width = max(width, len(v)+1)
				} else {
					v = "" // no value: a blank column
				}
				width++
				for k, l := range o.lines {
					fmt.Fprintf(&hdr[k], "%-*s", width, l)
				}
				fmt.Fprintf(&val, "%-*s", width, v)
			}
			if bi > 0 {
				b.WriteString("\n")
			}
			if headers {
				for k := range hdr {
					b.WriteString(hdr[k].String() + "\n")
				}
			}
			b.WriteString(val.String() + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeOmniCSV prints -o's two lines: every block's outputs on one header
// line and one value line (print_omni_csv keeps one buffer for all
// blocks). Each header is its lines joined by spaces; a value is followed
// by a comma, an output without a value by a comma and a space (the space
// netperf's blank-filled buffer leaves where it skips), and the last
// character is cut. Nothing is printed when the first block is empty.
func writeOmniCSV(b *strings.Builder, r *Report, blocks [][]string, headers bool) {
	if len(blocks) == 0 || len(blocks[0]) == 0 {
		return
	}
	var hdr, val strings.Builder
	for _, blk := range blocks {
		for _, n := range blk {
			o := omniOutputs[n]
			for _, l := range o.lines {
				if l == "" {
					break
				}
				hdr.WriteString(l + " ")
			}
			h := hdr.String()
			hdr.Reset()
			hdr.WriteString(h[:len(h)-1] + ",")
			if v, ok := o.value(r); ok {
				val.WriteString(v + ",")
			} else {
				val.WriteString(", ")
			}
		}
	}
	if headers {
		h := hdr.String()
		b.WriteString(h[:len(h)-1] + "\n")
	}
	v := val.String()
	b.WriteString(v[:len(v)-1] + "\n")
}

// WriteHistogram prints what netperf -v 2 adds after the omni outputs
// (-o, -O, -k) when it was built with --enable-histogram: a blank line,
// "Histogram of <kind> times" and HIST_report's rows (nettest_omni.c's
// send_omni_inner, netlib.c's HIST_report), the counts summed over the
// -i iterations as netperf keeps one histogram for them all. Stream tests
// print nothing: this client does not time their single sends and
// receives.
func (r *Report) WriteHistogram(w io.Writer) error {
	var kind string
	switch r.Config.Test {
	case TCPRR, UDPRR:
		kind = "request/response"
	case TCPCRR:
		kind = "connect/request/response/close"
	case TCPCC:
		kind = "connect/close"
	default:
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nHistogram of %s times\n", kind)
	b.WriteString(r.histogramReport())
	_, err := io.WriteString(w, b.String())
	return err
}

// histogramReport is netlib.c's HIST_report of the transaction times,
// summed over the -i iterations.
func (r *Report) histogramReport() string {
	var h Histogram
	results := r.Iterations
	if len(results) == 0 {
		results = []Result{r.Result}
	}
	for _, it := range results {
		if it.Histogram != nil {
			h.merge(it.Histogram)
		}
	}
	var b strings.Builder
	for row, title := range histogramRows {
		b.WriteString(title)
		for _, c := range h.Rows[row] {
			fmt.Fprintf(&b, ": %4d", c)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, ">100_SECS: %d\n", h.Over100)
	fmt.Fprintf(&b, "HIST_TOTAL:      %d\n", h.Total)
	return b.String()
}
