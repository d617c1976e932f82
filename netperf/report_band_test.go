package netperf_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/netperf"
)

// TestBandUnitsLayout checks what -f does to the request/response tables
// (nettest_omni.c: with libfmt other than 'x', TCP_RR and UDP_RR print
// tput_title_band or cpu_title_tput, TCP_CRR keeps its "Trans. Rate"
// title; netsh.c defaults libfmt to 'x' only for tests named *RR*). The
// expected text is the C format strings run through Python's
// printf-style formatting, which follows C's. Planted bugs, each caught:
// bandUnits always false (the Trans. title came back); TCP_CRR given the
// band title; the CPU title without %-8.8s (one column short for
// "GBytes"); --classic TCP_RR's CPU title with the migrated us/KB
// (nettest_bsd.c's send_tcp_rr says us/Tr; it has the band titles too).
func TestBandUnitsLayout(t *testing.T) {
	rr := netperf.Result{LocalSendBuf: 16384, LocalRecvBuf: 131072, RequestSize: 32, ResponseSize: 64, Elapsed: time.Second,
		Throughput: 2.81, RemoteSendBuf: 16384, RemoteRecvBuf: 131072}
	cpu := rr
	cpu.Throughput, cpu.LocalCPU, cpu.RemoteCPU, cpu.LocalServiceDemand, cpu.RemoteServiceDemand = 0.02, 10.5, 20.25, 3.125, 4.5
	cpu.LocalCPUMethod, cpu.RemoteCPUMethod = netperf.CPUMethodProcStat, netperf.CPUMethodProcStat
	crr := cpu
	crr.LocalCPU, crr.RemoteCPU = 0, 0
	cases := []struct {
		name    string
		test    netperf.TestType
		units   byte
		cpu     bool
		classic bool
		res     netperf.Result
		want    string
	}{
		{"tcp_rr_K", netperf.TCPRR, 'K', false, false, rr, "Local /Remote\nSocket Size   Request  Resp.   Elapsed  \nSend   Recv   Size     Size    Time     Throughput \nbytes  Bytes  bytes    bytes   secs.    KBytes/sec   \n\n16384  131072 32       64      1.00        2.81   \n16384  131072\n"},
		{"tcp_rr_m_cpu", netperf.TCPRR, 'm', true, false, cpu, "Local /Remote\nSocket Size   Request Resp.  Elapsed Tput     CPU    CPU    S.dem   S.dem\nSend   Recv   Size    Size   Time    10^6bits local  remote local   remote\nbytes  bytes  bytes   bytes  secs.   per sec  % S    % S    us/KB   us/KB\n\n16384  131072 32      64     1.00    0.02    10.50  20.25  3.125   4.500  \n16384  131072\n"},
		{"udp_rr_G_cpu", netperf.UDPRR, 'G', true, false, cpu, "Local /Remote\nSocket Size   Request Resp.  Elapsed Tput     CPU    CPU    S.dem   S.dem\nSend   Recv   Size    Size   Time    GBytes   local  remote local   remote\nbytes  bytes  bytes   bytes  secs.   per sec  % S    % S    us/KB   us/KB\n\n16384  131072 32      64     1.00    0.02     10.50  20.25  3.125   4.500  \n16384  131072\n"},
		{"tcp_crr_g", netperf.TCPCRR, 'g', false, false, crr, "Local /Remote\nSocket Size   Request  Resp.   Elapsed  Trans.\nSend   Recv   Size     Size    Time     Rate         \nbytes  Bytes  bytes    bytes   secs.    per sec   \n\n16384  131072 32       64      1.00        0.02   \n16384  131072\n"},
		{"classic_tcp_rr_K", netperf.TCPRR, 'K', false, true, rr, "Local /Remote\nSocket Size   Request  Resp.   Elapsed  \nSend   Recv   Size     Size    Time     Throughput \nbytes  Bytes  bytes    bytes   secs.    KBytes/sec   \n\n16384  131072 32       64      1.00        2.81   \n16384  131072\n"},
		{"classic_tcp_rr_K_cpu", netperf.TCPRR, 'K', true, true, cpu, "Local /Remote\nSocket Size   Request Resp.  Elapsed Tput     CPU    CPU    S.dem   S.dem\nSend   Recv   Size    Size   Time    KBytes   local  remote local   remote\nbytes  bytes  bytes   bytes  secs.   per sec  % S    % S    us/Tr   us/Tr\n\n16384  131072 32      64     1.00    0.02    10.50  20.25  3.125   4.500  \n16384  131072\n"},
	}
	for _, tc := range cases {
		cfg := netperf.NewConfig("127.0.0.1", tc.test)
		cfg.Units, cfg.Classic = tc.units, tc.classic
		cfg.LocalCPU, cfg.RemoteCPU = tc.cpu, tc.cpu
		rep := &netperf.Report{Config: cfg, Family: netperf.FamilyIPv4, Result: tc.res, ConfidenceMet: true}
		_, table, _ := strings.Cut(reportText(t, rep, true), "\n") // past the banner
		if table != tc.want {
			t.Errorf("%s:\n%q\nwant\n%q", tc.name, table, tc.want)
		}
	}
}

// TestBandUnitsLoopback runs TCP_RR, TCP_CRR and UDP_RR with -f K against
// our server and checks stock's arithmetic (nettest_omni.c
// send_omni_inner): the throughput is the server's bytes both ways in
// the -f units, the transaction rate stays beside it (-v 2's latency),
// THROUGHPUT_UNITS and SD_UNITS name bytes and KB. Planted bugs, each
// caught: the throughput left in transactions/s; our own bytes instead
// of the server's (UDP_RR's lost datagrams aside, equal here, so the
// check is on the formula with the server's counts).
func TestBandUnitsLoopback(t *testing.T) {
	addr, _ := startServer(t, &netperf.Server{})
	for _, test := range []netperf.TestType{netperf.TCPRR, netperf.TCPCRR, netperf.UDPRR} {
		cfg := loopbackConfig(t, addr, test, -100)
		cfg.RequestSize, cfg.ResponseSize, cfg.Units = 32, 64, 'K'
		rep, err := netperf.Run(runCtx(t), cfg)
		if err != nil {
			t.Fatalf("%s: %v", test, err)
		}
		res := rep.Result
		secs := res.Elapsed.Seconds()
		want := float64(res.RemoteBytesSent+res.RemoteBytesReceived) / 1024 / secs
		if res.RemoteBytesSent+res.RemoteBytesReceived == 0 || math.Abs(res.Throughput-want) > 1e-9*want {
			t.Errorf("%s: throughput %v KBytes/s, want %v (server bytes %d+%d over %v s)", test, res.Throughput, want, res.RemoteBytesSent, res.RemoteBytesReceived, secs)
		}
		if tr := float64(res.Transactions) / secs; math.Abs(res.TransactionRate-tr) > 1e-9*tr {
			t.Errorf("%s: transaction rate %v, want %v", test, res.TransactionRate, tr)
		}
		var b strings.Builder
		if err := rep.WriteOmni(&b, netperf.OmniKeyval, "THROUGHPUT_UNITS,SD_UNITS", false); err != nil {
			t.Fatal(err)
		}
		if b.String() != "THROUGHPUT_UNITS=KBytes/s\nSD_UNITS=usec/KB\n" {
			t.Errorf("%s: omni units %q", test, b.String())
		}
	}
}

// TestClassicBandUnits runs --classic TCP_RR with -f K against our
// server: nettest_bsd.c's send_tcp_rr prints the transaction rate times
// the bytes of one transaction (calc_thruput_interval_omni of
// thruput*(req_size+rsp_size) over 1 s), not the server's byte count.
// Planted bug (the migrated formula for classic) caught: the classic
// results carry no bytes sent, so the throughput came out short.
func TestClassicBandUnits(t *testing.T) {
	addr, _ := startServer(t, &netperf.Server{})
	cfg := loopbackConfig(t, addr, netperf.TCPRR, -100)
	cfg.Classic, cfg.RequestSize, cfg.ResponseSize, cfg.Units = true, 32, 64, 'K'
	rep, err := netperf.Run(runCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	res := rep.Result
	tr := float64(res.Transactions) / res.Elapsed.Seconds()
	if want := tr * 96 / 1024; math.Abs(res.Throughput-want) > 1e-9*want {
		t.Errorf("classic TCP_RR -f K: throughput %v, want %v (%d transactions over %v)", res.Throughput, want, res.Transactions, res.Elapsed)
	}
}

// TestClassicStreamVerbose checks --classic TCP_STREAM's and TCP_MAERTS's
// -v 2 block against nettest_bsd.c's ksink_fmt and ksink_fmt2 (expected
// text from the C formats through Python's printf-style formatting): the
// server's byte count in "%6.4g", per our calls and per the server's
// recv_calls/send_calls, then the MSS. Planted bugs, each caught: the
// migrated block ("%6d" bytes, our own count) for classic tests; the
// server's calls left at zero (the classic results' calls dropped).
func TestClassicStreamVerbose(t *testing.T) {
	cases := []struct {
		test netperf.TestType
		mod  func(*netperf.Config)
		res  netperf.Result
		want string
	}{
		{netperf.TCPStream, func(c *netperf.Config) { c.RemoteRecvOffset = 4 },
			netperf.Result{BytesSent: 3466854400 + 16384, RemoteBytesReceived: 3466854400, SendCalls: 211600, RemoteRecvCalls: 98765, TransportMSS: 65483},
			"\nAlignment      Offset         Bytes    Bytes       Sends   Bytes    Recvs\nLocal  Remote  Local  Remote  Xfered   Per                 Per\nSend   Recv    Send   Recv             Send (avg)          Recv (avg)\n    8       8      0       4 3.467e+09  16384.00    211600   35102.05  98765\n\nMaximum\nSegment\nSize (bytes)\n 65483\n"},
		{netperf.TCPMaerts, func(c *netperf.Config) { c.LocalRecvOffset, c.RemoteRecvOffset = 2, 4 },
			netperf.Result{BytesReceived: 1200, RemoteBytesSent: 1200, RecvCalls: 3, RemoteSendCalls: 7, TransportMSS: 1448},
			"\nAlignment      Offset         Bytes    Bytes       Recvs   Bytes    Sends\nLocal  Remote  Local  Remote  Xfered   Per                 Per\nRecv   Send    Recv   Send             Recv (avg)          Send (avg)\n    8       8      2       4   1200  400.00         3   171.43      7\n\nMaximum\nSegment\nSize (bytes)\n  1448\n"},
	}
	for _, tc := range cases {
		cfg := netperf.NewConfig("127.0.0.1", tc.test)
		cfg.Classic = true
		tc.mod(&cfg)
		rep := &netperf.Report{Config: cfg, Family: netperf.FamilyIPv4, Result: tc.res, ConfidenceMet: true}
		var got strings.Builder
		if err := rep.WriteVerbose(&got); err != nil {
			t.Fatal(err)
		}
		if got.String() != tc.want {
			t.Errorf("%s:\n%q\nwant\n%q", tc.test, got.String(), tc.want)
		}
	}
}

// TestClassicResultsCalls runs --classic TCP_STREAM and TCP_MAERTS against
// our server: the server's call count from the classic results reaches
// the report (its -v 2 block divides by it). Planted bug (the calls
// dropped, as before) caught.
func TestClassicResultsCalls(t *testing.T) {
	addr, _ := startServer(t, &netperf.Server{})
	for _, test := range []netperf.TestType{netperf.TCPStream, netperf.TCPMaerts} {
		cfg := loopbackConfig(t, addr, test, 1)
		cfg.Classic = true
		rep, err := netperf.Run(runCtx(t), cfg)
		if err != nil {
			t.Fatalf("%s: %v", test, err)
		}
		if calls := rep.Result.RemoteRecvCalls + rep.Result.RemoteSendCalls; calls == 0 {
			t.Errorf("%s: the server's calls did not reach the report: %+v", test, rep.Result)
		}
	}
}
