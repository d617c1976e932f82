package node_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/wiretest"
	"github.com/mplsnode/mplsnode/lspping"
	"github.com/mplsnode/mplsnode/stack"
)

// TestLSPPingHostile sends an egress node MPLS echo requests that
// scapy crafts (testdata/lspping_hostile.py packs the messages by hand,
// independently of package lspping) from a kernel namespace, and reads
// the replies with a kernel UDP socket: a good request gets return code
// 3; a TLV whose length runs past the message and a sub-TLV of the wrong
// length get 1 (malformed); an unknown mandatory TLV gets 2 with that TLV
// in an Errored TLVs TLV; a request to the node's own address instead of
// 127/8 gets none (counted as not_loopback_destination); 1000 requests in
// a second get no more replies than the node's ICMP rate limit allows,
// the rest counted, and the node answers again afterwards.
// Checked by planting the bug (l04): without the rate limit every
// request is answered and none is counted rate_limited.
func TestLSPPingHostile(t *testing.T) {
	netns.SkipUnlessRoot(t)
	if err := exec.Command(scapyPython, "-c", "import scapy.all").Run(); err != nil {
		t.Skipf("needs python3-scapy (Debian package; scripts/deps.sh installs it) to craft frames: %v", err)
	}
	nsA, nsB := netns.New(t, "lph0"), netns.New(t, "lph1")
	wiretest.DisableIPv6(t, nsA)
	wiretest.DisableIPv6(t, nsB)
	va, vb := netns.VethPair(t, nsA, nsB)
	nsA.MustExec("ip", "addr", "add", "172.16.21.21/24", "dev", va)
	n := startNode(t, nsB, "egress.conf", fmt.Sprintf(`link add %[1]s type afpacket
addr add 172.16.21.22/24 dev %[1]s
addr add 10.10.10.10/32 dev lo
-f mpls route add 200 dev lo
`, vb))
	mac := wiretest.MAC(t, nsB, vb)
	var conn *net.UDPConn
	if err := nsA.Run(func() (err error) {
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(172, 16, 21, 21), Port: 40000})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadBuffer(4 << 20) // every reply of the flood fits

	// send runs the script; replies reads what came back within wait.
	send := func(what string, count int, rate float64) time.Duration {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "ip", "netns", "exec", nsA.Name(), scapyPython, "testdata/lspping_hostile.py",
			va, mac.String(), "172.16.21.21", what, strconv.Itoa(count), fmt.Sprint(rate)).CombinedOutput()
		if err != nil {
			t.Fatalf("lspping_hostile.py %s: %v: %s", what, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		secs, err := strconv.ParseFloat(lines[len(lines)-1], 64)
		if err != nil {
			t.Fatalf("lspping_hostile.py %s: %q", what, out)
		}
		return time.Duration(secs * float64(time.Second))
	}
	replies := func(wait time.Duration) []*lspping.Message {
		t.Helper()
		var out []*lspping.Message
		buf := make([]byte, 9000)
		conn.SetReadDeadline(time.Now().Add(wait))
		for {
			k, from, err := conn.ReadFromUDP(buf)
			if err != nil {
				return out
			}
			if from.Port != lspping.Port || !from.IP.Equal(net.IPv4(172, 16, 21, 22)) {
				t.Errorf("reply from %v, want 172.16.21.22:3503", from)
			}
			m, err := lspping.Decode(buf[:k])
			if err != nil {
				t.Errorf("a reply that does not decode: %v: %x", err, buf[:k])
				continue
			}
			out = append(out, m)
		}
	}
	one := func(what string, code lspping.ReturnCode) *lspping.Message {
		t.Helper()
		send(what, 1, 1)
		got := replies(2 * time.Second)
		if len(got) != 1 {
			t.Fatalf("%s: %d replies, want 1", what, len(got))
		}
		if m := got[0]; m.Type != lspping.Reply || m.Handle != 0x5ca9 || m.Seq != 1 || m.Code != code {
			t.Errorf("%s: reply %v handle %#x seq %d code %d (%s), want reply handle 0x5ca9 seq 1 code %d (%s)",
				what, m.Type, m.Handle, m.Seq, m.Code, m.Code.Describe(m.Subcode), code, code.Describe(1))
		}
		return got[0]
	}

	if m := one("good", lspping.CodeEgress); m.Subcode != 1 {
		t.Errorf("good: subcode %d, want 1 (stack-depth 1)", m.Subcode)
	}
	one("truncated", lspping.CodeMalformed)
	one("badlen", lspping.CodeMalformed)
	m := one("unknown", lspping.CodeTLVNotUnderstood)
	if len(m.Errored) != 1 || m.Errored[0].Type != 99 || string(m.Errored[0].Value) != "\x01\x02\x03\x04" {
		t.Errorf("unknown: Errored TLVs %+v, want the TLV of type 99", m.Errored)
	}
	send("notlocal", 1, 1)
	if got := replies(time.Second); len(got) != 0 {
		t.Errorf("notlocal: %d replies, want none", len(got))
	}
	if d := n.Report().LSPPing.Drops["not_loopback_destination"]; d != 1 {
		t.Errorf("not_loopback_destination = %d, want 1", d)
	}

	time.Sleep(time.Second) // the ICMP bucket refills
	before := n.Report().LSPPing
	const flood = 1000
	took := send("flood", flood, flood)
	got := replies(2 * time.Second)
	after := n.Report().LSPPing
	limit := stack.ICMPBurst + int(float64(stack.ICMPRateLimit)*(took+200*time.Millisecond).Seconds())
	sent := int(after.Replies["egress"] - before.Replies["egress"])
	t.Logf("flood of %d requests in %v: %d replies sent, %d received", flood, took, sent, len(got))
	if sent > limit || sent < stack.ICMPBurst || len(got) != sent {
		t.Errorf("flood of %d in %v: %d replies sent, %d received, want %d to %d (the ICMP rate limit), all received", flood, took, sent, len(got), stack.ICMPBurst, limit)
	}
	limited := after.Drops["rate_limited"] - before.Drops["rate_limited"] + after.Drops["queue_full"] - before.Drops["queue_full"]
	if int(limited)+sent != flood {
		t.Errorf("flood: %d replies and %d rate_limited or queue_full, want %d in all (%+v)", sent, limited, flood, after)
	}
	time.Sleep(time.Second)
	one("good", lspping.CodeEgress)
}
