package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
	"github.com/mplsnode/mplsnode/node"
	"gvisor.dev/gvisor/pkg/tcpip"
)

// TestRouteShowLabelStats runs `mplsnode run` as an LSR between two
// kernel namespaces: the sender writes labelled frames (label 100) onto
// its veth with a packet socket, the node swaps them to 200 towards the
// receiver. `mplsnode -f mpls route show -s --json` must count exactly
// the frames sent under 100, their bytes from the label stack on, and the
// receiver's kernel must have received at least as many frames on its
// veth (its rx_packets, the oracle).
func TestRouteShowLabelStats(t *testing.T) {
	bin := rootBinary(t)
	nsA, nsN, nsB := netns.New(t, "h1lbla"), netns.New(t, "h1lbln"), netns.New(t, "h1lblb")
	vA, vNA := netns.VethPair(t, nsA, nsN)
	vNB, vB := netns.VethPair(t, nsN, nsB)
	nsB.MustExec("ip", "addr", "add", "172.16.42.2/24", "dev", vB)
	p := startLSR(t, bin, nsN, fmt.Sprintf("link add %[1]s type afpacket\naddr add 172.16.41.1/24 dev %[1]s\n"+
		"link add %[2]s type afpacket\naddr add 172.16.42.1/24 dev %[2]s\n"+
		"-f mpls route add 100 as to 200 via inet 172.16.42.2 dev %[2]s\n", vNA, vNB))
	// The receiver's ping makes the node learn its MAC, so no frame waits.
	nsB.MustExec("ping", "-c", "2", "-W", "5", "172.16.42.1")

	var nodeMAC net.HardwareAddr
	if err := nsN.Run(func() error {
		ifi, err := net.InterfaceByName(vNA)
		if err == nil {
			nodeMAC = ifi.HardwareAddr
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ip := mplstest.UDP{Src: netip.MustParseAddrPort("172.16.41.2:1234"), Dst: netip.MustParseAddrPort("172.16.42.2:9"),
		TTL: 64, Payload: make([]byte, 400)}.IPv4()
	frame := mplstest.Frame{Dst: tcpip.LinkAddress(nodeMAC), Src: tcpip.LinkAddress("\x02\x00\x00\x00\x41\x02"),
		Labels: mplstest.Stack(64, mpls.Label(100)), Payload: ip}.Bytes()
	rxBefore := rxPackets(t, nsB, vB)
	const n = 50
	if err := nsA.Run(func() error { return sendRaw(vA, frame, n) }); err != nil {
		t.Fatal(err)
	}

	want := node.ILMEntry{Packets: n, Bytes: n * uint64(len(frame)-14)}
	var got node.ILMEntry
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = labelRoute(t, bin, nsN, p.sock, 100)
		if got.Packets >= want.Packets || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got.Packets != want.Packets || got.Bytes != want.Bytes {
		t.Errorf("label 100: got packets %d bytes %d (xdp %d %d), want %d %d", got.Packets, got.Bytes,
			got.XDPPackets, got.XDPBytes, want.Packets, want.Bytes)
	}
	if rx := rxPackets(t, nsB, vB) - rxBefore; rx < got.Packets {
		t.Errorf("the receiver's kernel got %d frames on %s, fewer than the %d the node counted", rx, vB, got.Packets)
	}
	t.Logf("label 100: %d packets, %d bytes, of them xdp %d packets", got.Packets, got.Bytes, got.XDPPackets)

	// The text form: the counts under the route's line.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", nsN.Name(), bin, "-f", "mpls", "route", "show", "-s", "--socket", p.sock).CombinedOutput()
	if err != nil {
		t.Fatalf("route show -s: %v: %s", err, out)
	}
	if line := fmt.Sprintf("    packets %d bytes %d", got.Packets, got.Bytes); !strings.Contains(string(out), line) {
		t.Errorf("route show -s printed %q, want a line starting %q", out, line)
	}
}

// labelRoute returns the label route of label l as `mplsnode -f mpls route
// show -s --json` gives it.
func labelRoute(t *testing.T, bin string, ns *netns.NS, sock string, l uint32) node.ILMEntry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", ns.Name(), bin, "-f", "mpls", "route", "show", "-s", "--json", "--socket", sock).Output()
	if err != nil {
		t.Fatalf("route show -s --json: %v: %s", err, out)
	}
	var es []node.ILMEntry
	if err := json.Unmarshal(out, &es); err != nil {
		t.Fatalf("route show --json: %v: %s", err, out)
	}
	for _, e := range es {
		if e.Label == l {
			return e
		}
	}
	t.Fatalf("no label route %d in %s", l, out)
	return node.ILMEntry{}
}

// rxPackets returns the kernel's rx_packets of dev in ns.
func rxPackets(t *testing.T, ns *netns.NS, dev string) uint64 {
	t.Helper()
	s := strings.TrimSpace(ns.MustExec("cat", "/sys/class/net/"+dev+"/statistics/rx_packets"))
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("rx_packets of %s: %q", dev, s)
	}
	return v
}

// sendRaw writes frame n times onto dev with an AF_PACKET socket (in the
// calling thread's namespace).
func sendRaw(dev string, frame []byte, n int) error {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return err
	}
	proto := int(binary.BigEndian.Uint16([]byte{0x88, 0x47}))
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, int(htons(uint16(proto))))
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	sa := &syscall.SockaddrLinklayer{Protocol: htons(uint16(proto)), Ifindex: ifi.Index}
	for range n {
		if err := syscall.Sendto(fd, frame, 0, sa); err != nil {
			return err
		}
	}
	return nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
