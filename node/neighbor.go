package node

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/mplsnode/mplsnode/stack"
	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// A neighbour that changes its MAC address (a replaced card, a failed-over
// virtual MAC, ip link set dev X address) says so with a gratuitous ARP: a
// broadcast request or reply whose sender is its address and new MAC.
// Linux replaces an existing neighbour entry's MAC from any ARP packet
// whose sender is that neighbour (outside its locktime, a second). The
// pinned gVisor follows RFC 4861 for ARP too: it ignores a request for an
// address that is not its own (the GARP request), and takes an unsolicited
// reply with a new address as a hint only (a reachable entry goes stale
// with the old address), so frames kept going to the old MAC until NUD's
// unicast probes to it failed: seconds in the userspace plane, for good in
// the XDP mirror, whose frames never make the stack use the stale entry.
//
// neighborWatch does what Linux does: it reads every ARP packet a link
// receives and, when its sender is an existing (dynamic) neighbour with
// another MAC, resolves the neighbour again (RemoveNeighbor, then
// GetLinkAddress: a broadcast request that the neighbour answers from its
// new MAC within a round trip), and tells the XDP plane at once (notify),
// which clears the entry's MAC in the program until the answer comes
// (frames pass up meanwhile and wait in the userspace plane's queue).
// Asking again, rather than taking the announced MAC as it is, leaves the
// entry's address to an answer the stack solicited.
//
// The ARP packets come from a kernel AF_PACKET socket on each AF_PACKET
// link, bound to ETH_P_ALL (the taps run before the links' TCX drop
// program, afpacket.Options.DropKernelRX) with a socket filter that takes
// only ARP, so the kernel copies nothing else to it. Links of other kinds
// (tap, AF_XDP, endpoints) are not watched: what they receive never
// reaches the namespace's packet taps as a received frame (a receive-path
// hook in the MPLS endpoint would cover them).
type neighborWatch struct {
	log *slog.Logger
	ns  *gstack.Stack

	// notify is called when a neighbour is resolved again, and when that
	// ends (nil: nothing is told); it must not block nor call into the
	// neighbour table (it runs in gVisor's resolution callback).
	notify func()

	mu    sync.Mutex
	acted map[neighborKey]time.Time // when each neighbour was last resolved again

	files []*os.File // one socket a watched link
	wg    sync.WaitGroup
}

// neighborKey names a neighbour: its address on a NIC.
type neighborKey struct {
	nic  tcpip.NICID
	addr tcpip.Address
}

// neighborLockTime is how soon after resolving a neighbour again for a
// new MAC another one it announces is ignored (Linux's
// net.ipv4.neigh.DEV.locktime): two hosts claiming one address make it
// flap at most once a locktime.
const neighborLockTime = time.Second

// arpSnapLen is the most of an ARP frame the socket keeps: Ethernet and
// the IPv4-over-Ethernet ARP body, padded to the Ethernet minimum.
const arpSnapLen = 64

// startNeighborWatch watches the AF_PACKET links of links on s for ARP
// packets announcing a neighbour's new MAC. It must run in the node's
// network namespace (the sockets bind there). A link whose socket cannot
// be opened is logged and left unwatched.
func startNeighborWatch(s *stack.Stack, links []stack.Link, logger *slog.Logger, notify func()) *neighborWatch {
	w := newNeighborWatch(s.Netstack(), logger, notify)
	nics := map[string]tcpip.NICID{}
	for id, info := range s.Netstack().NICInfo() {
		nics[info.Name] = id
	}
	for _, l := range links {
		nic, ok := nics[l.Name]
		ep := s.Endpoint(l.Name)
		if l.Kind != stack.LinkAFPacket || !ok || ep == nil {
			continue
		}
		f, err := openARPSocket(l.Name)
		if err != nil {
			logger.Warn("neighbour watch: a new MAC a neighbour announces on this link is learnt by NUD only", "link", l.Name, "err", err)
			continue
		}
		w.files = append(w.files, f)
		w.wg.Add(1)
		go w.read(f, nic, ep.LinkAddress)
	}
	return w
}

func newNeighborWatch(ns *gstack.Stack, logger *slog.Logger, notify func()) *neighborWatch {
	return &neighborWatch{log: logger, ns: ns, notify: notify, acted: map[neighborKey]time.Time{}}
}

func (w *neighborWatch) tell() {
	if w.notify != nil {
		w.notify()
	}
}

// close stops the watch: its sockets are closed and its readers ended.
func (w *neighborWatch) close() {
	if w == nil {
		return
	}
	for _, f := range w.files {
		f.Close()
	}
	w.wg.Wait()
	w.files = nil
}

// openARPSocket opens a non-blocking AF_PACKET socket that receives the
// ARP frames link dev receives (not those it sends).
func openARPSocket(dev string) (*os.File, error) {
	ifc, err := net.InterfaceByName(dev)
	if err != nil {
		return nil, err
	}
	// Protocol 0 receives nothing until the bind below, which comes after
	// the filter: no frame of another kind is ever queued.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: 12}, // ethertype
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: uint32(header.ARPProtocolNumber)},
		{Code: unix.BPF_RET | unix.BPF_K, K: arpSnapLen},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("setsockopt SO_ATTACH_FILTER", err)
	}
	// What the node sends itself need not come back (Linux 4.20 and
	// later; the reader skips it anyway).
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index}); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind", err)
	}
	return os.NewFile(uintptr(fd), "arp:"+dev), nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// read passes the ARP frames f receives to observeFrame until f is
// closed.
func (w *neighborWatch) read(f *os.File, nic tcpip.NICID, linkAddr func() tcpip.LinkAddress) {
	defer w.wg.Done()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, arpSnapLen)
	for {
		var n int
		var from unix.Sockaddr
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, from, rerr = unix.Recvfrom(int(fd), buf, 0)
			return !errors.Is(rerr, unix.EAGAIN)
		}); err != nil {
			return // closed
		}
		if rerr != nil {
			continue // EINTR, or the link went down (ENETDOWN)
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		w.observeFrame(nic, linkAddr(), buf[:n])
	}
}

// observeFrame passes the sender of frame, an Ethernet frame received on
// NIC nic whose own MAC is own, to observe if frame is an IPv4 ARP request
// or reply for this link (broadcast, multicast or to own, as the link
// takes them).
func (w *neighborWatch) observeFrame(nic tcpip.NICID, own tcpip.LinkAddress, frame []byte) bool {
	if len(frame) < header.EthernetMinimumSize+header.ARPSize {
		return false
	}
	eth := header.Ethernet(frame)
	if dst := eth.DestinationAddress(); dst != own && dst != header.EthernetBroadcastAddress && !header.IsMulticastEthernetAddress(dst) ||
		eth.Type() != header.ARPProtocolNumber {
		return false
	}
	a := header.ARP(frame[header.EthernetMinimumSize:])
	if !a.IsValid() || a.Op() != header.ARPRequest && a.Op() != header.ARPReply {
		return false
	}
	return w.observe(nic, tcpip.AddrFrom4Slice(a.ProtocolAddressSender()), tcpip.LinkAddress(a.HardwareAddressSender()))
}

// observe handles an ARP packet received on NIC nic whose sender is addr
// at mac: if addr is a dynamic neighbour there whose entry holds another
// MAC, it is resolved again (unless that happened less than
// neighborLockTime ago), and observe reports true.
func (w *neighborWatch) observe(nic tcpip.NICID, addr tcpip.Address, mac tcpip.LinkAddress) bool {
	if addr.Unspecified() || len(mac) != header.EthernetAddressSize || mac == header.EthernetBroadcastAddress ||
		header.IsMulticastEthernetAddress(mac) || mac == tcpip.LinkAddress(make([]byte, header.EthernetAddressSize)) {
		return false // an ARP probe (RFC 5227), or no usable MAC
	}
	nbrs, err := w.ns.Neighbors(nic, header.IPv4ProtocolNumber)
	if err != nil {
		return false
	}
	var old gstack.NeighborEntry
	found := false
	for _, e := range nbrs {
		if e.Addr == addr {
			old, found = e, true
			break
		}
	}
	// Only an entry with an address to replace: no entry is made for a
	// host that only announced itself (Linux's arp_accept 0), none waiting
	// for its answer is disturbed, a static one stays as it was set.
	if !found || old.LinkAddr == "" || old.LinkAddr == mac ||
		old.State == gstack.Static || old.State == gstack.Incomplete || old.State == gstack.Unknown {
		return false
	}
	key, now := neighborKey{nic: nic, addr: addr}, time.Now()
	w.mu.Lock()
	if t, ok := w.acted[key]; ok && now.Sub(t) < neighborLockTime {
		w.mu.Unlock()
		return false
	}
	for k, t := range w.acted {
		if now.Sub(t) >= neighborLockTime {
			delete(w.acted, k)
		}
	}
	w.acted[key] = now
	w.mu.Unlock()
	name := w.ns.FindNICNameFromID(nic)
	w.log.Info("neighbour announced a new MAC address: resolving it again", "link", name, "addr", addr.String(),
		"old", old.LinkAddr.String(), "announced", mac.String(), "state", old.State.String())
	w.ns.RemoveNeighbor(nic, header.IPv4ProtocolNumber, addr)
	terr := w.ns.GetLinkAddress(nic, addr, tcpip.Address{}, header.IPv4ProtocolNumber, func(r gstack.LinkResolutionResult) {
		// Called with the entry locked: nothing here calls into the
		// neighbour table.
		if r.Err != nil {
			w.log.Warn("neighbour watch: the neighbour did not answer from its new MAC", "link", name, "addr", addr.String(), "err", r.Err.String())
		}
		w.tell()
	})
	if terr != nil {
		if _, wait := terr.(*tcpip.ErrWouldBlock); !wait {
			w.log.Warn("neighbour watch: resolving again", "link", name, "addr", addr.String(), "err", terr.String())
		}
	}
	w.tell()
	return true
}
