package xdp_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/linktest"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/link/xdp"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// scapyPython is the Debian python3 that has python3-scapy.
const scapyPython = "/usr/bin/python3"

// sentFrame is one frame testdata/partial_form.py sent.
type sentFrame struct {
	kind  string
	frame []byte
}

// craft runs testdata/partial_form.py in ns b: a TCP SYN to gVisor's
// address whose checksum field holds the pseudo-header sum (the partial
// form) while its payload makes it wrong, then a good SYN; with sniff, the
// SYN-ACK destination ports seen before the good one's. It checks, with
// gVisor's header package, that the partial frame's checksum is wrong
// indeed and the good one's right.
func craft(t *testing.T, tp topo, port uint16, sniff bool) (sent []sentFrame, synacks []string) {
	t.Helper()
	if err := exec.Command(scapyPython, "-c", "import scapy.all").Run(); err != nil {
		t.Skipf("needs python3-scapy (Debian package; scripts/deps.sh installs it) to craft frames: %v", err)
	}
	args := []string{"ip", "netns", "exec", tp.b.Name(), scapyPython, "testdata/partial_form.py",
		"--iface", tp.vb, "--dst-mac", net.HardwareAddr(tp.ep.LinkAddress()).String(),
		"--src", kernelAddr.Addr().String(), "--dst", gvisorAddr.Addr().String(), "--dport", strconv.Itoa(int(port))}
	if sniff {
		args = append(args, "--sniff", "--timeout", "60")
	}
	cmd := exec.Command(args[0], args[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.Output(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("partial_form.py still running after 2 min: %s", stderr.String())
	}
	if err != nil {
		t.Fatalf("partial_form.py: %v: %s%s", err, out, stderr.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "sent":
			b, err := hex.DecodeString(f[2])
			if err != nil {
				t.Fatal(err)
			}
			sent = append(sent, sentFrame{f[1], b})
		case len(f) == 2 && f[0] == "synack":
			synacks = append(synacks, f[1])
		default:
			t.Fatalf("partial_form.py said %q", line)
		}
	}
	if len(sent) != 2 || sent[0].kind != "partial" || sent[1].kind != "good" {
		t.Fatalf("partial_form.py sent %v; want the partial frame, then the good one", sent)
	}
	for _, s := range sent {
		ip := header.IPv4(s.frame[header.EthernetMinimumSize:])
		tcp := header.TCP(ip.Payload())
		sum := header.PseudoHeaderChecksum(header.TCPProtocolNumber, ip.SourceAddress(), ip.DestinationAddress(), uint16(len(tcp)))
		valid := tcp.IsChecksumValid(ip.SourceAddress(), ip.DestinationAddress(), checksum.Checksum(tcp.Payload(), 0), uint16(len(tcp.Payload())))
		if want := s.kind == "good"; valid != want {
			t.Fatalf("%s frame: checksum valid %v, want %v", s.kind, valid, want)
		}
		if s.kind == "partial" && tcp.Checksum() != sum {
			t.Fatalf("partial frame: checksum field %#04x, want the pseudo-header sum %#04x", tcp.Checksum(), sum)
		}
	}
	return sent, synacks
}

// recordingDispatcher keeps a copy of every frame delivered and whether it
// came flagged RXChecksumValidated.
type recordingDispatcher struct {
	mu     sync.Mutex
	frames []recorded
}

type recorded struct {
	frame     []byte
	validated bool
}

func (d *recordingDispatcher) DeliverNetworkPacket(_ tcpip.NetworkProtocolNumber, pkt *stack.PacketBuffer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.frames = append(d.frames, recorded{pkt.ToView().ToSlice(), pkt.RXChecksumValidated})
}
func (d *recordingDispatcher) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

func (d *recordingDispatcher) find(frame []byte) (recorded, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.frames {
		if bytes.Equal(r.frame, frame) {
			return r, true
		}
	}
	return recorded{}, false
}

// TestPartialFormNotTrusted sends, with python3-scapy from the kernel's
// namespace, a TCP SYN whose checksum field holds the pseudo-header sum
// (what Linux leaves in a CHECKSUM_PARTIAL packet) while its payload makes
// the checksum wrong, then a good SYN, into the AF_XDP link:
//   - to a dispatcher: both arrive byte for byte as sent and neither is
//     flagged RXChecksumValidated (nothing above may skip verification,
//     nor finish a checksum that was never partial); the crafted one is
//     counted in RXChecksumPartialForm.
//   - to a gVisor stack listening on the port (mplsendpoint on the link):
//     the good SYN draws a SYN-ACK, the crafted one none, and it is
//     counted once as bad_checksum.
//
// Planted bug: delivering frames of the partial form flagged
// RXChecksumValidated (the link's old rule) fails both: the flag is seen,
// and the stack answers the crafted SYN.
func TestPartialFormNotTrusted(t *testing.T) {
	t.Run("dispatcher", func(t *testing.T) {
		tp := newTopo(t, xdp.Options{})
		d := &recordingDispatcher{}
		tp.ep.Attach(d)
		sent, _ := craft(t, tp, 5011, false)
		deadline := time.Now().Add(30 * time.Second)
		for _, s := range sent {
			for {
				r, ok := d.find(s.frame)
				if ok {
					if r.validated {
						t.Errorf("%s frame delivered flagged RXChecksumValidated", s.kind)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s frame never delivered as sent; %d frames delivered, stats %+v", s.kind, len(d.frames), tp.ep.Stats())
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		if st := tp.ep.Stats(); st.RXChecksumPartialForm != 1 {
			t.Errorf("RXChecksumPartialForm = %d, want 1 (the crafted frame): %+v", st.RXChecksumPartialForm, st)
		}
	})
	t.Run("stack", func(t *testing.T) {
		tp := newTopo(t, xdp.Options{})
		s, m := newStack(t, tp.ep)
		const port = 5012
		ln, err := gonet.ListenTCP(s, tcpip.FullAddress{NIC: linktest.NICID, Addr: tcpip.AddrFrom4(gvisorAddr.Addr().As4()), Port: port}, ipv4.ProtocolNumber)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		_, synacks := craft(t, tp, port, true)
		if !slices.Contains(synacks, "40002") {
			t.Fatalf("no SYN-ACK to the good SYN (sport 40002): saw %v; stats %+v, drops %v", synacks, tp.ep.Stats(), m.Stats().Drops)
		}
		if slices.Contains(synacks, "40001") {
			t.Errorf("the stack answered the crafted SYN (sport 40001, wrong checksum in the partial form): SYN-ACKs to %v", synacks)
		}
		if st := m.Stats(); st.Drops[mplsendpoint.DropBadChecksum] != 1 {
			t.Errorf("bad_checksum drops = %d, want 1 (the crafted SYN); drops %v", st.Drops[mplsendpoint.DropBadChecksum], st.Drops)
		}
	})
}

// TestPeerChecksumOffload shows what a veth peer with TX checksum offload
// on (the kernel's default) hands an AF_XDP link, the kernel being the
// oracle: its TCP frames arrive with the checksum in the partial form, as
// it left them for the device (counted in RXChecksumPartialForm), and the
// link cannot tell them from crafted ones, so they are dropped as
// bad_checksum and a connection to the kernel does not come up: the
// reason the package doc asks for `ethtool -K PEER tx off`.
func TestPeerChecksumOffload(t *testing.T) {
	tp := newTopo(t, xdp.Options{})
	tp.b.MustExec("ethtool", "-K", tp.vb, "tx", "on")
	s, m := newStack(t, tp.ep)
	ln := linktest.ListenIn(t, tp.b, kernelAddr.Addr().String()+":5013")
	_ = ln
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := gonet.DialContextTCP(ctx, s, tcpip.FullAddress{NIC: linktest.NICID, Addr: tcpip.AddrFrom4(kernelAddr.Addr().As4()), Port: 5013}, ipv4.ProtocolNumber)
	if err == nil {
		c.Close()
		t.Fatalf("connected to the kernel through a peer with TX checksum offload on: stats %+v", tp.ep.Stats())
	}
	st, drops := tp.ep.Stats(), m.Stats().Drops[mplsendpoint.DropBadChecksum]
	t.Logf("dial: %v; xdp stats %+v; bad_checksum %d", err, st, drops)
	if st.RXChecksumPartialForm == 0 || drops < st.RXChecksumPartialForm {
		t.Errorf("RXChecksumPartialForm %d, bad_checksum %d: want the kernel's SYN-ACKs in the partial form, all dropped", st.RXChecksumPartialForm, drops)
	}
}
