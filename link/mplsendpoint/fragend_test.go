package mplsendpoint_test

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"
	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"golang.org/x/sys/unix"
)

// finalBeforeHeldCases are fragment sets of one UDP datagram (3000 bytes
// of payload, 3008 of fragmentable part) in which a final fragment (M
// clear) arrives after a piece that lies, in whole or in part, beyond the
// end that final fragment gives the datagram. The set is inconsistent:
// RFC 8200 §4.5 and RFC 5722 (overlapping fragments: the whole datagram
// silently discarded) for IPv6, RFC 791's and Linux's rule for IPv4 (the
// kernel's ip_frag_queue and ip6_frag_queue discard the queue when a last
// fragment ends before data already queued).
func finalBeforeHeldCases(l4 []byte) map[string][]fragPiece {
	return map[string][]fragPiece{
		// The final fragment ends exactly where the held piece begins:
		// the held piece is wholly beyond the end.
		"ends where a held piece begins": {
			{off: 2464, data: l4[2464:3008], more: true},
			{off: 1232, data: l4[1232:2464], more: false},
		},
		// The final fragment ends inside the held piece.
		"ends inside a held piece": {
			{off: 1232, data: l4[1232:2464], more: true},
			{off: 8, data: l4[8:1240], more: false},
		},
		// A gap, then the held piece: the datagram would end at 1232
		// with bytes held at [2464, 3008).
		"a held piece beyond the end": {
			{off: 2464, data: l4[2464:3008], more: true},
			{off: 8, data: l4[8:1232], more: false},
		},
		// [16, 24) held, then the end at 16 given by [8, 16): the bytes
		// counted (16) equal that end although [0, 8) never came, so a
		// table that let this through would hand both pieces up with no
		// checksum verified.
		"covered bytes equal the end, the first missing": {
			{off: 16, data: l4[16:24], more: true},
			{off: 8, data: l4[8:16], more: false},
		},
	}
}

// TestFragmentFinalBeforeHeldPiece: when a final fragment (M clear)
// arrives after a piece that reaches past the end it gives the datagram,
// the set is refused at once as overlap (fragsum.go's place: "a piece
// beyond the new end"): fragment_overlap moves by 2 (the held piece and
// the final fragment), nothing stays held, and the stack receives
// nothing but the marker sent after it. The final fragment is never the
// first (offset 0 with M clear is no fragment). The Linux kernel refuses
// every one of these sets too (TestFragmentFinalBeforeHeldPieceKernel).
//
// Guards mutant w04: with `!more && pc.end > end` changed to `!more &&
// pc.first > end` in link/mplsendpoint/fragsum.go (the wrong edge of the
// held piece), "ends where a held piece begins" fails with
// "fragment_overlap moved by 0, 2 fragments held after the final one;
// want 2, 0 held (RFC 5722)", and "covered bytes equal the end, the first
// missing" with "moved by 0, 0 fragments held": both pieces were handed
// up with no checksum verified. (The general overlap test still catches
// "ends inside a held piece"; the edge that is left catches "a held piece
// beyond the end".)
func TestFragmentFinalBeforeHeldPiece(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(family(v6), func(t *testing.T) {
			l4 := udpDatagram(t, v6, 5000, payload3000())
			if len(l4) != 3008 {
				t.Fatalf("datagram of %d bytes, want 3008", len(l4))
			}
			for name, set := range finalBeforeHeldCases(l4) {
				t.Run(name, func(t *testing.T) {
					h := newFragHost(t) // RXFragmentsHeld counts this set only
					before := statDrop(h.ep, mplsendpoint.DropFragmentOverlap)
					h.sendPieces(t, v6, set)
					// Delivery is synchronous: the verdict is in.
					st := h.ep.Stats()
					if got := st.Drop(mplsendpoint.DropFragmentOverlap) - before; got != 2 || st.RXFragmentsHeld != 0 {
						t.Errorf("fragment_overlap moved by %d, %d fragments held after the final one; want 2, 0 held (RFC 5722)", got, st.RXFragmentsHeld)
					}
					h.sendMarker(t, v6)
					h.expectMarker(t, v6)
				})
			}
		})
	}
}

// TestFragmentFinalBeforeHeldPieceKernel is the oracle for
// TestFragmentFinalBeforeHeldPiece's expectations: the same fragment
// sets, sent to the Linux kernel of a namespace (root only), are each
// discarded whole: ReasmFails (Ip, Ip6 in /proc/net/snmp{,6}) moves by one
// per set and ReasmOKs does not move; a consistent set sent the same way
// is reassembled (ReasmOKs moves by one), which shows the frames reach
// the kernel's reassembly at all.
func TestFragmentFinalBeforeHeldPieceKernel(t *testing.T) {
	netns.SkipUnlessRoot(t)
	k := netns.New(t, "fk")
	s := netns.New(t, "fs")
	vk, vs := netns.VethPair(t, k, s)
	k.MustExec("ip", "link", "set", vk, "address", net.HardwareAddr(macA).String())
	k.MustExec("ip", "addr", "add", addrA4.String()+"/24", "dev", vk)
	k.MustExec("ip", "addr", "add", addrA6.String()+"/64", "dev", vk, "nodad")
	// A reassembled datagram (to a closed port) is answered with port
	// unreachable: static neighbours, so that nothing waits on resolution.
	k.MustExec("ip", "neigh", "replace", addrB4.String(), "lladdr", net.HardwareAddr(macB).String(), "dev", vk)
	k.MustExec("ip", "neigh", "replace", addrB6.String(), "lladdr", net.HardwareAddr(macB).String(), "dev", vk)
	var fd int
	if err := s.Run(func() error {
		ifi, err := net.InterfaceByName(vs)
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: 0, Ifindex: ifi.Index})
	}); err != nil {
		t.Fatalf("packet socket on %s: %v", vs, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	id := uint32(0x2800)
	send := func(t *testing.T, v6 bool, set []fragPiece) {
		t.Helper()
		id++
		for _, p := range set {
			if _, err := unix.Write(fd, fragFrame(t, v6, id, layers.IPProtocolUDP, p)); err != nil {
				t.Fatalf("write: %v", err)
			}
		}
	}
	for _, v6 := range []bool{false, true} {
		t.Run(family(v6), func(t *testing.T) {
			l4 := udpDatagram(t, v6, 5000, payload3000())
			// The harness: a consistent set is reassembled.
			oks, fails := reasm(t, k, v6)
			send(t, v6, split(l4, 1232))
			waitReasm(t, k, v6, oks+1, fails, "a consistent set of 3 fragments reassembled")
			for name, set := range finalBeforeHeldCases(l4) {
				t.Run(name, func(t *testing.T) {
					oks, fails := reasm(t, k, v6)
					send(t, v6, set)
					waitReasm(t, k, v6, oks, fails+1, "the set discarded whole")
				})
			}
		})
	}
}

// reasm returns ReasmOKs and ReasmFails of ns's kernel for IPv4 or IPv6.
func reasm(t *testing.T, ns *netns.NS, v6 bool) (oks, fails uint64) {
	t.Helper()
	if v6 {
		for _, line := range strings.Split(ns.MustExec("cat", "/proc/net/snmp6"), "\n") {
			f := strings.Fields(line)
			if len(f) != 2 {
				continue
			}
			n, _ := strconv.ParseUint(f[1], 10, 64)
			switch f[0] {
			case "Ip6ReasmOKs":
				oks = n
			case "Ip6ReasmFails":
				fails = n
			}
		}
		return oks, fails
	}
	var names []string
	for _, line := range strings.Split(ns.MustExec("cat", "/proc/net/snmp"), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "Ip:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i := 1; i < len(f) && i < len(names); i++ {
			n, _ := strconv.ParseUint(f[i], 10, 64)
			switch names[i] {
			case "ReasmOKs":
				oks = n
			case "ReasmFails":
				fails = n
			}
		}
	}
	return oks, fails
}

// waitReasm waits (5 s at most) until ns's reassembly counters are oks
// and fails, and fails the test with what they are otherwise.
func waitReasm(t *testing.T, ns *netns.NS, v6 bool, oks, fails uint64, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		o, f := reasm(t, ns, v6)
		if o == oks && f == fails {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kernel ReasmOKs %d ReasmFails %d, want %d %d (%s)", o, f, oks, fails, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
