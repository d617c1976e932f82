//go:build linux

package netem_test

import (
	"encoding/binary"
	"net"
	"os"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netem"
	"github.com/mplsnode/mplsnode/internal/testkit/netns"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		spec string
		want netem.Params
	}{
		{"", netem.Params{}},
		{"loss 1%", netem.Params{Loss: 0.01}},
		{"loss 5% duplicate 1%", netem.Params{Loss: 0.05, Duplicate: 0.01}},
		{"delay 5ms reorder 25% 50%", netem.Params{Delay: 5 * time.Millisecond, Reorder: 0.25, ReorderCorrelation: 0.5}},
		{"delay 20ms 5ms", netem.Params{Delay: 20 * time.Millisecond, Jitter: 5 * time.Millisecond}},
		{"delay 20ms limit 50", netem.Params{Delay: 20 * time.Millisecond, Limit: 50}},
	} {
		got, err := netem.Parse(c.spec)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", c.spec, got, err, c.want)
		}
	}
	for _, bad := range []string{"loss", "loss 1", "loss 101%", "delay", "delay x", "reorder 25%", "delay 1ms 2ms", "limit 0", "rate 1mbit"} {
		if _, err := netem.Parse(bad); err == nil {
			t.Errorf("Parse(%q) = nil error, want one", bad)
		}
	}
}

// relayPair builds a -- mid -- b with the relay in mid and the kernel in a
// and b owning 10.77.0.1 and 10.77.0.2; it returns a UDP sender in a and
// a receiver in b.
func relayPair(t *testing.T, spec string) (*netem.Relay, net.Conn, net.PacketConn) {
	t.Helper()
	netns.SkipUnlessRoot(t)
	a, mid, b := netns.New(t, "ra"), netns.New(t, "rm"), netns.New(t, "rb")
	// Only the test's datagrams (and ARP) cross: no IPv6 link-local chatter
	// in the relay's counts.
	for _, ns := range []*netns.NS{a, b} {
		for _, k := range []string{"default", "all"} {
			if err := ns.Run(func() error {
				return os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0o644)
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	va, ma := netns.VethPair(t, a, mid)
	mb, vb := netns.VethPair(t, mid, b)
	// The relay passes frames as they are: the kernel must finish the
	// checksums it would leave to the veth peer (partial checksums).
	a.MustExec("ethtool", "-K", va, "tx", "off")
	a.MustExec("ip", "addr", "add", "10.77.0.1/24", "dev", va)
	b.MustExec("ip", "addr", "add", "10.77.0.2/24", "dev", vb)
	p, err := netem.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	r, err := netem.Start(mid, ma, mb, p, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	var rx net.PacketConn
	if err := b.Run(func() (err error) { rx, err = net.ListenPacket("udp", "10.77.0.2:7000"); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rx.Close() })
	var tx net.Conn
	if err := a.Run(func() (err error) { tx, err = net.Dial("udp", "10.77.0.2:7000"); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Close() })
	// ARP through the relay before counting.
	tx.Write([]byte{0, 0, 0, 0})
	rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := rx.ReadFrom(make([]byte, 64)); err != nil {
		t.Fatalf("nothing crossed the relay: %v (%v)", err, r.Stats())
	}
	return r, tx, rx
}

// exchange sends n numbered datagrams (1..n) a millisecond apart and
// returns the sequence numbers received, in arrival order.
func exchange(t *testing.T, tx net.Conn, rx net.PacketConn, n int) []uint32 {
	t.Helper()
	// Read while sending: the socket buffer holds a few hundred only.
	done := make(chan []uint32)
	go func() {
		var got []uint32
		buf := make([]byte, 64)
		for {
			rx.SetReadDeadline(time.Now().Add(time.Second))
			m, _, err := rx.ReadFrom(buf)
			if err != nil {
				done <- got
				return
			}
			if m == 4 {
				got = append(got, binary.BigEndian.Uint32(buf))
			}
		}
	}()
	for i := 1; i <= n; i++ {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(i))
		if _, err := tx.Write(b[:]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	return <-done
}

// TestRelay checks each impairment with the kernel's UDP as the witness:
// what arrives matches the relay's own counts.
func TestRelay(t *testing.T) {
	const n = 500
	t.Run("loss", func(t *testing.T) {
		r, tx, rx := relayPair(t, "loss 10%")
		before := r.Stats()
		got := exchange(t, tx, rx, n)
		lost := r.Stats().Lost - before.Lost
		if lost == 0 || lost > n/4 {
			t.Errorf("relay lost %d of %d at 10%%, want 1..%d", lost, n, n/4)
		}
		if len(got) != n-int(lost) {
			t.Errorf("received %d, want %d sent - %d lost", len(got), n, lost)
		}
	})
	t.Run("duplicate", func(t *testing.T) {
		r, tx, rx := relayPair(t, "duplicate 10%")
		before := r.Stats()
		got := exchange(t, tx, rx, n)
		dup := r.Stats().Duplicated - before.Duplicated
		if dup == 0 || len(got) != n+int(dup) {
			t.Errorf("received %d with %d duplicated by the relay, want %d + duplicates (> 0)", len(got), dup, n)
		}
	})
	t.Run("reorder", func(t *testing.T) {
		r, tx, rx := relayPair(t, "delay 10ms reorder 25% 50%")
		got := exchange(t, tx, rx, n)
		if len(got) != n {
			t.Fatalf("received %d, want %d", len(got), n)
		}
		late := 0
		for i := 1; i < len(got); i++ {
			if got[i] < got[i-1] {
				late++
			}
		}
		if late == 0 || r.Stats().Reordered == 0 {
			t.Errorf("%d datagrams arrived after a later one, relay reordered %d; want both > 0", late, r.Stats().Reordered)
		}
	})
	t.Run("delay keeps order", func(t *testing.T) {
		r, tx, rx := relayPair(t, "delay 10ms")
		before := r.Stats()
		got := exchange(t, tx, rx, n)
		if len(got) != n {
			t.Fatalf("received %d, want %d", len(got), n)
		}
		if delayed := r.Stats().Delayed - before.Delayed; delayed < n {
			t.Errorf("relay delayed %d frames, want at least the %d datagrams", delayed, n)
		}
		for i := 1; i < len(got); i++ {
			if got[i] != got[i-1]+1 {
				t.Fatalf("datagram %d after %d: a fixed delay reordered", got[i], got[i-1])
			}
		}
	})
}
