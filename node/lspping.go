package node

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/lspping"
	"github.com/mplsnode/mplsnode/mpls"
)

// The node's MPLS echo responder (RFC 8029): both forwarding planes hand
// it the echo requests they stop (mplsendpoint.EchoHandler: at the egress,
// where a label TTL runs out, where a top label has no entry; the XDP
// program passes all of these up), it decides each answer with
// lspping.Respond against the node's tables and sends the reply as UDP
// from port 3503 through the stack (routed, and labelled if the route
// back is), within the node's ICMP rate limit.

// echoQueueLen bounds the requests waiting for the responder: the data
// path never blocks on it.
const echoQueueLen = 256

// LSPPingDropReasons are the LSPPingReport.Drops keys:
//
//	queue_full               the responder's queue was full
//	rate_limited             over the node's ICMP rate limit (stack.ICMPRateLimit)
//	bad_ip                   an IP or UDP header cut short, or not UDP
//	bad_checksum             a bad IPv4 header or UDP checksum
//	not_loopback_destination a request to one of the node's addresses, not 127/8
//	truncated                shorter than the echo header
//	not_request              a message that is not a request
//	reply_mode_none          the sender asked for no reply
//	reply_mode_unsupported   reply mode 4 or unknown
//	ttl_not_expired          the T flag, and the TTL did not run out here
//	send_error               the reply could not be sent
var LSPPingDropReasons = []string{"queue_full", "rate_limited", "bad_ip", "bad_checksum", "not_loopback_destination",
	"truncated", "not_request", "reply_mode_none", "reply_mode_unsupported", "ttl_not_expired", "send_error"}

// LSPPingReport is the MPLS echo responder's counters (RFC 8029).
type LSPPingReport struct {
	// Requests counts requests received, by where the data plane stopped
	// them: egress, ttl_expired, no_label_entry.
	Requests map[string]uint64 `json:"requests"`
	// Replies counts replies sent, by return code name
	// (lspping.ReturnCode.String: egress, label-switched, ...).
	Replies map[string]uint64 `json:"replies"`
	// Drops counts requests not answered, by reason
	// (LSPPingDropReasons).
	Drops map[string]uint64 `json:"drops"`
}

var whereNames = map[lspping.Where]string{lspping.AtEgress: "egress", lspping.TTLExpired: "ttl_expired", lspping.NoLabelEntry: "no_label_entry"}

// echoJob is one request copied off the data path.
type echoJob struct {
	where  lspping.Where
	labels []mpls.Entry
	ip     []byte
	link   string
	at     time.Time
}

// responder answers MPLS echo requests for the node.
type responder struct {
	n     *Node
	log   *slog.Logger
	seed  uint32
	names map[*mplsendpoint.Endpoint]string
	q     chan echoJob
	conn  net.PacketConn // UDP port 3503
	// v4only: conn is an IPv4 socket (the stack has no IPv6).
	v4only bool
	done   chan struct{}
	wg     sync.WaitGroup

	requests [4]atomic.Uint64   // by Where
	replies  [256]atomic.Uint64 // by return code
	drops    map[string]*atomic.Uint64
}

// startResponder opens UDP port 3503 on the node's stack and starts the
// responder; the planes hand it requests once it is set as their echo
// handler.
func startResponder(n *Node, seed uint32, log *slog.Logger) (*responder, error) {
	r := &responder{n: n, log: log, seed: seed, names: map[*mplsendpoint.Endpoint]string{},
		q: make(chan echoJob, echoQueueLen), done: make(chan struct{}), drops: map[string]*atomic.Uint64{}}
	for _, d := range LSPPingDropReasons {
		r.drops[d] = new(atomic.Uint64)
	}
	for _, name := range n.stack.LinkNames() {
		r.names[n.stack.Endpoint(name)] = name
	}
	// One dual-stack socket takes both families (IPv4 peers as
	// ::ffff:a.b.c.d); a stack without IPv6 gets an IPv4 one.
	var err error
	if r.conn, err = n.stack.ListenUDP(netip.AddrPortFrom(netip.IPv6Unspecified(), lspping.Port)); err != nil {
		if r.conn, err = n.stack.ListenUDP(netip.AddrPortFrom(netip.IPv4Unspecified(), lspping.Port)); err != nil {
			return nil, err
		}
		r.v4only = true
	}
	r.wg.Add(1)
	go r.work()
	r.wg.Add(1)
	go r.readPort(r.conn)
	for ep := range r.names {
		ep.SetEchoHandler(r)
	}
	n.ls.SetEchoHandler(r)
	return r, nil
}

// close stops the responder.
func (r *responder) close() {
	if r == nil {
		return
	}
	for ep := range r.names {
		ep.SetEchoHandler(nil)
	}
	r.n.ls.SetEchoHandler(nil)
	close(r.done)
	r.conn.Close()
	r.wg.Wait()
}

func (r *responder) drop(reason string) { r.drops[reason].Add(1) }

// Echo implements mplsendpoint.EchoHandler: the request is copied and
// queued for the responder's goroutine.
func (r *responder) Echo(in *mplsendpoint.Endpoint, req *mplsendpoint.EchoRequest) {
	r.requests[req.Where&3].Add(1)
	j := echoJob{where: req.Where, labels: append([]mpls.Entry(nil), req.Labels...), ip: append([]byte(nil), req.IP...),
		link: r.names[in], at: time.Now()}
	select {
	case r.q <- j:
	default:
		r.drop("queue_full")
	}
}

// readPort reads what comes to UDP port 3503 of the node's addresses:
// requests must come to 127/8 down an LSP (RFC 8029 §4.3), so these are
// counted and discarded.
func (r *responder) readPort(c net.PacketConn) {
	defer r.wg.Done()
	buf := make([]byte, 2048)
	for {
		if _, _, err := c.ReadFrom(buf); err != nil {
			select {
			case <-r.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		r.drop("not_loopback_destination")
	}
}

// work answers the queued requests.
func (r *responder) work() {
	defer r.wg.Done()
	for {
		select {
		case <-r.done:
			return
		case j := <-r.q:
			r.answer(&j)
		}
	}
}

// answer decides and sends the reply to one request.
func (r *responder) answer(j *echoJob) {
	p, err := lspping.ParseIP(j.ip)
	switch {
	case errors.Is(err, lspping.ErrChecksum):
		r.drop("bad_checksum")
		return
	case err != nil:
		r.drop("bad_ip")
		return
	}
	a := &lspping.Arrival{Where: j.where, Labels: j.labels, IP: j.ip, Link: j.link, Received: lspping.NTPTime(j.at)}
	rep, why := lspping.Respond(p.Payload, a, echoTables{r})
	if rep == nil {
		r.drop(why.String())
		return
	}
	if !r.n.stack.Netstack().AllowICMPMessage() {
		r.drop("rate_limited")
		return
	}
	dst := p.Src.Unmap()
	if !r.v4only {
		dst = netip.AddrFrom16(dst.As16()) // ::ffff:a.b.c.d for an IPv4 peer
	} else if !dst.Is4() {
		r.drop("send_error")
		return
	}
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, p.SrcPort))
	if _, err := r.conn.WriteTo(rep.Marshal(), to); err != nil {
		r.drop("send_error")
		return
	}
	r.replies[rep.Code].Add(1)
}

// report returns the counters.
func (r *responder) report() LSPPingReport {
	rep := LSPPingReport{Requests: map[string]uint64{}, Replies: map[string]uint64{}, Drops: map[string]uint64{}}
	if r == nil {
		return rep
	}
	for w, name := range whereNames {
		rep.Requests[name] = r.requests[w].Load()
	}
	for _, c := range lspping.Codes() {
		rep.Replies[c.String()] = r.replies[c].Load()
	}
	for _, d := range LSPPingDropReasons {
		rep.Drops[d] = r.drops[d].Load()
	}
	return rep
}

// echoTables is the node as lspping.Respond sees it.
type echoTables struct{ r *responder }

var _ lspping.Tables = echoTables{}

func (t echoTables) ILM() *mpls.ILM { return t.r.n.stack.Tables().ILM() }
func (t echoTables) FIB() *mpls.FIB { return t.r.n.stack.Tables().FIB() }
func (t echoTables) Seed() uint32   { return t.r.seed }

func (t echoTables) LinkMTU(dev string) uint32 {
	if ep := t.r.n.stack.Endpoint(dev); ep != nil {
		return ep.LinkMTU()
	}
	return 0
}

// addrs calls f with each of the node's unicast addresses and its
// link's name until f returns true.
func (t echoTables) addrs(f func(dev string, a netip.Prefix) bool) {
	ns := t.r.n.stack.Netstack()
	info := ns.NICInfo()
	for id, pas := range ns.AllAddresses() {
		for _, pa := range pas {
			a, ok := netip.AddrFromSlice(pa.AddressWithPrefix.Address.AsSlice())
			if !ok || a.IsMulticast() || a.IsUnspecified() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
				continue // gVisor's NICs hold the broadcast address too
			}
			if f(info[id].Name, netip.PrefixFrom(a, pa.AddressWithPrefix.PrefixLen)) {
				return
			}
		}
	}
}

func (t echoTables) Egress(p netip.Prefix) bool {
	found := false
	t.addrs(func(_ string, a netip.Prefix) bool {
		found = !a.Addr().IsLoopback() && p.Contains(a.Addr())
		return found
	})
	return found
}

func (t echoTables) IsLocal(a netip.Addr) bool {
	found := false
	t.addrs(func(_ string, p netip.Prefix) bool {
		found = p.Addr() == a.Unmap()
		return found
	})
	return found
}

func (t echoTables) LinkAddr(dev string, like netip.Addr) netip.Addr {
	var out netip.Addr
	t.addrs(func(d string, p netip.Prefix) bool {
		if d == dev && p.Addr().Is4() == like.Is4() && !p.Addr().IsLinkLocalUnicast() {
			out = p.Addr()
			return true
		}
		return false
	})
	return out
}
