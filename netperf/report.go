package netperf

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// The table layouts below reproduce stock netperf 2.7.1's default (-v 1)
// output byte for byte, trailing spaces included (the golden files in
// testdata hold stock's own output).
const (
	streamHeader = "Recv   Send    Send                          \n" +
		"Socket Socket  Message  Elapsed              \n" +
		"Size   Size    Size     Time     Throughput  \n" +
		"bytes  bytes   bytes    secs.    %s/sec  \n\n"
	streamLine = "%6d %6d %6d    %-6.2f   %7.2f   \n"

	streamCPUHeader = "Recv   Send    Send                          Utilization       Service Demand\n" +
		"Socket Socket  Message  Elapsed              %-8s %-8s %-7s %s\n" +
		"Size   Size    Size     Time     Throughput  local    remote   local   remote\n" +
		"bytes  bytes   bytes    secs.    %s/s  %% %c      %% %c      us/KB   us/KB\n\n"
	streamCPULine = "%6d %6d %6d    %-6.2f     %7.2f   %-6.2f   %-6.2f   %-6.3f  %-6.3f \n"

	rrHeader = "Local /Remote\n" +
		"Socket Size   Request  Resp.   Elapsed  Trans.\n" +
		"Send   Recv   Size     Size    Time     Rate         \n" +
		"bytes  Bytes  bytes    bytes   secs.    per sec   \n\n"
	rrLine = "%-6d %-6d %-6d   %-6d  %-6.2f   %7.2f   \n"

	rrCPUHeader = "Local /Remote\n" +
		"Socket Size   Request Resp.  Elapsed Trans.   CPU    CPU    S.dem   S.dem\n" +
		"Send   Recv   Size    Size   Time    Rate     local  remote local   remote\n" +
		"bytes  bytes  bytes   bytes  secs.   per sec  %% %c    %% %c    us/Tr   us/Tr\n\n"
	rrCPULine = "%-6d %-6d %-6d  %-6d %-6.2f  %-6.2f  %-6.2f %-6.2f %-6.3f  %-6.3f \n"

	rrRemoteLine = "%-6d %-6d\n"

	// With -f (stock's libfmt other than 'x'), TCP_RR and UDP_RR title
	// their throughput in the -f units (nettest_omni.c's tput_title_band
	// and cpu_title_tput, whose demand is us/KB; nettest_bsd.c's classic
	// TCP_RR says us/Tr); the result lines keep their formats.
	rrBandHeader = "Local /Remote\n" +
		"Socket Size   Request  Resp.   Elapsed  \n" +
		"Send   Recv   Size     Size    Time     Throughput \n" +
		"bytes  Bytes  bytes    bytes   secs.    %s/sec   \n\n"
	rrBandCPUHeader = "Local /Remote\n" +
		"Socket Size   Request Resp.  Elapsed Tput     CPU    CPU    S.dem   S.dem\n" +
		"Send   Recv   Size    Size   Time    %-8.8s local  remote local   remote\n" +
		"bytes  bytes  bytes   bytes  secs.   per sec  %% %c    %% %c    %s   %s\n\n"

	udpStreamHeader = "Socket  Message  Elapsed      Messages                \n" +
		"Size    Size     Time         Okay Errors   Throughput\n" +
		"bytes   bytes    secs            #      #   %s/sec\n\n"
	udpStreamLine       = "%6d  %6d   %-7.2f   %7d %6d    %7.2f\n"
	udpStreamRemoteLine = "%6d           %-7.2f   %7d           %7.2f\n\n"

	// With -c/-C (nettest_omni.c's send_udp_stream cpu_title/cpu_fmt_1;
	// send_udp_rr's, send_tcp_conn_rr's and nettest_bsd.c's send_tcp_cc's
	// cpu_fmt_1_line_1, one space wider before the remote CPU than
	// TCP_RR's; TCP_CRR's and TCP_CC's titles without method letters).
	udpStreamCPUHeader = "Socket  Message  Elapsed      Messages                   CPU      Service\n" +
		"Size    Size     Time         Okay Errors   Throughput   Util     Demand\n" +
		"bytes   bytes    secs            #      #   %s/sec %% %c%c     us/KB\n\n"
	udpStreamCPULine = "%6d  %6d   %-7.2f   %7d %6d    %7.1f     %-6.2f   %-6.3f\n" +
		"%6d           %-7.2f   %7d           %7.1f     %-6.2f   %-6.3f\n\n"
	udpRRCPULine  = "%-6d %-6d %-6d  %-6d %-6.2f  %-6.2f   %-6.2f %-6.2f %-6.3f  %-6.3f \n"
	connCPUHeader = "Local /Remote\n" +
		"Socket Size   Request Resp.  Elapsed Trans.   CPU    CPU    S.dem   S.dem\n" +
		"Send   Recv   Size    Size   Time    Rate     local  remote local   remote\n" +
		"bytes  bytes  bytes   bytes  secs.   per sec  %      %      us/Tr   us/Tr\n\n"
	connCPULine = "%-6d %-6d %-6d  %-6d %-6.2f  %-6.2f   %-6.2f %-6.2f %-6.3f  %-6.3f\n"
)

// testNames are the test names of netperf's banner.
var testNames = map[TestType]string{
	TCPStream: "TCP STREAM", TCPMaerts: "TCP MAERTS", TCPRR: "TCP REQUEST/RESPONSE",
	TCPCRR: "TCP Connect/Request/Response", TCPCC: "TCP Connect/Close",
	UDPStream: "UDP STREAM", UDPRR: "UDP REQUEST/RESPONSE",
}

// units is c.Units, 'm' when unset.
func (c *Config) units() byte {
	if unitsName(c.Units) == "" {
		return 'm'
	}
	return c.Units
}

// CPUMethodLetter is the letter netperf prints after "%" in CPU headers.
func CPUMethodLetter(method uint32) byte {
	// netperf's cpu_method_char: indices are the CPU method codes.
	const letters = "UIPTLRNKSCEMO"
	if int(method) < len(letters) {
		return letters[method]
	}
	return '?'
}

// Banner returns netperf's first output line for r, newline included.
func (r *Report) Banner() string {
	c := r.Config
	var b strings.Builder
	if !c.Classic && c.Test != TCPCC {
		b.WriteString("MIGRATED ")
	}
	name := testNames[c.Test]
	// Stock prints the names it was given and, in parentheses, the numeric
	// addresses; its AF_INET remote comes out empty, its AF_INET6 wildcard
	// is named "::0" and shown as "::".
	fam, local, localNum := "AF_INET", "0.0.0.0", "0.0.0.0"
	if r.Family == FamilyIPv6 {
		fam, local, localNum = "AF_INET6", "::0", "::"
	}
	if src := r.sourceAddr(); src != local {
		local, localNum = src, numericAddr(src)
	}
	remote := c.Host
	if c.DataHost != "" {
		remote = c.DataHost
	}
	remoteNum := ""
	if r.Family == FamilyIPv6 {
		remoteNum = numericAddr(remote)
	}
	fmt.Fprintf(&b, "%s TEST from %s (%s) port %d %s to %s (%s) port %d %s",
		name, local, localNum, c.LocalDataPort, fam, remote, remoteNum, c.RemoteDataPort, fam)
	if c.MaxIterations > 1 {
		fmt.Fprintf(&b, " : +/-%.3f%% @ %2d%% conf. ", c.ConfidenceWidth/2, c.ConfidenceLevel)
	}
	if c.NoDelay {
		b.WriteString(" : nodelay")
	}
	if c.Histogram {
		b.WriteString(" : histogram")
	}
	b.WriteString(" : demo")
	if c.Test == TCPRR || c.Test == UDPRR {
		b.WriteString(" : first burst 0")
	}
	b.WriteString("\n")
	return b.String()
}

// numericAddr is an address literal in its canonical form (as inet_ntop
// prints it), or s unchanged when it is a name.
func numericAddr(s string) string {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.String()
	}
	return s
}

// writeConfidenceWarning writes netperf's warning block when -i ran out of
// iterations before the confidence interval was met.
func (r *Report) writeConfidenceWarning(b *strings.Builder) {
	if r.Config.MaxIterations <= 1 || r.ConfidenceMet {
		return
	}
	b.WriteString("!!! WARNING\n" +
		"!!! Desired confidence was not achieved within the specified iterations.\n" +
		"!!! This implies that there was variability in the test environment that\n" +
		"!!! must be investigated before going further.\n")
	fmt.Fprintf(b, "!!! Confidence intervals: Throughput      : %4.3f%%\n", r.ThroughputInterval)
	fmt.Fprintf(b, "!!!                       Local CPU util  : %4.3f%%\n", r.LocalCPUInterval)
	fmt.Fprintf(b, "!!!                       Remote CPU util : %4.3f%%\n\n", r.RemoteCPUInterval)
}

// WritePreamble prints what stock prints before a test's table: the
// banner (unless already printed) and, with -i, the confidence warning;
// nothing without headers. A verbosity outside 0..2 prints only this
// (and with more than 2, WriteVerbose's block): stock's tables sit in
// "case 0/1/2" of a switch on it.
func (r *Report) WritePreamble(w io.Writer, headers bool) error {
	if !headers {
		return nil
	}
	var b strings.Builder
	if !r.BannerPrinted {
		b.WriteString(r.Banner())
	}
	r.writeConfidenceWarning(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteText prints the report as stock netperf does: banner, confidence
// warning (with -i), column headers and the result line(s). With headers
// false (-P 0) only the result lines are printed.
func (r *Report) WriteText(w io.Writer, headers bool) error {
	var b strings.Builder
	c := r.Config
	res := r.Result
	if headers {
		if !r.BannerPrinted {
			b.WriteString(r.Banner())
		}
		r.writeConfidenceWarning(&b)
	}
	t := textLayout{headers: headers, cpu: c.LocalCPU || c.RemoteCPU, lm: CPUMethodLetter(CPUMethodUnknown),
		rm: CPUMethodLetter(res.RemoteCPUMethod), secs: res.Elapsed.Seconds()}
	if res.LocalCPU >= 0 {
		t.lm = CPUMethodLetter(res.LocalCPUMethod)
	}
	switch c.Test {
	case TCPStream, TCPMaerts:
		r.writeStreamText(&b, t)
	case UDPStream:
		r.writeUDPStreamText(&b, t)
	default: // the request/response tests
		r.writeRRText(&b, t)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// textLayout is what every test's text lines share: whether the headers
// and the CPU columns are printed, the CPU methods' letters and the
// test's seconds.
type textLayout struct {
	headers, cpu bool
	lm, rm       byte
	secs         float64
}

// writeStreamText writes TCP_STREAM's or TCP_MAERTS's header and line.
func (r *Report) writeStreamText(b *strings.Builder, t textLayout) {
	c, res := r.Config, r.Result
	a, s, m := res.RemoteRecvBuf, res.LocalSendBuf, res.LocalSendSize
	if c.Test == TCPMaerts {
		a, s, m = res.LocalRecvBuf, res.RemoteSendBuf, res.RemoteSendSize
	}
	if !t.cpu {
		if t.headers {
			fmt.Fprintf(b, streamHeader, unitsName(c.units()))
		}
		b.WriteString(r.branded(fmt.Sprintf(streamLine, a, s, m, t.secs, res.Throughput), t.headers))
		return
	}
	if t.headers {
		dir := [4]string{"Send", "Recv", "Send", "Recv"}
		if c.Test == TCPMaerts {
			dir = [4]string{"Recv", "Send", "Recv", "Send"}
		}
		fmt.Fprintf(b, streamCPUHeader, dir[0], dir[1], dir[2], dir[3], unitsName(c.units()), t.lm, t.rm)
	}
	b.WriteString(r.branded(fmt.Sprintf(streamCPULine, a, s, m, t.secs, res.Throughput,
		res.LocalCPU, res.RemoteCPU, res.LocalServiceDemand, res.RemoteServiceDemand), t.headers))
}

// writeUDPStreamText writes UDP_STREAM's header and its local and remote
// lines.
func (r *Report) writeUDPStreamText(b *strings.Builder, t textLayout) {
	c, res, secs := r.Config, r.Result, t.secs
	if !t.cpu {
		if t.headers {
			fmt.Fprintf(b, udpStreamHeader, unitsName(c.units()))
		}
		fmt.Fprintf(b, udpStreamLine, res.LocalSendBuf, res.LocalSendSize, secs, res.SendCalls, res.SendErrors, res.Throughput)
		fmt.Fprintf(b, udpStreamRemoteLine, res.RemoteRecvBuf, secs, res.RemoteRecvCalls, res.RemoteThroughput)
		return
	}
	if t.headers {
		fmt.Fprintf(b, udpStreamCPUHeader, unitsName(c.units()), t.lm, t.rm)
	}
	fmt.Fprintf(b, udpStreamCPULine, res.LocalSendBuf, res.LocalSendSize, secs, res.SendCalls, res.SendErrors, res.Throughput,
		res.LocalCPU, res.LocalServiceDemand, res.RemoteRecvBuf, secs, res.RemoteRecvCalls, res.RemoteThroughput,
		res.RemoteCPU, res.RemoteServiceDemand)
}

// writeRRText writes a request/response test's header, its line and the
// remote line.
func (r *Report) writeRRText(b *strings.Builder, t textLayout) {
	c, res, secs := r.Config, r.Result, t.secs
	if !t.cpu {
		if t.headers && c.bandUnits() && c.Test != TCPCRR {
			fmt.Fprintf(b, rrBandHeader, unitsName(c.Units))
		} else if t.headers {
			// TCP_CRR keeps this title even with -f, as stock.
			b.WriteString(rrHeader)
		}
		b.WriteString(r.branded(fmt.Sprintf(rrLine, res.LocalSendBuf, res.LocalRecvBuf, res.RequestSize, res.ResponseSize, secs, res.Throughput), t.headers))
	} else {
		header, line := fmt.Sprintf(rrCPUHeader, t.lm, t.rm), rrCPULine
		if c.bandUnits() {
			sd := "us/KB"
			if c.Classic {
				sd = "us/Tr"
			}
			header = fmt.Sprintf(rrBandCPUHeader, unitsName(c.Units), t.lm, t.rm, sd, sd)
		}
		switch c.Test {
		case UDPRR:
			line = udpRRCPULine
		case TCPCRR, TCPCC:
			header, line = connCPUHeader, connCPULine
		}
		if t.headers {
			b.WriteString(header)
		}
		b.WriteString(r.branded(fmt.Sprintf(line, res.LocalSendBuf, res.LocalRecvBuf, res.RequestSize, res.ResponseSize, secs, res.Throughput,
			res.LocalCPU, res.RemoteCPU, res.LocalServiceDemand, res.RemoteServiceDemand), t.headers))
	}
	fmt.Fprintf(b, rrRemoteLine, res.RemoteSendBuf, res.RemoteRecvBuf)
}

// WriteJSON prints the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTerse prints the report as netperf -v 0 does: the banner (with
// headers), then only the throughput, or with -c/-C the service demand
// (local if measured, else remote) and its CPU method, in each migrated
// test's tput_fmt_0 and cpu_fmt_0 (nettest_omni.c): "%7.2f %s" and
// "%6.3f %c %s" with an empty result brand (a trailing space) for
// TCP_STREAM, TCP_MAERTS, TCP_RR and UDP_RR; "%7.2f" and "%6.3f" for
// TCP_CRR and TCP_CC; UDP_STREAM the local send throughput "%7.2f" and
// "%6.2f %c" (the local method letter even for the remote demand, as
// stock).
func (r *Report) WriteTerse(w io.Writer, headers bool) error {
	var b strings.Builder
	if headers {
		b.WriteString(r.Banner())
		r.writeConfidenceWarning(&b)
	}
	c, res := r.Config, r.Result
	sd, method := res.LocalServiceDemand, CPUMethodLetter(r.localCPUMethod())
	if !c.LocalCPU {
		sd, method = res.RemoteServiceDemand, CPUMethodLetter(res.RemoteCPUMethod)
	}
	cpu := c.LocalCPU || c.RemoteCPU
	switch c.Test {
	case TCPCRR, TCPCC:
		if cpu {
			fmt.Fprintf(&b, "%6.3f\n", sd)
		} else {
			fmt.Fprintf(&b, "%7.2f\n", res.Throughput)
		}
	case UDPStream:
		if cpu {
			fmt.Fprintf(&b, "%6.2f %c\n", sd, CPUMethodLetter(r.localCPUMethod()))
		} else {
			fmt.Fprintf(&b, "%7.2f\n", res.Throughput)
		}
	default:
		if cpu {
			b.WriteString(r.branded(fmt.Sprintf("%6.3f %c \n", sd, method), headers))
		} else {
			b.WriteString(r.branded(fmt.Sprintf("%7.2f \n", res.Throughput), headers))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// branded is a result line of a test whose format ends in the result
// brand's "%s" (TCP_STREAM, TCP_MAERTS, TCP_RR, UDP_RR): the global -B tag
// goes before the newline when no headers are printed (-P 0), as netperf
// prints it; otherwise the line as is.
func (r *Report) branded(line string, headers bool) string {
	switch r.Config.Test {
	case TCPStream, TCPMaerts, TCPRR, UDPRR:
		if !headers && r.Config.ResultBrand != "" {
			return strings.TrimSuffix(line, "\n") + r.Config.ResultBrand + "\n"
		}
	}
	return line
}
