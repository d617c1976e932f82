package netperf

import (
	"io"
	"net"
	"time"
)

type clientData struct {
	sent, received, trans uint64
	sendCalls, sendErrors uint64 // send calls (UDP_STREAM: messages sent) and failed sends
	recvCalls             uint64
	recvTimeouts          uint64 // UDP_RR responses given up after -e
	elapsed               time.Duration
	lat                   *latencyHist // transaction times (RR tests)
}

// closeData half-closes the data connection and drains it to the server's
// EOF (stock netperf reads once and leaks the socket; draining avoids RST).
func closeData(c net.Conn, timeout time.Duration) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	_, _ = io.Copy(io.Discard, c)
}

// dataSpan is when a data phase ends: timed (a positive -l), at end;
// else after limit bytes or transactions (a negative -l).
func dataSpan(p dataPlan, start time.Time) (timed bool, end time.Time, limit uint64) {
	timed = p.length > 0
	end = start.Add(time.Duration(p.length) * time.Second)
	if !timed {
		limit = uint64(-int64(p.length))
	}
	return timed, end, limit
}

// countTransaction counts a transaction begun at t0 and now complete, and
// says whether it was the last that limit allows.
func (d *clientData) countTransaction(p dataPlan, t0 time.Time, limit uint64) bool {
	d.trans++
	d.lat.add(time.Since(t0))
	p.interim.add(1)
	return limit > 0 && d.trans >= limit
}

// runClientData runs the client side of the data phase; start is the
// client's clock start (just before connect).
func runClientData(c net.Conn, p dataPlan, start time.Time, timeout time.Duration) (clientData, error) {
	var d clientData
	timed, end, limit := dataSpan(p, start)
	switch {
	case timed && p.test != TCPRR:
		_ = c.SetDeadline(end)
	case timed:
		// RR finishes the transaction in flight when the timer fires, as
		// netperf does, so both sides count the same transactions.
		_ = c.SetDeadline(end.Add(timeout))
	default:
		_ = c.SetDeadline(time.Now().Add(timeout))
	}
	switch p.test {
	case TCPStream:
		if err := tcpStream(c, p, timed, end, limit, &d); err != nil {
			return d, err
		}
		// The server's EOF ends the test; its byte count is the result.
		_ = c.SetDeadline(time.Time{})
		closeData(c, timeout)
		d.elapsed = time.Since(start)
		return d, nil
	case TCPMaerts:
		if err := tcpMaerts(c, p, timed, limit, &d); err != nil {
			return d, err
		}
		d.elapsed = time.Since(start)
		_ = c.SetDeadline(time.Time{})
		closeData(c, timeout)
		return d, nil
	default: // TCP_RR
		if err := tcpRR(c, p, timed, end, limit, &d); err != nil {
			return d, err
		}
		d.elapsed = time.Since(start)
		_ = c.SetDeadline(time.Time{})
		if !p.keepOpen {
			closeData(c, timeout)
		}
		return d, nil
	}
}

// tcpStream sends TCP_STREAM's messages until end (timed) or limit bytes,
// timing each send call.
func tcpStream(c net.Conn, p dataPlan, timed bool, end time.Time, limit uint64, d *clientData) error {
	buf := make([]byte, p.sendSize)
	p.fill.fill(buf)
	d.lat = new(latencyHist) // the time of each send call, as stock's histogram
	for !timed || time.Now().Before(end) {
		b := buf
		if limit > 0 && limit-d.sent < uint64(len(b)) {
			b = b[:limit-d.sent]
		}
		t0 := time.Now()
		n, err := c.Write(b)
		d.lat.add(time.Since(t0))
		d.sent += uint64(n)
		d.sendCalls++
		p.interim.add(float64(n))
		if err != nil {
			if timed && isTimeout(err) {
				break
			}
			return err
		}
		if limit > 0 && d.sent >= limit {
			break
		}
	}
	return nil
}

// tcpMaerts receives TCP_MAERTS's data until the server's EOF, the
// deadline (timed) or limit bytes, timing each receive call.
func tcpMaerts(c net.Conn, p dataPlan, timed bool, limit uint64, d *clientData) error {
	buf := make([]byte, p.recvSize)
	d.lat = new(latencyHist) // the time of each receive call
	for {
		t0 := time.Now()
		n, err := c.Read(buf)
		d.received += uint64(n)
		if n > 0 {
			d.recvCalls++
			d.lat.add(time.Since(t0))
		}
		p.interim.add(float64(n))
		if err != nil {
			if err == io.EOF || (timed && isTimeout(err)) {
				break
			}
			return err
		}
		if limit > 0 && d.received >= limit {
			break
		}
	}
	return nil
}

// tcpRR runs TCP_RR's request/response transactions until end (timed) or
// limit transactions.
func tcpRR(c net.Conn, p dataPlan, timed bool, end time.Time, limit uint64, d *clientData) error {
	req := make([]byte, p.reqSize)
	resp := make([]byte, p.respSize)
	p.fill.fill(req)
	d.lat = new(latencyHist)
	for {
		t0 := time.Now()
		if timed && !t0.Before(end) {
			break
		}
		if _, err := c.Write(req); err != nil {
			return err
		}
		d.sent += uint64(len(req))
		d.sendCalls++
		if _, err := io.ReadFull(c, resp); err != nil {
			return err
		}
		d.received += uint64(len(resp))
		d.recvCalls++
		if d.countTransaction(p, t0, limit) {
			break
		}
	}
	return nil
}
