package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mplsnode/mplsnode/internal/lograte"
)

// BGPPort is the well-known BGP port (RFC 4271).
const BGPPort = 179

// dialTimeout bounds one outbound connection attempt through the stack.
const dialTimeout = 10 * time.Second

// loopbackAlias is the kernel loopback address by which GoBGP knows
// neighbour i: 127.100.0.1, 127.100.0.2, ... (any 127/8 address is local
// on Linux's lo).
func loopbackAlias(i int) netip.Addr {
	n := i + 1
	return netip.AddrFrom4([4]byte{127, 100, byte(n >> 8), byte(n)})
}

// splice joins the sessions' TCP connections in the userspace stack to
// GoBGP's kernel sockets on loopback (see the package doc).
type splice struct {
	tr         Transport
	log        *slog.Logger
	gobgpPort  int                // GoBGP listens on 127.0.0.1:gobgpPort
	byPeer     map[netip.Addr]int // neighbour address -> index
	neighbors  []Neighbor
	listenPort uint16
	// rd reads the neighbours' UPDATEs in place of GoBGP.
	rd routeReader

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	listeners []net.Listener
	conns     map[net.Conn]struct{}

	// unknownPeer counts inbound connections from addresses that are not
	// neighbours (closed at once).
	unknownPeer atomic.Uint64
	// dialFailed counts outbound connections the stack could not open.
	dialFailed atomic.Uint64
	// unnegotiated counts UPDATEs that carried a family the session did
	// not negotiate (that part kept from GoBGP); unnegotiatedLog limits
	// their warnings.
	unnegotiated    atomic.Uint64
	unnegotiatedLog lograte.Limiter
}

// unnegotiatedFamily counts and logs what copyFromNeighbor kept from
// GoBGP.
func (s *splice) unnegotiatedFamily(i int, u unnegotiated) {
	s.unnegotiated.Add(1)
	if held, ok := s.unnegotiatedLog.Allow(1); ok {
		s.log.Warn("bgp: ignored the routes of a family the session did not negotiate (RFC 4760 §7)",
			"neighbor", s.neighbors[i].Address.String(), "afi", u.family.afi, "safi", u.family.safi,
			"whole_update", u.drop, "suppressed", held)
	}
}

// freeLoopbackPort returns a TCP port free on 127.0.0.1 now, after
// checking that the kernel loopback carries a connection from a neighbour
// alias (binding works on a loopback that is down; connecting does not).
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("bgp: the kernel loopback is needed to reach GoBGP: %w", err)
	}
	defer l.Close()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: loopbackAlias(0).AsSlice()}}
	c, err := d.Dial("tcp4", l.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("bgp: the kernel loopback does not carry connections (bring it up: ip link set lo up): %w", err)
	}
	c.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// routeReader is what reads the routes of the neighbours' UPDATEs in the
// splice (the speaker: takeUpdate, sessionEnded).
type routeReader interface {
	// takeUpdate reads the routes of an UPDATE body from neighbour peer,
	// or says why GoBGP is to read it.
	takeUpdate(peer int, body []byte, negotiated map[afiSafi]bool) take
	// sessionEnded says a connection of neighbour peer whose routes
	// takeUpdate read has ended.
	sessionEnded(peer int)
}

func newSplice(tr Transport, neighbors []Neighbor, listenPort uint16, gobgpPort int, rd routeReader, log *slog.Logger) *splice {
	ctx, cancel := context.WithCancel(context.Background())
	s := &splice{
		tr: tr, log: log, gobgpPort: gobgpPort, neighbors: neighbors, listenPort: listenPort, rd: rd,
		byPeer: map[netip.Addr]int{}, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{},
	}
	if s.listenPort == 0 {
		s.listenPort = BGPPort
	}
	for i, n := range neighbors {
		s.byPeer[n.Address] = i
	}
	return s
}

// start opens the userspace listeners (one per distinct local address) and
// the kernel listeners for GoBGP's outbound connections.
func (s *splice) start() error {
	locals := map[netip.Addr]bool{}
	for i, n := range s.neighbors {
		if !locals[n.Local] {
			locals[n.Local] = true
			ln, err := s.tr.ListenTCP(netip.AddrPortFrom(n.Local, s.listenPort))
			if err != nil {
				return fmt.Errorf("bgp: listening on %s port %d in the stack: %w", n.Local, s.listenPort, err)
			}
			s.track(ln)
			s.wg.Add(1)
			go s.acceptStack(ln)
		}
		kl, err := net.Listen("tcp4", net.JoinHostPort(loopbackAlias(i).String(), strconv.Itoa(s.gobgpPort)))
		if err != nil {
			return fmt.Errorf("bgp: kernel loopback listener for neighbour %s: %w", n.Address, err)
		}
		s.track(kl)
		s.wg.Add(1)
		go s.acceptKernel(kl, i)
	}
	return nil
}

func (s *splice) track(l net.Listener) {
	s.mu.Lock()
	s.listeners = append(s.listeners, l)
	s.mu.Unlock()
}

// acceptStack takes sessions neighbours open to the node.
func (s *splice) acceptStack(ln net.Listener) {
	defer s.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		remote := addrOf(c.RemoteAddr())
		i, ok := s.byPeer[remote]
		if !ok {
			s.unknownPeer.Add(1)
			s.log.Warn("bgp: connection from an address that is no neighbour; closed", "remote", c.RemoteAddr().String())
			c.Close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			d := net.Dialer{Timeout: dialTimeout, LocalAddr: &net.TCPAddr{IP: loopbackAlias(i).AsSlice()}}
			k, err := d.DialContext(s.ctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.gobgpPort)))
			if err != nil {
				s.log.Warn("bgp: cannot reach GoBGP on loopback", "neighbor", remote.String(), "err", err)
				c.Close()
				return
			}
			s.join(c, k, i)
		}()
	}
}

// acceptKernel takes the sessions GoBGP opens to neighbour i and dials the
// neighbour through the stack.
func (s *splice) acceptKernel(ln net.Listener, i int) {
	defer s.wg.Done()
	n := s.neighbors[i]
	port := n.Port
	if port == 0 {
		port = BGPPort
	}
	for {
		k, err := ln.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			ctx, cancel := context.WithTimeout(s.ctx, dialTimeout)
			defer cancel()
			c, err := s.tr.DialTCPFrom(ctx, netip.AddrPortFrom(n.Local, 0), netip.AddrPortFrom(n.Address, port))
			if err != nil {
				s.dialFailed.Add(1)
				s.log.Debug("bgp: connecting to neighbour", "neighbor", n.Address.String(), "err", err)
				k.Close()
				return
			}
			s.join(c, k, i)
		}()
	}
}

// join copies messages both ways between neighbour i's connection a and
// GoBGP's b until either side ends, then closes both. What the neighbour
// sends goes through copyFromNeighbor, its routes to s.rd, what GoBGP
// sends through copyFromGoBGP; when the connection carried routes s.rd
// read, s.rd hears of its end.
func (s *splice) join(a, b net.Conn, i int) {
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		a.Close()
		b.Close()
		return
	}
	s.conns[a], s.conns[b] = struct{}{}, struct{}{}
	s.mu.Unlock()
	done := make(chan struct{}, 2)
	var gw gobgpWire
	go func() {
		_ = copyFromGoBGP(a, b, &gw)
		done <- struct{}{}
	}()
	go func() {
		took := false
		offer := func(body []byte, negotiated map[afiSafi]bool) take {
			t := s.rd.takeUpdate(i, body, negotiated)
			took = took || t == tookUpdate
			return t
		}
		_ = copyFromNeighbor(b, a, s.neighbors[i], func(u unnegotiated) { s.unnegotiatedFamily(i, u) }, &gw, offer)
		if took {
			s.rd.sessionEnded(i)
		}
		done <- struct{}{}
	}()
	<-done
	a.Close()
	b.Close()
	<-done
	s.mu.Lock()
	delete(s.conns, a)
	delete(s.conns, b)
	s.mu.Unlock()
}

// close stops the listeners and every spliced connection and waits for the
// splice's goroutines.
func (s *splice) close() {
	s.cancel()
	s.mu.Lock()
	for _, l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// addrOf returns the IP of a TCP address, unmapped.
func addrOf(a net.Addr) netip.Addr {
	if t, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(t.IP)
		return ip.Unmap()
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// inProcessNamespace runs f on a fresh goroutine and waits for it. The
// kernel loopback sockets must be in the same network namespace as
// GoBGP's, which its own goroutines open in the process's namespace; a
// caller locked to a thread in another namespace (tests build nodes inside
// ns.Run) would otherwise open the splice's listeners there.
func inProcessNamespace(f func() error) error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return <-ch
}

// levelHandler passes on records at or above its level only: GoBGP logs
// every peer event at info through the handler it is given.
type levelHandler struct {
	slog.Handler
	level slog.Leveler
}

func (h levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level.Level() && h.Handler.Enabled(ctx, l)
}

func (h levelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return levelHandler{h.Handler.WithAttrs(as), h.level}
}

func (h levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{h.Handler.WithGroup(name), h.level}
}
