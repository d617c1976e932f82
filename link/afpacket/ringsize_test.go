package afpacket_test

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/link/afpacket"
	mstack "github.com/mplsnode/mplsnode/stack"
)

// socketMapped returns the bytes this process maps from sockets
// (/proc/self/maps entries named socket:[inode]): the packet rings.
func socketMapped(t *testing.T) int {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	total := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.HasPrefix(fields[5], "socket:[") {
			continue
		}
		lo, hi, _ := strings.Cut(fields[0], "-")
		a, err1 := strconv.ParseUint(lo, 16, 64)
		b, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("/proc/self/maps: bad range %q", fields[0])
		}
		total += int(b - a)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return total
}

// Ring geometries, as layoutRing lays them out with 4 KiB pages (64 KiB
// smallest block), for the default 2048 receive and 512 transmit slots.
// A receive slot needs 66 bytes (where the kernel puts the Ethernet header)
// + 14 + MTU + 4 (an 802.1Q tag); a transmit slot 32 (TPACKET_V2 header)
// + 10 (virtio-net header) + 14 + MTU + 4.
var (
	// MTU 1500: 1584 and 1560 bytes, in 2 KiB slots, 32 per 64 KiB
	// block: 4 MiB and 1 MiB.
	geom1500 = afpacket.RingGeometry{
		RX: afpacket.RingLayout{SlotSize: 2048, Slots: 2048, BlockSize: 64 << 10, Blocks: 64},
		TX: afpacket.RingLayout{SlotSize: 2048, Slots: 512, BlockSize: 64 << 10, Blocks: 16},
	}
	// MTU 9000: 9084 and 9060 bytes, in slots of 9088 and 9072, 57 per
	// 512 KiB block: 36 blocks (18 MiB) and 9 (4.5 MiB). (64 KiB blocks
	// of 7 would take 293 and 74: 18.3 and 4.6 MiB; the old power-of-two
	// slots of 16 KiB took 32 and 8 MiB.)
	geom9000 = afpacket.RingGeometry{
		RX: afpacket.RingLayout{SlotSize: 9088, Slots: 2052, BlockSize: 512 << 10, Blocks: 36},
		TX: afpacket.RingLayout{SlotSize: 9072, Slots: 513, BlockSize: 512 << 10, Blocks: 9},
	}
	// MTU 65535: 65619 and 65595 bytes, in slots of 65632 and 65600, 15
	// per 1 MiB block: 137 MiB and 35 MiB (the old power-of-two slots of
	// 128 KiB took 256 MiB and 64 MiB).
	geom65535 = afpacket.RingGeometry{
		RX: afpacket.RingLayout{SlotSize: 65632, Slots: 2055, BlockSize: 1 << 20, Blocks: 137},
		TX: afpacket.RingLayout{SlotSize: 65600, Slots: 525, BlockSize: 1 << 20, Blocks: 35},
	}
)

// TestRingSizedForConfiguredMTU opens ring-mode endpoints on a veth of
// MTU 65535 with Options.MTU 1500 and 9000 (and through package stack with
// a Link MTU, as mplsnode's `link add ... mtu N` does) and checks that the
// rings are laid out, and mapped (/proc/self/maps), for the configured MTU:
// memory follows the MTU the link uses, not the interface's. Unset, the
// interface's MTU sizes them; a configured MTU above the interface's is
// capped by it. Planted bug: ringMTU returning the interface's MTU (the old
// sizing) gave the 65535 geometry, 172 MiB mapped, for both configured
// MTUs; stack.addLink not passing Link.MTU on gave it for the stack case.
func TestRingSizedForConfiguredMTU(t *testing.T) {
	if os.Getpagesize() != 4096 {
		t.Skipf("geometries computed for 4 KiB pages, not %d", os.Getpagesize())
	}
	netns.SkipUnlessRoot(t)
	a, b := netns.New(t, "rsa"), netns.New(t, "rsb")
	va, vb := netns.VethPair(t, a, b)
	a.MustExec("ip", "link", "set", va, "mtu", "65535")
	b.MustExec("ip", "link", "set", vb, "mtu", "65535")

	check := func(t *testing.T, opts afpacket.Options, ifMTU int, want afpacket.RingGeometry, queues int) {
		t.Helper()
		opts.Interface, opts.Mode = va, afpacket.ModeRing
		before := socketMapped(t)
		ep, err := openIn(t, a, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { ep.Close(); ep.Wait() }()
		mapped := socketMapped(t) - before
		g := ep.RingGeometry()
		if g != want {
			t.Errorf("RingGeometry() = %+v, want %+v", g, want)
		}
		if w := queues * (want.RX.Mapped() + want.TX.Mapped()); mapped != w {
			t.Errorf("the endpoint's %d queue(s) map %d bytes of rings, want %d", queues, mapped, w)
		}
		mtu := int(opts.MTU)
		if mtu == 0 || mtu > ifMTU {
			mtu = ifMTU
		}
		// Every slot holds a full-size frame and its headers.
		if g.RX.SlotSize < 66+14+mtu+4 || g.TX.SlotSize < 42+14+mtu+4 {
			t.Errorf("slots of %d (receive) and %d (transmit) bytes do not hold a %d-byte MTU's frame", g.RX.SlotSize, g.TX.SlotSize, mtu)
		}
		t.Logf("MTU %d: %d bytes mapped per queue; geometry %+v", ep.MTU(), mapped/queues, g)
	}
	t.Run("1500", func(t *testing.T) { check(t, afpacket.Options{MTU: 1500}, 65535, geom1500, 1) })
	t.Run("9000", func(t *testing.T) { check(t, afpacket.Options{MTU: 9000}, 65535, geom9000, 1) })
	t.Run("9000-queues2", func(t *testing.T) { check(t, afpacket.Options{MTU: 9000, Queues: 2}, 65535, geom9000, 2) })
	t.Run("interface", func(t *testing.T) { check(t, afpacket.Options{}, 65535, geom65535, 1) })
	t.Run("stack", func(t *testing.T) {
		// package stack passes the configured Link.MTU down.
		before := socketMapped(t)
		var s *mstack.Stack
		err := a.Run(func() (err error) {
			s, err = mstack.New(mstack.Config{
				Links:     []mstack.Link{{Name: va, Kind: mstack.LinkAFPacket, Mode: afpacket.ModeRing, MTU: 9000}},
				Addresses: []mstack.Address{{Link: va, Prefix: netip.MustParsePrefix("10.99.7.1/24")}},
			})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		mapped := socketMapped(t) - before
		s.Close()
		if w := geom9000.RX.Mapped() + geom9000.TX.Mapped(); mapped != w {
			t.Errorf("a stack link of MTU 9000 on an interface of MTU 65535 maps %d bytes of rings, want %d (65535's: %d)",
				mapped, w, geom65535.RX.Mapped()+geom65535.TX.Mapped())
		}
	})
	t.Run("capped", func(t *testing.T) {
		a.MustExec("ip", "link", "set", va, "mtu", "9000")
		defer a.MustExec("ip", "link", "set", va, "mtu", "65535")
		check(t, afpacket.Options{MTU: 65535}, 9000, geom9000, 1)
	})
}

// TestRingFullSizeFramesConfiguredMTU sends frames both ways between two
// ring-mode endpoints configured for MTU 1500 or 9000 on a veth of MTU
// 65535: full-size frames (MTU + 14) travel through the slots, and frames
// longer than a slot (the interface takes them) go another way (sendmmsg,
// the receive socket's queue), never cut: every frame arrives intact and
// in order, and TXSlot refuses room longer than a slot holds.
func TestRingFullSizeFramesConfiguredMTU(t *testing.T) {
	for _, mtu := range []int{1500, 9000} {
		t.Run(fmt.Sprint(mtu), func(t *testing.T) {
			tp := newTopo(t)
			tp.a.MustExec("ip", "link", "set", tp.va, "mtu", "65535")
			tp.b.MustExec("ip", "link", "set", tp.vb, "mtu", "65535")
			opts := afpacket.Options{Mode: afpacket.ModeRing, MTU: uint32(mtu), TXRingFrames: 64, RXRingFrames: 256}
			x, y, recY := pair(t, tp, opts, opts)
			recX := newRecorder()
			x.Attach(recX)
			g := x.RingGeometry()
			if g.TX.SlotSize >= 42+14+65535 {
				t.Fatalf("transmit slots of %d bytes: sized for the interface's MTU, not %d", g.TX.SlotSize, mtu)
			}
			full := mtu + 14
			over := g.TX.SlotSize - 42 + 1 // one byte more than a transmit slot holds
			sizes := []int{full, 64, full, over, full, 3 * full, full}
			for _, dir := range []struct {
				name     string
				tx, rx   *afpacket.Endpoint
				rec      *recorder
				txBefore afpacket.Stats
			}{{"x to y", x, y, recY, x.Stats()}, {"y to x", y, x, recX, y.Stats()}} {
				var frames [][]byte
				wantFull := 0
				for i := 0; i < 300; i++ {
					size := sizes[i%len(sizes)]
					if size == full {
						wantFull++
					}
					frames = append(frames, seqFrame(dir.rx.LinkAddress(), dir.tx.LinkAddress(), uint32(i), size))
				}
				sent := 0
				for i := 0; i < len(frames); i += 10 {
					// Paced, so that no receive queue overflows.
					sent += sendFrames(t, dir.tx, frames[i:i+10])
					time.Sleep(time.Millisecond)
				}
				rs, ts := waitAccounted(t, dir.rec, dir.tx, dir.rx, sent)
				got, bad, reorder, _ := dir.rec.snapshot()
				if sent != len(frames) || got != sent || bad != 0 || reorder != 0 || rs.RXTruncated != 0 || rs.RXDrops != 0 {
					t.Errorf("%s: sent %d of %d, delivered %d intact (%d corrupt, %d reordered), receiver stats %+v",
						dir.name, sent, len(frames), got, bad, reorder, rs)
				}
				if ts.TXErrors != dir.txBefore.TXErrors || ts.TXDropped != dir.txBefore.TXDropped {
					t.Errorf("%s: sender counted %d errors and %d drops", dir.name, ts.TXErrors-dir.txBefore.TXErrors, ts.TXDropped-dir.txBefore.TXDropped)
				}
				dir.rec.mu.Lock()
				if n := dir.rec.sizes[full]; n != wantFull {
					t.Errorf("%s: %d full-size (%d-byte) frames delivered, want %d", dir.name, n, full, wantFull)
				}
				dir.rec.mu.Unlock()
			}
			q, ok := x.TXBegin(0)
			if !ok {
				t.Fatal("TXBegin: no transmit ring")
			}
			if buf, err := x.TXSlot(q, full+4); len(buf) != full+4 || err != nil {
				t.Errorf("TXSlot(%d) = %d bytes, %v; want room for a full-size tagged frame", full+4, len(buf), err)
			}
			if buf, err := x.TXSlot(q, over); buf != nil || err != nil {
				t.Errorf("TXSlot(%d), longer than a slot: %d bytes, %v; want nil, no error", over, len(buf), err)
			}
			if _, err := x.TXEnd(q); err != nil {
				t.Errorf("TXEnd: %v", err)
			}
		})
	}
}
