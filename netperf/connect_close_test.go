package netperf

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// stockConnectServer accepts TCP_CRR (req bytes in, resp bytes out) or,
// with req 0, TCP_CC connections on ln as stock netserver does (recv_omni's
// close_data_socket, recv_tcp_cc): it closes each connection itself once
// the response is written, without waiting for the client. Before its
// close it gives the client hold ms to misbehave: a FIN from the client
// then (a half-close before the server's close, which stock netperf never
// sends) counts in early. With reset, the server closes with SO_LINGER 0
// (a RST instead of its FIN, as a peer that keeps no state for the
// connection answers).
func stockConnectServer(t *testing.T, ln net.Listener, req, resp int, hold time.Duration, reset bool, early *atomic.Int32) {
	t.Helper()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if req > 0 {
				if _, err := io.ReadFull(c, make([]byte, req)); err != nil {
					c.Close()
					continue
				}
				if _, err := c.Write(make([]byte, resp)); err != nil {
					c.Close()
					continue
				}
			}
			_ = c.SetReadDeadline(time.Now().Add(hold))
			if _, err := c.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
				early.Add(1)
			}
			if reset {
				_ = c.(*net.TCPConn).SetLinger(0)
			}
			c.Close()
		}
	}()
}

// TestConnectClientWaitsForServerClose runs our TCP_CRR and TCP_CC
// client's data phase against a stock-behaving server: every transaction
// completes, and the client sends its FIN only after the server's (it
// waits for recv to return 0, as stock's disconnect_data_socket with
// initiate 0). Planted bug: the client's shutdown(SHUT_WR) after the
// response: every TCP_CRR transaction is then a half-close before the
// server's close ("20 of 20 connections").
func TestConnectClientWaitsForServerClose(t *testing.T) {
	for _, test := range []TestType{TCPCRR, TCPCC} {
		t.Run(string(test), func(t *testing.T) {
			d := runStockConnect(t, test, 20*time.Millisecond, false, func(early int32) {
				if early != 0 {
					t.Errorf("the client half-closed %d of 20 connections before the server's close; stock waits for it", early)
				}
			})
			if d.trans != 20 {
				t.Errorf("%d transactions, want 20", d.trans)
			}
		})
	}
}

// TestConnectClientServerReset: a RST instead of the server's FIN, after
// the whole response (a peer out of TIME_WAIT room, or one that closes
// with SO_LINGER 0), still ends the wait for the server's close: the
// transaction counts and the test goes on. Planted bug: treating it as an
// error ("connection reset by peer") stopped the test at the first one.
func TestConnectClientServerReset(t *testing.T) {
	for _, test := range []TestType{TCPCRR, TCPCC} {
		t.Run(string(test), func(t *testing.T) {
			d := runStockConnect(t, test, 5*time.Millisecond, true, nil)
			if d.trans != 20 {
				t.Errorf("%d transactions, want 20", d.trans)
			}
		})
	}
}

// runStockConnect runs runConnectClient for 20 transactions against
// stockConnectServer and hands check the server's early-FIN count.
func runStockConnect(t *testing.T, test TestType, hold time.Duration, reset bool, check func(early int32)) clientData {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	req, resp := 1, 1
	if test == TCPCC {
		req, resp = 0, 0
	}
	var early atomic.Int32
	stockConnectServer(t, ln, req, resp, hold, reset, &early)
	var dialer net.Dialer
	cfg := &Config{Test: test, DataDial: dialer.DialContext}
	p := dataPlan{test: test, reqSize: int32(req), respSize: int32(resp), length: -20}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := runConnectClient(ctx, cfg, ln.Addr().String(), p, time.Now(), 10*time.Second)
	if err != nil {
		t.Fatalf("after %d transactions: %v", d.trans, err)
	}
	if check != nil {
		check(early.Load())
	}
	return d
}
