package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/netperf"
)

// The data phase of TCP_CRR and TCP_CC as stock netperf 2.7.1 plays it
// (src/nettest_omni.c send_omni_inner with disconnect_data_socket, and
// src/nettest_bsd.c send_tcp_cc): for each transaction a new socket with
// SO_REUSEADDR bound to the next client port (pick_next_port_number: a
// random start in 5000..65535, +1 each time, skipping the server's port,
// another port on EADDRINUSE/EADDRNOTAVAIL), connect, TCP_CRR: send the
// request and read the whole response, then a recv that must return 0 -
// the server's close; stock does not half-close first - and only then its
// own close. A transaction counts once that recv returned 0. The client's
// timer (-l) ends the test; the server answers after its padded timer.

// stockOpTimeout bounds every operation of the stock-behaving client: a
// server that waits for the client's FIN (stock then hangs until the
// timer) fails the test at the first transaction.
const stockOpTimeout = 2 * time.Second

// portDialFunc dials address from local port port of the family's address.
type portDialFunc func(ctx context.Context, port int, to netip.AddrPort) (net.Conn, error)

// stockConnectClient plays stock's connection-test data phase for length
// against to. It returns the transactions completed and why it stopped
// early (nil: the timer ended it).
func stockConnectClient(ctx context.Context, dial portDialFunc, to netip.AddrPort, reqSize, respSize int, length time.Duration) (trans uint64, err error) {
	const portMin, portMax = 5000, 65535 // stock's client_port_min/max
	port := portMin + rand.IntN(portMax-portMin) - 1
	nextPort := func() int {
		port++
		if port == int(to.Port()) {
			port++
		}
		if port >= portMax {
			port = portMin
		}
		return port
	}
	req, resp, one := make([]byte, reqSize), make([]byte, respSize), make([]byte, 1)
	for end := time.Now().Add(length); time.Now().Before(end); {
		var c net.Conn
		for tries := 0; ; tries++ {
			dctx, cancel := context.WithTimeout(ctx, stockOpTimeout)
			c, err = dial(dctx, nextPort(), to)
			cancel()
			if err == nil {
				break
			}
			if tries < 64 && (errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, syscall.EADDRNOTAVAIL)) {
				continue // stock's "transient": the next port
			}
			return trans, fmt.Errorf("transaction %d: connect from port %d: %w", trans+1, port, err)
		}
		if reqSize > 0 {
			_ = c.SetDeadline(time.Now().Add(stockOpTimeout))
			if _, err = c.Write(req); err != nil {
				c.Close()
				return trans, fmt.Errorf("transaction %d: send request: %w", trans+1, err)
			}
			_ = c.SetDeadline(time.Now().Add(stockOpTimeout))
			if _, err = io.ReadFull(c, resp); err != nil {
				c.Close()
				return trans, fmt.Errorf("transaction %d: read response: %w", trans+1, err)
			}
		}
		// No shutdown(SHUT_WR): wait for the server's close.
		_ = c.SetDeadline(time.Now().Add(stockOpTimeout))
		n, rerr := c.Read(one)
		c.Close()
		if n != 0 || !errors.Is(rerr, io.EOF) {
			return trans, fmt.Errorf("transaction %d: recv after the response returned %d bytes, %v; want 0 (the server's close, before ours)", trans+1, n, rerr)
		}
		trans++
	}
	return trans, nil
}

// kernelPortDial is stock's data socket on kernel sockets: SO_REUSEADDR,
// bound to (local, port).
func kernelPortDial(local netip.Addr) portDialFunc {
	return func(ctx context.Context, port int, to netip.AddrPort) (net.Conn, error) {
		d := net.Dialer{
			LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(local, uint16(port))),
			Control: func(network, address string, c syscall.RawConn) error {
				var serr error
				if err := c.Control(func(fd uintptr) {
					serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
				}); err != nil {
					return err
				}
				return serr
			},
		}
		return d.DialContext(ctx, "tcp", to.String())
	}
}

// timeWaitByPort counts the kernel's TIME_WAIT sockets whose local port,
// and those whose remote port, is port (/proc/net/tcp and tcp6); ok is
// false without /proc.
func timeWaitByPort(port uint16) (local, remote int, ok bool) {
	want := fmt.Sprintf("%04X", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		ok = true
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "06" { // TCP_TIME_WAIT
				continue
			}
			if strings.HasSuffix(fields[1], ":"+want) {
				local++
			}
			if strings.HasSuffix(fields[2], ":"+want) {
				remote++
			}
		}
		fh.Close()
	}
	return local, remote, ok
}

// TestNetperfCRRStockDataPhase runs stock netperf's TCP_CRR (omni
// DO_OMNI, the captured request with -l 1) and TCP_CC (the classic
// DO_TCP_CC stock sends even in the omni build) against our server, on
// kernel sockets (the --kernel netserver) and on the userspace stack (the
// --config one), IPv4 and IPv6, with the stock-behaving client above: it
// completes transactions for the whole second, the server closed each
// connection first (the client's recv returned 0 before it closed; on
// kernel sockets the TIME_WAITs sit on the server's data port, none on the
// client's side), and the server counts what the client did.
//
// Planted bug: the server waiting for the client's half-close
// after the response (io.Copy to EOF before its close) fails every
// TCP_CRR case at transaction 1: "recv after the response returned 0
// bytes, ... i/o timeout", 0 transactions. TCP_CC was not affected.
func TestNetperfCRRStockDataPhase(t *testing.T) {
	a, b := stackPair(t)
	stackPort, stackLogs := startStackServer(t, b)

	kernelLogs := &lockedBuffer{}
	kernelPort := startKernelServer(t, ":0", kernelLogs)
	v6 := true
	if l6, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		v6 = false
	} else {
		l6.Close()
	}

	type mode struct {
		name     string
		ctlPort  int
		dial     dialFunc
		portDial func(fam uint32) portDialFunc
		srv      func(fam uint32) netip.Addr
		logs     *lockedBuffer
		kernel   bool
	}
	var kd net.Dialer
	modes := []mode{
		{
			name: "kernel", ctlPort: kernelPort, dial: kd.DialContext, logs: kernelLogs, kernel: true,
			srv: func(fam uint32) netip.Addr {
				if fam == netperf.FamilyIPv6 {
					return netip.IPv6Loopback()
				}
				return netip.MustParseAddr("127.0.0.1")
			},
			portDial: func(fam uint32) portDialFunc {
				if fam == netperf.FamilyIPv6 {
					return kernelPortDial(netip.IPv6Loopback())
				}
				return kernelPortDial(netip.MustParseAddr("127.0.0.1"))
			},
		},
		{
			name: "stack", ctlPort: stackPort, dial: a.DialContext, logs: stackLogs,
			srv: stackServerAddr,
			portDial: func(fam uint32) portDialFunc {
				local := stackClientV4
				if fam == netperf.FamilyIPv6 {
					local = stackClientV6
				}
				return func(ctx context.Context, port int, to netip.AddrPort) (net.Conn, error) {
					return a.DialTCPFrom(ctx, netip.AddrPortFrom(local, uint16(port)), to)
				}
			},
		},
	}
	for _, m := range modes {
		for _, fam := range []uint32{netperf.FamilyIPv4, netperf.FamilyIPv6} {
			if fam == netperf.FamilyIPv6 && m.kernel && !v6 {
				t.Logf("no IPv6 loopback: kernel IPv6 cases skipped")
				continue
			}
			for _, test := range []string{"tcp_crr", "tcp_cc"} {
				t.Run(m.name+"/"+map[uint32]string{4: "ipv4", 6: "ipv6"}[fam]+"/"+test, func(t *testing.T) {
					t.Parallel()
					srv := m.srv(fam)
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					ctl, err := m.dial(ctx, "tcp", net.JoinHostPort(srv.String(), strconv.Itoa(m.ctlPort)))
					if err != nil {
						t.Fatalf("control connect: %v", err)
					}
					defer ctl.Close()
					msg := *stockMessages(t, test+"_client_to_server.hex")[0]
					var reqSize, respSize int
					if test == "tcp_cc" {
						var req netperf.ClassicRequest
						if err := req.Unmarshal(&msg); err != nil || req.Test != netperf.ClassicCC {
							t.Fatalf("capture is not a DO_TCP_CC: %v", err)
						}
						req.IPFamily, req.TestLength = int32(fam), 1
						req.Marshal(&msg)
					} else {
						var req netperf.OmniRequest
						req.Unmarshal(&msg)
						if req.Flags&netperf.FlagConnectTest == 0 {
							t.Fatalf("capture's DO_OMNI has no CONNECT_TEST flag")
						}
						req.IPFamily, req.TestLength = fam, 1
						req.Marshal(&msg)
						reqSize, respSize = int(req.RequestSize), int(req.ResponseSize)
					}
					_ = ctl.SetDeadline(time.Now().Add(stockOpTimeout))
					if _, err := ctl.Write(msg[:]); err != nil {
						t.Fatal(err)
					}
					var r netperf.Message
					if _, err := io.ReadFull(ctl, r[:]); err != nil {
						t.Fatalf("read setup: %v", err)
					}
					var dataPort uint32
					if test == "tcp_cc" {
						var s netperf.ClassicSetup
						s.Unmarshal(&r, netperf.ClassicCC)
						dataPort = uint32(s.DataPort)
					} else {
						var s netperf.OmniSetup
						s.Unmarshal(&r)
						dataPort = s.DataPort
					}
					if dataPort == 0 {
						t.Fatalf("setup reply without a data port")
					}
					to := netip.AddrPortFrom(srv, uint16(dataPort))
					start := time.Now()
					trans, cerr := stockConnectClient(ctx, m.portDial(fam), to, reqSize, respSize, time.Second)
					took := time.Since(start)
					if cerr != nil {
						t.Errorf("stock client stopped after %d transactions, %v: %v", trans, took.Round(time.Millisecond), cerr)
					}
					if trans == 0 {
						t.Errorf("0 transactions in 1 s: the server waits for a close stock never sends first")
					}
					if m.kernel && cerr == nil {
						if srvTW, cliTW, ok := timeWaitByPort(uint16(dataPort)); ok {
							// The server closed first: its side holds the
							// TIME_WAITs. A loaded machine left one in
							// thousands on the client's side once (CI): a
							// client that closed first would hold them all.
							if srvTW == 0 || cliTW*100 > srvTW {
								t.Errorf("TIME_WAIT: %d on the server's data port, %d on the client's side; want > 0 and under 1%% of them (the server closes first)", srvTW, cliTW)
							}
							t.Logf("TIME_WAIT: %d on the server's data port, %d on the client's side", srvTW, cliTW)
						}
					}
					// The results come after the server's padded timer.
					_ = ctl.SetDeadline(time.Now().Add(netperf.PadTime + 10*time.Second))
					if _, err := io.ReadFull(ctl, r[:]); err != nil {
						t.Fatalf("read results: %v", err)
					}
					var got int64
					if test == "tcp_cc" {
						var res netperf.ClassicResults
						res.Unmarshal(&r, netperf.ClassicCC)
						if res.Errno != 0 {
							t.Fatalf("results: errno %d", res.Errno)
						}
						got = int64(res.TransReceived)
					} else {
						var res netperf.OmniResults
						res.Unmarshal(&r)
						if res.Errno != 0 {
							t.Fatalf("results: errno %d", res.Errno)
						}
						got = int64(res.TransReceived)
					}
					if cerr == nil && got != int64(trans) {
						t.Errorf("server counted %d transactions, the client %d", got, trans)
					}
					t.Logf("%s %s over %s: %d transactions in %v (%.0f/s), server counted %d", test, map[uint32]string{4: "IPv4", 6: "IPv6"}[fam], m.name, trans, took.Round(time.Millisecond), float64(trans)/took.Seconds(), got)
				})
			}
		}
	}
}
