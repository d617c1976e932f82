package netperf

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

// The data phases of UDP_STREAM, UDP_RR (one datagram socket), TCP_CRR and
// TCP_CC (a connection per transaction). Their ends, as stock netserver's
// (checked against the control timelines of the captures): a UDP client
// ends with empty datagrams, which end the server's test at once; a
// connection test has no end marker, so the server runs to its padded
// timer (test length + PadTime) and reports the elapsed time less the pad:
// its results reach the client PadTime after the test.

// dataListenUDP opens the UDP data socket for family fam on (ip, port)
// with the requested buffer sizes.
func (s *Server) dataListenUDP(fam uint32, ip netip.Addr, port uint32, sndbuf, rcvbuf int32) (net.PacketConn, int32, int32, error) {
	network, addr := dataAddr("udp", fam, ip, port)
	var pc net.PacketConn
	var err error
	if s.ListenPacket != nil {
		pc, err = s.ListenPacket(network, addr)
	} else {
		pc, err = net.ListenPacket(network, addr)
	}
	if err != nil {
		return nil, 0, 0, err
	}
	setBufSizes(pc, sndbuf, rcvbuf)
	snd, rcv, _ := bufSizes(pc)
	return pc, snd, rcv, nil
}

// timers returns the soft (test length) and hard (padded) ends of a timed
// test started at start; zero times for a count-based one.
func (spec dataSpec) timers(start time.Time) (timed bool, softEnd, hardEnd time.Time) {
	if spec.testLength <= 0 {
		return false, time.Time{}, time.Time{}
	}
	softEnd = start.Add(time.Duration(spec.testLength) * time.Second)
	hardEnd = softEnd
	if spec.receives {
		hardEnd = hardEnd.Add(PadTime)
	}
	return true, softEnd, hardEnd
}

// countLimit is the transaction (or byte) count of a count-based test.
func (spec dataSpec) countLimit() uint64 {
	if spec.testLength < 0 {
		return uint64(-int64(spec.testLength))
	}
	return 0
}

// runUDP runs UDP_STREAM (the server receives) or UDP_RR on pc.
func (s *Server) runUDP(pc net.PacketConn, spec dataSpec) (st dataStats, err error) {
	start := time.Now()
	timed, _, hardEnd := spec.timers(start)
	limit := spec.countLimit()
	padded := false // ended by the padded timer
	defer func() {
		st.sndbuf, st.rcvbuf, _ = bufSizes(pc)
		st.elapsed = time.Since(start)
		if padded {
			st.elapsed -= PadTime // as netserver reports it
		}
	}()
	size := spec.recvSize
	if size < 65535 {
		size = 65535 // a datagram is never cut: read whole ones
	}
	buf := make([]byte, size)
	resp := make([]byte, spec.sendSize)
	fillPattern(resp)
	for {
		if timed {
			_ = pc.SetReadDeadline(hardEnd)
		} else {
			_ = pc.SetReadDeadline(time.Now().Add(s.idleTimeout()))
		}
		n, from, rerr := pc.ReadFrom(buf)
		if rerr != nil {
			if isTimeout(rerr) && timed {
				padded = true
				break
			}
			return st, rerr
		}
		if n == 0 {
			break // the client's end-of-test datagram
		}
		st.bytesRecv += uint64(n)
		st.recvCalls++
		if spec.rr {
			if _, werr := pc.WriteTo(resp, from); werr != nil {
				return st, werr
			}
			st.bytesSent += uint64(len(resp))
			st.sendCalls++
			st.trans++
			if limit > 0 && uint64(st.trans) >= limit {
				break
			}
		} else if limit > 0 && st.bytesRecv >= limit {
			break
		}
	}
	return st, nil
}

// runConnect runs TCP_CRR (connect, request, response, close) or TCP_CC
// (connect, close) transactions: one accepted connection each, until the
// padded timer or the count.
func (s *Server) runConnect(ln net.Listener, spec dataSpec) (st dataStats, err error) {
	start := time.Now()
	timed, _, hardEnd := spec.timers(start)
	limit := spec.countLimit()
	end := hardEnd
	if !timed {
		end = start.Add(s.idleTimeout())
	}
	// A generic net.Listener has no deadline: close it when time is up.
	t := time.AfterFunc(time.Until(end), func() { ln.Close() })
	defer t.Stop()
	req := make([]byte, spec.recvSize)
	resp := make([]byte, spec.sendSize)
	fillPattern(resp)
	sizesRead := false
	for limit == 0 || uint64(st.trans) < limit {
		c, aerr := ln.Accept()
		if aerr != nil {
			if time.Now().Before(end) {
				err = fmt.Errorf("accept data connection: %w", aerr)
			}
			break
		}
		if !sizesRead {
			st.sndbuf, st.rcvbuf, _ = bufSizes(c)
			sizesRead = true
		}
		if !timed {
			t.Reset(s.idleTimeout())
		}
		done, terr := s.connectTransaction(c, spec, req, resp, end, &st)
		if terr != nil {
			err = terr
			break
		}
		if done {
			st.trans++
		}
	}
	st.elapsed = time.Since(start)
	if timed && !time.Now().Before(hardEnd) {
		st.elapsed -= PadTime // ended by the padded timer, as netserver reports
	}
	return st, err
}

// connectTransaction serves one TCP_CRR or TCP_CC connection and closes it:
// TCP_CC at once, TCP_CRR once the response is written, without waiting
// for the client. done is false when the connection ended (the client's
// close, the test's end) before the response: stock counts no transaction
// then.
func (s *Server) connectTransaction(c net.Conn, spec dataSpec, req, resp []byte, end time.Time, st *dataStats) (done bool, err error) {
	defer c.Close()
	_ = c.SetDeadline(end)
	if spec.noDelay {
		if nd, ok := c.(noDelayer); ok {
			_ = nd.SetNoDelay(true)
		}
	}
	if spec.connectOnly {
		return true, nil // TCP_CC: the client waits for our close
	}
	n, err := io.ReadFull(c, req)
	st.bytesRecv += uint64(n)
	if n > 0 {
		st.recvCalls++
	}
	if err != nil {
		if isTimeout(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return false, nil
		}
		return false, err
	}
	if _, err := c.Write(resp); err != nil {
		return false, nil // the client gave up at the end of its test
	}
	st.bytesSent += uint64(len(resp))
	st.sendCalls++
	// Close right after the response (the deferred Close), as stock
	// netserver's recv_omni (close_data_socket) and recv_tcp_conn_rr do:
	// stock netperf does not half-close, it waits for our close (its
	// recv returns 0) before it closes its own side, so waiting here for
	// the client's FIN would stall both until the timer. The
	// server closes first and so holds TIME_WAIT, as stock's.
	return true, nil
}
