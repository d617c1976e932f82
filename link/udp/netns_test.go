package udp

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/mplsnode/mplsnode/internal/testkit/netns"
	"github.com/mplsnode/mplsnode/internal/testkit/tshark"
)

// TestZeroChecksumOnWire: with ZeroChecksum an IPv4 datagram leaves with
// a zero UDP checksum, as tshark reads it off the namespace's loopback,
// and the link does no UDP GSO (Linux refuses to segment such a socket's
// sends); without it the field is not zero.
func TestZeroChecksumOnWire(t *testing.T) {
	netns.SkipUnlessRoot(t)
	tshark.Need(t)
	for _, zero := range []bool{true, false} {
		t.Run(fmt.Sprintf("zero=%v", zero), func(t *testing.T) {
			ns := netns.New(t, "mu6")
			var e *Endpoint
			var peer *net.UDPConn
			if err := ns.Run(func() error {
				var err error
				peer, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 26635})
				if err != nil {
					return err
				}
				e, err = New(Options{Local: netip.MustParseAddrPort("127.0.0.1:16635"), Remote: netip.MustParseAddrPort("127.0.0.1:26635"), ZeroChecksum: zero})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			defer e.Close()
			if e.Stats().GSO == zero {
				t.Errorf("GSO %v with ZeroChecksum %v", e.Stats().GSO, zero)
			}
			file := filepath.Join(t.TempDir(), "lo.pcap")
			cmd := exec.Command("ip", "netns", "exec", ns.Name(), "tshark", "-i", "lo", "-c", "2", "-f", "udp dst port 26635", "-w", file)
			var stderr tshark.Stderr
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if cmd.ProcessState == nil {
					cmd.Process.Kill()
					cmd.Wait()
				}
			}()
			for deadline := time.Now().Add(30 * time.Second); !tshark.Ready(stderr.String()); time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("tshark did not start: %s", stderr.String())
				}
			}
			for range 2 {
				var l stack.PacketBufferList
				l.PushBack(frame(ethertypeMPLS, mplsPacket(1, 2, 200)))
				if n, err := e.WritePackets(l); n != 1 || err != nil {
					t.Fatalf("WritePackets = %d, %v", n, err)
				}
				l.Reset()
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("tshark: %v: %s", err, stderr.String())
				}
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("tshark captured too few frames: %s", stderr.String())
			}
			for i, row := range tshark.Fields(t, file, "udp.checksum") {
				if isZero := row[0] == "0x0000"; isZero != zero || !strings.HasPrefix(row[0], "0x") {
					t.Errorf("datagram %d: UDP checksum %s (ZeroChecksum %v)", i, row[0], zero)
				}
			}
		})
	}
}
