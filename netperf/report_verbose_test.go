package netperf_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/netperf"
)

// TestWriteVerbose checks the blocks netperf -v 2 prints below the classic
// tables of its migrated tests, expected strings worked out by hand from
// nettest_omni.c's ksink_fmt/ksink_fmt2 format strings and arguments
// (send_tcp_stream, send_tcp_maerts, send_tcp_rr, send_tcp_conn_rr).
// Planted bugs, each caught: TCP_STREAM's remote "Recvs Per" dividing by
// our send calls (16384.00 for 8192.00); TCP_RR printing the alignment 8
// in the remote column where stock prints the remote receive offset;
// TCP_RR's latency in ms; TCP_STREAM's x/0 as Go's "+Inf".
func TestWriteVerbose(t *testing.T) {
	res := netperf.Result{Elapsed: time.Second, BytesSent: 1 << 20, SendCalls: 64, RemoteRecvCalls: 128, TransportMSS: 1448,
		BytesReceived: 1 << 20, RecvCalls: 256, RemoteBytesSent: 1 << 20, RemoteSendCalls: 64, Throughput: 20000}
	cases := []struct {
		test netperf.TestType
		edit func(*netperf.Config, *netperf.Result)
		want string
	}{
		{netperf.TCPStream, nil, "\nAlignment      Offset         Bytes    Bytes       Sends   Bytes    Recvs\n" +
			"Local  Remote  Local  Remote  Xfered   Per                 Per\n" +
			"Send   Recv    Send   Recv             Send (avg)          Recv (avg)\n" +
			"    8       8      0       0 1048576  16384.00        64   8192.00    128\n" +
			"\nMaximum\nSegment\nSize (bytes)\n  1448\n"},
		{netperf.TCPStream, func(c *netperf.Config, r *netperf.Result) {
			r.RemoteRecvCalls = 0
			c.LocalSendOffset, c.RemoteRecvOffset = 3, 5
		},
			"\nAlignment      Offset         Bytes    Bytes       Sends   Bytes    Recvs\n" +
				"Local  Remote  Local  Remote  Xfered   Per                 Per\n" +
				"Send   Recv    Send   Recv             Send (avg)          Recv (avg)\n" +
				"    8       8      3       5 1048576  16384.00        64      inf      0\n" +
				"\nMaximum\nSegment\nSize (bytes)\n  1448\n"},
		{netperf.TCPMaerts, nil, "\nAlignment      Offset         Bytes    Bytes       Recvs   Bytes    Sends\n" +
			"Local  Remote  Local  Remote  Xfered   Per                 Per\n" +
			"Recv   Send    Recv   Send             Recv (avg)          Send (avg)\n" +
			"    8       8      0       0 1048576  4096.00       256   16384.00     64\n" +
			"\nMaximum\nSegment\nSize (bytes)\n  1448\n"},
		{netperf.TCPRR, func(c *netperf.Config, r *netperf.Result) { c.RemoteRecvOffset = 4 },
			"Alignment      Offset         RoundTrip  Trans    Throughput\n" +
				"Local  Remote  Local  Remote  Latency    Rate     10^6bits/s\n" +
				"Send   Recv    Send   Recv    usec/Tran  per sec  Outbound   Inbound\n" +
				"    8      4       0      4   50.000   20000.000 0.160     0.160 \n"},
		{netperf.TCPCRR, nil, "\nAlignment      Offset\nLocal  Remote  Local  Remote\nSend   Recv    Send   Recv\n    8      8       0      0\n"},
		{netperf.TCPCC, func(c *netperf.Config, r *netperf.Result) { c.RemoteRecvOffset = 4 },
			"\nAlignment      Offset\nLocal  Remote  Local  Remote\nSend   Recv    Send   Recv\n    8      4       0      4\n"},
		{netperf.UDPStream, nil, ""},
		{netperf.UDPRR, nil, ""},
	}
	for _, tc := range cases {
		cfg := netperf.NewConfig("127.0.0.1", tc.test)
		r := res
		if tc.edit != nil {
			tc.edit(&cfg, &r)
		}
		rep := &netperf.Report{Config: cfg, Family: netperf.FamilyIPv4, Result: r}
		var got strings.Builder
		if err := rep.WriteVerbose(&got); err != nil {
			t.Fatal(err)
		}
		if got.String() != tc.want {
			t.Errorf("%s:\n%q\nwant\n%q", tc.test, got.String(), tc.want)
		}
	}
}

// TestHistogramBuild checks --histogram, a histogram-enabled build
// (print_top_test_header, send_tcp_rr, send_udp_rr): " : histogram"
// before " : demo" in the banner, and at -v 2 the transaction-time
// histogram after the RR block, UDP_RR's title misspelt as stock's; none
// without it (the captured build). Planted bugs, each caught: the
// histogram printed without --histogram; UDP_RR's title spelt right.
func TestHistogramBuild(t *testing.T) {
	for _, tc := range []struct {
		test      netperf.TestType
		histogram bool
		title     string
	}{
		{netperf.TCPRR, true, "\nHistogram of request/response times\nUNIT_USEC     :"},
		{netperf.UDPRR, true, "\nHistogram of request/reponse times.\nUNIT_USEC     :"},
		{netperf.TCPRR, false, ""},
	} {
		cfg := netperf.NewConfig("127.0.0.1", tc.test)
		cfg.Histogram = tc.histogram
		rep := &netperf.Report{Config: cfg, Family: netperf.FamilyIPv4, Result: netperf.Result{Throughput: 100, Elapsed: time.Second}}
		var got strings.Builder
		if err := rep.WriteVerbose(&got); err != nil {
			t.Fatal(err)
		}
		if has := strings.Contains(got.String(), "Histogram"); has != tc.histogram || (tc.histogram && !strings.Contains(got.String(), tc.title)) {
			t.Errorf("%s histogram=%v:\n%s", tc.test, tc.histogram, got.String())
		}
		if banner := rep.Banner(); strings.Contains(banner, " : histogram : demo") != tc.histogram {
			t.Errorf("%s histogram=%v: banner %q", tc.test, tc.histogram, banner)
		}
	}
}

// TestWriteTerse checks -v 0 against each migrated test's tput_fmt_0 and
// cpu_fmt_0 in nettest_omni.c: a trailing space (the empty result brand)
// for TCP_STREAM, TCP_MAERTS, TCP_RR and UDP_RR, none for TCP_CRR and
// UDP_STREAM, the method letter after the service demand. Planted bug:
// every test printed "%7.2f\n" (the old output): the TCP_RR and
// TCP_STREAM cases fail.
func TestWriteTerse(t *testing.T) {
	res := netperf.Result{Throughput: 1234.5, LocalServiceDemand: 1.25, RemoteServiceDemand: 2.5,
		LocalCPUMethod: netperf.CPUMethodProcStat, RemoteCPUMethod: netperf.CPUMethodProcStat}
	cases := []struct {
		test       netperf.TestType
		lcpu, rcpu bool
		want       string
	}{
		{netperf.TCPRR, false, false, "1234.50 \n"},
		{netperf.TCPStream, false, false, "1234.50 \n"},
		{netperf.TCPStream, false, true, " 2.500 S \n"},
		{netperf.TCPMaerts, true, true, " 1.250 S \n"},
		{netperf.TCPCRR, false, false, "1234.50\n"},
		{netperf.TCPCRR, true, false, " 1.250\n"},
		{netperf.UDPStream, false, false, "1234.50\n"},
		{netperf.UDPStream, false, true, "  2.50 S\n"},
		{netperf.UDPRR, false, false, "1234.50 \n"},
	}
	for _, tc := range cases {
		cfg := netperf.NewConfig("127.0.0.1", tc.test)
		cfg.LocalCPU, cfg.RemoteCPU = tc.lcpu, tc.rcpu
		rep := &netperf.Report{Config: cfg, Family: netperf.FamilyIPv4, Result: res}
		var got strings.Builder
		if err := rep.WriteTerse(&got, false); err != nil {
			t.Fatal(err)
		}
		if got.String() != tc.want {
			t.Errorf("%s lcpu=%v rcpu=%v: %q, want %q", tc.test, tc.lcpu, tc.rcpu, got.String(), tc.want)
		}
	}
}

// TestResultBrand checks the global -B tag as nettest_omni.c prints it:
// in the "%s" that ends the result line of TCP_STREAM, TCP_MAERTS, TCP_RR
// and UDP_RR (-v 1 and -v 0), only when headers are off (-P 0); never
// for TCP_CRR (its formats have no "%s"); RESULT_BRAND as "\"%s\"".
// Planted bugs, each caught: the brand printed with headers on; the brand
// on TCP_CRR's line; RESULT_BRAND without its quotes.
func TestResultBrand(t *testing.T) {
	res := netperf.Result{Throughput: 1234.5, Elapsed: time.Second, LocalSendBuf: 16384, RemoteRecvBuf: 131072, LocalSendSize: 16384,
		RequestSize: 1, ResponseSize: 1, LocalRecvBuf: 131072, RemoteSendBuf: 16384}
	cases := []struct {
		test    netperf.TestType
		headers bool
		terse   bool
		want    string
	}{
		{netperf.TCPStream, false, false, "131072  16384  16384    1.00     1234.50   run7\n"},
		{netperf.TCPStream, true, false, "131072  16384  16384    1.00     1234.50   \n"},
		{netperf.TCPRR, false, false, "16384  131072 1        1       1.00     1234.50   run7\n16384  131072\n"},
		{netperf.TCPRR, false, true, "1234.50 run7\n"},
		{netperf.TCPCRR, false, false, "16384  131072 1        1       1.00     1234.50   \n16384  131072\n"},
	}
	for _, tc := range cases {
		cfg := netperf.NewConfig("127.0.0.1", tc.test)
		cfg.ResultBrand = "run7"
		rep := &netperf.Report{Config: cfg, Family: netperf.FamilyIPv4, Result: res, ConfidenceMet: true}
		var got strings.Builder
		var err error
		if tc.terse {
			err = rep.WriteTerse(&got, tc.headers)
		} else {
			err = rep.WriteText(&got, tc.headers)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(got.String(), tc.want) {
			t.Errorf("%s headers=%v terse=%v:\n%q\nwant the suffix\n%q", tc.test, tc.headers, tc.terse, got.String(), tc.want)
		}
	}
	cfg := netperf.NewConfig("127.0.0.1", netperf.TCPRR)
	cfg.ResultBrand = "run7"
	rep := &netperf.Report{Config: cfg, Family: netperf.FamilyIPv4, Result: res}
	var got strings.Builder
	if err := rep.WriteOmni(&got, netperf.OmniKeyval, "RESULT_BRAND", false); err != nil {
		t.Fatal(err)
	}
	if got.String() != "RESULT_BRAND=\"run7\"\n" {
		t.Errorf("RESULT_BRAND: %q", got.String())
	}
}

// TestCPULayouts checks the -c/-C tables whose formats differ from
// TCP_RR's (expected lines from the C format strings run through
// Python's printf-style formatting, which follows C's): TCP_CRR
// (send_tcp_conn_rr) and TCP_CC (nettest_bsd.c's send_tcp_cc) one space
// wider before the remote CPU, no trailing brand space and a title
// without method letters; UDP_RR one space wider, with the brand's; and
// UDP_STREAM's two-line table with CPU and service demand per side.
// Planted bugs, each caught: TCP_CRR with TCP_RR's line; UDP_STREAM
// ignoring -c (the old table).
func TestCPULayouts(t *testing.T) {
	rr := netperf.Result{LocalSendBuf: 16384, LocalRecvBuf: 131072, RequestSize: 1, ResponseSize: 1, Elapsed: time.Second,
		Throughput: 1234.5, LocalCPU: 10.5, RemoteCPU: 20.25, LocalServiceDemand: 3.125, RemoteServiceDemand: 4.5,
		RemoteSendBuf: 16384, RemoteRecvBuf: 131072, LocalCPUMethod: netperf.CPUMethodProcStat, RemoteCPUMethod: netperf.CPUMethodProcStat}
	us := netperf.Result{LocalSendBuf: 212992, LocalSendSize: 65507, Elapsed: time.Second, SendCalls: 1000, Throughput: 523.9,
		LocalCPU: 10.5, LocalServiceDemand: 3.125, RemoteRecvBuf: 212992, RemoteRecvCalls: 999, RemoteThroughput: 523.4,
		RemoteCPU: 20.25, RemoteServiceDemand: 4.5, LocalCPUMethod: netperf.CPUMethodProcStat, RemoteCPUMethod: netperf.CPUMethodProcStat}
	cases := []struct {
		test netperf.TestType
		res  netperf.Result
		want string
	}{
		{netperf.TCPCRR, rr, "bytes  bytes  bytes   bytes  secs.   per sec  %      %      us/Tr   us/Tr\n\n" +
			"16384  131072 1       1      1.00    1234.50   10.50  20.25  3.125   4.500 \n16384  131072\n"},
		{netperf.TCPCC, rr, "per sec  %      %      us/Tr   us/Tr\n\n" +
			"16384  131072 1       1      1.00    1234.50   10.50  20.25  3.125   4.500 \n16384  131072\n"},
		{netperf.UDPRR, rr, "per sec  % S    % S    us/Tr   us/Tr\n\n" +
			"16384  131072 1       1      1.00    1234.50   10.50  20.25  3.125   4.500  \n16384  131072\n"},
		{netperf.TCPRR, rr, "16384  131072 1       1      1.00    1234.50  10.50  20.25  3.125   4.500  \n16384  131072\n"},
		{netperf.UDPStream, us, "bytes   bytes    secs            #      #   10^6bits/sec % SS     us/KB\n\n" +
			"212992   65507   1.00         1000      0      523.9     10.50    3.125 \n" +
			"212992           1.00          999             523.4     20.25    4.500 \n\n"},
	}
	for _, tc := range cases {
		cfg := netperf.NewConfig("127.0.0.1", tc.test)
		cfg.LocalCPU, cfg.RemoteCPU = true, true
		rep := &netperf.Report{Config: cfg, Family: netperf.FamilyIPv4, Result: tc.res, ConfidenceMet: true}
		if got := reportText(t, rep, true); !strings.HasSuffix(got, tc.want) {
			t.Errorf("%s:\n%q\nwant the suffix\n%q", tc.test, got, tc.want)
		}
	}
}
