package netperf

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// receiveLoop reads the data connection until EOF, the hard end (timed)
// or idle without data, counting what came; last is when data last came.
func receiveLoop(conn net.Conn, spec dataSpec, st *dataStats, timed bool, idle time.Duration) (last time.Time, err error) {
	buf := make([]byte, spec.recvSize)
	for {
		if !timed {
			_ = conn.SetReadDeadline(time.Now().Add(idle))
		}
		n, rerr := conn.Read(buf)
		if n > 0 {
			st.bytesRecv += uint64(n)
			st.recvCalls++
			last = time.Now()
		}
		if rerr != nil {
			if rerr != io.EOF && !(timed && isTimeout(rerr)) {
				err = rerr
			}
			break
		}
	}
	return last, err
}

// sendLoop writes the data connection until the soft end (timed), the
// byte limit of a negative test length, or a failed write, then closes its
// sending side; last is when it last wrote.
func sendLoop(conn net.Conn, spec dataSpec, st *dataStats, timed bool, softEnd time.Time, idle time.Duration) (last time.Time, err error) {
	buf := make([]byte, spec.sendSize)
	fillPattern(buf)
	limit := uint64(0)
	if spec.testLength < 0 {
		limit = uint64(-int64(spec.testLength))
	}
	for {
		if timed && !time.Now().Before(softEnd) {
			break
		}
		if !timed {
			_ = conn.SetWriteDeadline(time.Now().Add(idle))
		}
		b := buf
		if limit > 0 && limit-st.bytesSent < uint64(len(b)) {
			b = b[:limit-st.bytesSent]
		}
		n, werr := conn.Write(b)
		st.bytesSent += uint64(n)
		st.sendCalls++
		last = time.Now()
		if werr != nil {
			// EPIPE/ECONNRESET/timeout at the end of a MAERTS test are
			// the client racing our timer: a normal end.
			if !timed {
				err = werr
			}
			break
		}
		if limit > 0 && st.bytesSent >= limit {
			break
		}
	}
	if tc, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = tc.CloseWrite()
	}
	return last, err
}

// callSizes returns the buffer sizes that size a test's calls when the
// request leaves them to the server: a kernel socket's own buffer sizes, as
// netserver uses them; for the userspace stack, whose buffers start at
// 1 MiB, the sizes a stock netserver on Linux would pick (16384 to send,
// 131072 to receive), unless the request set the buffer (-S).
func callSizes(sock any, udp bool, snd, rcv, reqSnd, reqRcv int32) (int32, int32) {
	if _, userspace := sock.(bufferSizer); !userspace {
		return snd, rcv
	}
	dsnd, drcv := defaultCallSizes()
	if udp {
		dsnd, drcv = defaultUDPBufSizes()
	}
	if reqSnd < 0 {
		snd = dsnd
	}
	if reqRcv < 0 {
		rcv = drcv
	}
	return snd, rcv
}

// pickSize is netserver's per-call size: the request's if > 0, else the
// socket buffer size, else 4096.
func pickSize(req, buf int32) int32 {
	switch {
	case req > 0:
		return req
	case buf > 0:
		return buf
	}
	return 4096 // netserver's fallback when the buffer size is unknown
}

// dataSpec describes one data phase from the server's point of view.
type dataSpec struct {
	sends, receives, rr bool
	recvSize, sendSize  int32 // per call; RR: request and response sizes
	testLength          int32 // >0 seconds, <0 -count, 0 until EOF
	noDelay             bool
	classicRR           bool   // no EOF: end on count or idle after the timer
	udp                 bool   // datagrams; the client ends with an empty one
	connect             bool   // a connection per transaction (TCP_CRR, TCP_CC)
	connectOnly         bool   // TCP_CC: no data, the server closes at once
	cong                string // the congestion control asked for (-K ,remote); "" the default
}

// dataStats is what a data phase measured.
type dataStats struct {
	bytesRecv, bytesSent uint64
	recvCalls, sendCalls uint32
	trans                uint32
	elapsed              time.Duration
	sndbuf, rcvbuf       int32
	cong                 string
	retrans              int32
}

type noDelayer interface{ SetNoDelay(bool) error }

// fillPattern fills b with netperf's default payload, "netperf\0" repeated.
func fillPattern(b []byte) {
	const pat = "netperf\x00"
	for i := 0; i < len(b); i += copy(b[i:], pat) {
	}
}

// runData accepts the single data connection on ln and runs the data phase.
// The server's clock starts now, before accept, as netserver's does.
func (s *Server) runData(ln net.Listener, spec dataSpec, wantCong bool) (st dataStats, err error) {
	start := time.Now()
	var hardEnd, softEnd time.Time
	timed := spec.testLength > 0
	if timed {
		softEnd = start.Add(time.Duration(spec.testLength) * time.Second)
		hardEnd = softEnd
		if spec.receives {
			hardEnd = hardEnd.Add(PadTime)
		}
	}
	acceptBy := hardEnd
	if !timed {
		acceptBy = start.Add(s.idleTimeout())
	}
	// A generic net.Listener has no deadline: close it when time is up.
	t := time.AfterFunc(time.Until(acceptBy), func() { ln.Close() })
	conn, err := ln.Accept()
	t.Stop()
	if err != nil {
		st.elapsed = time.Since(start)
		return st, fmt.Errorf("accept data connection: %w", err)
	}
	ln.Close() // one data connection per test
	defer func() {
		st.sndbuf, st.rcvbuf, _ = bufSizes(conn)
		if wantCong {
			st.cong = congestionControl(conn)
		}
		st.retrans = retransmits(conn)
		if _, kernel := conn.(rawConner); !kernel && s.TransportInfo != nil {
			if r, _, cong, ok := s.TransportInfo(conn); ok {
				st.retrans = int32(max(r, 0))
				if wantCong {
					st.cong = cong
				}
			}
		}
		conn.Close()
	}()
	if spec.noDelay {
		if nd, ok := conn.(noDelayer); ok {
			_ = nd.SetNoDelay(true)
		}
	}
	if spec.cong != "" {
		setCongestionControl(conn, spec.cong)
	}
	if timed {
		_ = conn.SetDeadline(hardEnd)
	}
	idle := s.idleTimeout()
	var last time.Time
	switch {
	case spec.rr:
		last, err = s.rrLoop(conn, spec, &st, timed, softEnd, hardEnd, idle)
	case spec.receives:
		last, err = receiveLoop(conn, spec, &st, timed, idle)
	case spec.sends:
		last, err = sendLoop(conn, spec, &st, timed, softEnd, idle)
	}
	end := time.Now()
	if timed && end.After(softEnd) && spec.receives && !last.IsZero() {
		// Ended by the padded timer: report the time to the last data, as
		// netserver subtracts its pad.
		if end.Sub(last) > time.Second/10 {
			end = last
		}
	}
	st.elapsed = end.Sub(start)
	return st, err
}

// rrLoop echoes request/response transactions until EOF (omni), the count
// (-l -N), or for classic RR the client going quiet after the timer.
func (s *Server) rrLoop(conn net.Conn, spec dataSpec, st *dataStats, timed bool, softEnd, hardEnd time.Time, idle time.Duration) (last time.Time, err error) {
	req := make([]byte, spec.recvSize)
	resp := make([]byte, spec.sendSize)
	fillPattern(resp)
	var count uint32
	if spec.testLength < 0 {
		count = uint32(-int64(spec.testLength))
	}
	for {
		now := time.Now()
		switch {
		case !timed:
			_ = conn.SetReadDeadline(now.Add(idle))
		case spec.classicRR:
			from := now
			if from.Before(softEnd) {
				from = softEnd
			}
			_ = conn.SetReadDeadline(minTime(hardEnd, from.Add(classicRRIdle)))
		}
		got := 0
		for got < len(req) {
			n, rerr := conn.Read(req[got:])
			got += n
			if n > 0 {
				st.recvCalls++
				st.bytesRecv += uint64(n)
			}
			if rerr != nil {
				if rerr == io.EOF && got == 0 {
					return last, nil
				}
				if isTimeout(rerr) && timed {
					return last, nil
				}
				return last, rerr
			}
		}
		if _, werr := conn.Write(resp); werr != nil {
			return last, werr
		}
		st.bytesSent += uint64(len(resp))
		st.sendCalls++
		st.trans++
		last = time.Now()
		if spec.classicRR && count > 0 && st.trans >= count {
			return last, nil
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// isTimeout reports whether err is a deadline expiring: os.ErrDeadlineExceeded
// from kernel sockets, or any net.Error whose Timeout() is true (gVisor's
// gonet connections return their own timeout error type).
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
