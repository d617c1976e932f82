package netperf

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// cDivF formats a/b with "%6.2f" as C's printf does when b may be 0:
// "inf" for x/0 and "-nan" (glibc) for 0/0, right-aligned in six columns.
func cDivF(a float64, b uint64) string {
	switch {
	case b != 0:
		return fmt.Sprintf("%6.2f", a/float64(b))
	case a == 0:
		return fmt.Sprintf("%6s", "-nan")
	}
	return fmt.Sprintf("%6s", "inf")
}

// WriteVerbose prints what netperf -v 2 adds below the classic table of
// its migrated tests (nettest_omni.c, send_tcp_stream and friends, in a
// build without --enable-histogram, as the captured 2.7.1 was: its banner
// lacks " : histogram"): TCP_STREAM and TCP_MAERTS the alignment, offset,
// bytes and calls block and the maximum segment size; TCP_RR the
// alignment, offset, latency and per-direction throughput block;
// TCP_CRR and TCP_CC (nettest_bsd.c's send_tcp_cc) the alignment and
// offset block; UDP_STREAM and UDP_RR nothing more. With Config.Histogram (a histogram-enabled build) the
// request/response tests add their histogram. Stock's own quirks are kept: TCP_RR prints the remote
// receive offset in the remote alignment column, TCP_MAERTS's call counts
// are "%6d". With --classic (Config.Classic) TCP_STREAM and TCP_MAERTS
// print nettest_bsd.c's block instead (writeClassicStreamVerbose).
func (r *Report) WriteVerbose(w io.Writer) error {
	c, res := r.Config, r.Result
	var b strings.Builder
	const align = defaultAlignment
	switch {
	case c.Classic && (c.Test == TCPStream || c.Test == TCPMaerts):
		r.writeClassicStreamVerbose(&b)
	case c.Test == TCPStream:
		fmt.Fprintf(&b, "\nAlignment      Offset         %-8.8s %-8.8s    Sends   %-8.8s Recvs\n"+
			"Local  Remote  Local  Remote  Xfered   Per                 Per\n"+
			"Send   Recv    Send   Recv             Send (avg)          Recv (avg)\n"+
			"%5d   %5d  %5d   %5d %6d  %s    %6d   %s %6d\n",
			"Bytes", "Bytes", "Bytes", align, align, c.LocalSendOffset, c.RemoteRecvOffset,
			res.BytesSent, cDivF(float64(res.BytesSent), res.SendCalls), res.SendCalls,
			cDivF(float64(res.BytesSent), res.RemoteRecvCalls), res.RemoteRecvCalls)
		fmt.Fprintf(&b, "\nMaximum\nSegment\nSize (bytes)\n%6d\n", res.TransportMSS)
	case c.Test == TCPMaerts:
		fmt.Fprintf(&b, "\nAlignment      Offset         %-8.8s %-8.8s    Recvs   %-8.8s Sends\n"+
			"Local  Remote  Local  Remote  Xfered   Per                 Per\n"+
			"Recv   Send    Recv   Send             Recv (avg)          Send (avg)\n"+
			"%5d   %5d  %5d   %5d %6d  %s    %6d   %s %6d\n",
			"Bytes", "Bytes", "Bytes", align, align, c.LocalRecvOffset, c.RemoteRecvOffset,
			res.BytesReceived, cDivF(float64(res.BytesReceived), res.RecvCalls), int32(res.RecvCalls),
			cDivF(float64(res.RemoteBytesSent), res.RemoteSendCalls), int32(res.RemoteSendCalls))
		fmt.Fprintf(&b, "\nMaximum\nSegment\nSize (bytes)\n%6d\n", res.TransportMSS)
	case c.Test == TCPRR:
		// Transactions are reported as 10^6 bits/s unless -f chose units.
		u := c.units()
		tr := r.transactionRate()
		latency := math.Inf(1)
		if tr > 0 {
			latency = 1e6 / tr
		}
		fmt.Fprintf(&b, "Alignment      Offset         RoundTrip  Trans    Throughput\n"+
			"Local  Remote  Local  Remote  Latency    Rate     %-8.8s/s\n"+
			"Send   Recv    Send   Recv    usec/Tran  per sec  Outbound   Inbound\n"+
			"%5d  %5d   %5d  %5d   %-6.3f   %-6.3f %-6.3f    %-6.3f\n",
			unitsName(u), align, c.RemoteRecvOffset, c.LocalSendOffset, c.RemoteRecvOffset,
			latency, tr, throughputIn(u, tr*float64(c.RequestSize), 1), throughputIn(u, tr*float64(c.ResponseSize), 1))
	case c.Test == TCPCRR:
		fmt.Fprintf(&b, "\nAlignment      Offset\nLocal  Remote  Local  Remote\nSend   Recv    Send   Recv\n%5d  %5d   %5d  %5d\n",
			align, align, c.LocalSendOffset, c.RemoteRecvOffset)
	case c.Test == TCPCC:
		// nettest_bsd.c's send_tcp_cc: the remote receive offset in the
		// remote alignment column, as its TCP_RR.
		fmt.Fprintf(&b, "\nAlignment      Offset\nLocal  Remote  Local  Remote\nSend   Recv    Send   Recv\n%5d  %5d   %5d  %5d\n",
			align, c.RemoteRecvOffset, c.LocalSendOffset, c.RemoteRecvOffset)
	}
	// A histogram-enabled build then reports the transaction times
	// (UDP_RR's title misspelt as stock spells it). The stream tests'
	// send()/recv() call times are not kept by this client.
	if c.Histogram {
		switch c.Test {
		case TCPRR, TCPCRR, TCPCC:
			b.WriteString("\nHistogram of request/response times\n" + r.histogramReport())
		case UDPRR:
			b.WriteString("\nHistogram of request/reponse times.\n" + r.histogramReport())
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeClassicStreamVerbose writes the -v 2 block of nettest_bsd.c's
// send_tcp_stream and send_tcp_maerts (--classic): the bytes are the
// server's count (bytes_received, bytes_sent) as a double in "%6.4g",
// divided by our calls and by the server's; TCP_MAERTS shows the remote
// receive alignment and offset beside our receive ones, as stock.
func (r *Report) writeClassicStreamVerbose(b *strings.Builder) {
	c, res := r.Config, r.Result
	const align = defaultAlignment
	bytes, local, localCalls, remoteCalls := float64(res.RemoteBytesReceived), c.LocalSendOffset, res.SendCalls, res.RemoteRecvCalls
	head := "\nAlignment      Offset         %-8.8s %-8.8s    Sends   %-8.8s Recvs\n" +
		"Local  Remote  Local  Remote  Xfered   Per                 Per\n" +
		"Send   Recv    Send   Recv             Send (avg)          Recv (avg)\n"
	if c.Test == TCPMaerts {
		bytes, local, localCalls, remoteCalls = float64(res.RemoteBytesSent), c.LocalRecvOffset, res.RecvCalls, res.RemoteSendCalls
		head = "\nAlignment      Offset         %-8.8s %-8.8s    Recvs   %-8.8s Sends\n" +
			"Local  Remote  Local  Remote  Xfered   Per                 Per\n" +
			"Recv   Send    Recv   Send             Recv (avg)          Send (avg)\n"
	}
	fmt.Fprintf(b, head+"%5d   %5d  %5d   %5d %6.4g  %s    %6d   %s %6d\n",
		"Bytes", "Bytes", "Bytes", align, align, local, c.RemoteRecvOffset,
		bytes, cDivF(bytes, localCalls), int32(localCalls), cDivF(bytes, remoteCalls), int32(remoteCalls))
	fmt.Fprintf(b, "\nMaximum\nSegment\nSize (bytes)\n%6d\n", res.TransportMSS)
}
