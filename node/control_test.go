package node_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/forward"
	"github.com/mplsnode/mplsnode/internal/testkit/nodekit"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/node"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/channel"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// obsConf is a two-link LSR: label 100 is swapped to 200 towards 10.2.0.2.
const obsConf = `
link add in0 type afpacket
link add out0 type afpacket
addr add 10.1.0.1/24 dev in0
addr add 10.2.0.1/24 dev out0
-f mpls route add 100 as to 200 via inet 10.2.0.2
`

// obsNode starts obsConf on channel endpoints with the next hop resolved,
// and feeds it one frame with label 100 (swapped and forwarded) and one
// with label 999 (no ILM entry).
func obsNode(t testing.TB) *node.Node {
	t.Helper()
	return obsNodeWith(t, "", []uint32{100, 999})
}

// obsNodeWith is obsNode with more config lines and the labels of the
// frames fed to it, one frame each.
func obsNodeWith(t testing.TB, more string, labels []uint32) *node.Node {
	t.Helper()
	in := channel.New(16, 1500, macIn)
	n := nodekit.ChannelNode(t, "obs.conf", obsConf+more, nil,
		map[string]*channel.Endpoint{"in0": in, "out0": channel.New(16, 1500, macOut)})
	nodekit.StaticNeighbor(t, n, "out0", [4]byte{10, 2, 0, 2}, macNext)
	for _, label := range labels {
		f := make([]byte, 14, 64)
		copy(f, macIn)
		copy(f[6:], "\x02\x00\x00\x00\x01\x02")
		binary.BigEndian.PutUint16(f[12:], 0x8847)
		// One entry: label, S bit, TTL 64; then a 20-byte IPv4 header.
		f = binary.BigEndian.AppendUint32(f, label<<12|1<<8|64)
		ip := header.IPv4(make([]byte, header.IPv4MinimumSize))
		ip.Encode(&header.IPv4Fields{TotalLength: header.IPv4MinimumSize, TTL: 64, Protocol: 17,
			SrcAddr: tcpip.AddrFrom4([4]byte{10, 1, 0, 2}), DstAddr: tcpip.AddrFrom4([4]byte{10, 9, 9, 9})})
		ip.SetChecksum(^ip.CalculateChecksum())
		f = append(f, ip...)
		pkt := gstack.NewPacketBuffer(gstack.PacketBufferOptions{Payload: buffer.MakeWithData(f)})
		in.InjectInbound(0, pkt)
		pkt.DecRef()
	}
	return n
}

// startControl serves the control socket in a temporary directory.
func startControl(t *testing.T, n *node.Node) string {
	t.Helper()
	return startControlAt(t, n, filepath.Join(t.TempDir(), "c.sock"))
}

// startControlAt serves n's control socket at path until t ends and
// returns path once the socket exists; at the end the server must return
// nil and have removed the socket.
func startControlAt(t *testing.T, n *node.Node, path string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.ServeControl(ctx, n, path) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeControl: %v", err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("got Stat(socket) error %v after stop, want not exist", err)
		}
	})
	for i := 0; ; i++ {
		if _, err := os.Stat(path); err == nil {
			return path
		}
		select {
		case err := <-done:
			t.Fatalf("ServeControl returned early: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// ask sends req on a new connection to the control socket at path and
// returns the whole answer (the server closes after it).
func ask(t *testing.T, path, req string) string {
	t.Helper()
	return exchange(t, path, req, false)
}

// askHalfClose sends req, closes its side for writing (so the server sees
// EOF after req) and returns the whole answer.
func askHalfClose(t *testing.T, path, req string) string {
	t.Helper()
	return exchange(t, path, req, true)
}

// exchange writes req on a new connection to the control socket at path,
// closes the writing side first when closeWrite is set, and reads the
// answer to its end, all within 10 s.
func exchange(t *testing.T, path, req string, closeWrite bool) string {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	if closeWrite {
		c.(*net.UnixConn).CloseWrite()
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestControlSocket(t *testing.T) {
	n := obsNode(t)
	path := startControl(t, n)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("got socket mode %v, want 0600", got)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("got mode %v, want a socket", fi.Mode())
	}

	var raw map[string]any
	body := ask(t, path, "stats\n")
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatalf("stats answer is not JSON: %v\n%s", err, body)
	}
	for _, k := range []string{"links", "label_switch", "tcp"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("got no key %q in %s", k, body)
		}
	}
	var r node.Report
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Links) != 2 || r.Links[0].Name != "in0" || r.Links[1].Name != "out0" {
		t.Fatalf("got links %+v, want in0, out0", r.Links)
	}
	in, out := r.Links[0], r.Links[1]
	if want := len(mplsendpoint.DropReasons()) + len(node.LowerDropReasons); len(in.Drops) != want {
		t.Errorf("got %d drop reasons, want every one (%d)", len(in.Drops), want)
	}
	if len(r.LabelSwitch.Drops) != len(forward.Drops()) {
		t.Errorf("got %d switch drop reasons, want %d", len(r.LabelSwitch.Drops), len(forward.Drops()))
	}
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"in0 rx_frames", in.RXFrames, 2},
		{"in0 ilm_hits", in.ILMHits, 1},
		{"in0 drops[no_ilm_entry]", in.Drops["no_ilm_entry"], 1},
		{"in0 drops[ttl_expired]", in.Drops["ttl_expired"], 0},
		{"out0 tx_frames", out.TXFrames, 1},
		{"label_switch forwarded", r.LabelSwitch.Forwarded, 1},
		{"label_switch swapped", r.LabelSwitch.Swapped, 1},
		{"tcp active_opens", r.TCP.ActiveOpens, 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("got %s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if r.Runtime.Goroutines <= 0 || r.Runtime.HeapObjectsBytes == 0 {
		t.Errorf("got runtime %+v, want goroutines and heap bytes > 0", r.Runtime)
	}

	// Unknown commands get an error line and change nothing.
	for _, req := range []string{"route add 5 via 1.2.3.4\n", "STATS\n", "\n", "stats now\n"} {
		got := ask(t, path, req)
		if !strings.HasPrefix(got, "error: ") {
			t.Errorf("request %q: got %q, want an error line", req, got)
		}
	}
	var again node.Report
	if err := json.Unmarshal([]byte(ask(t, path, "stats\n")), &again); err != nil {
		t.Fatal(err)
	}
	if again.LabelSwitch.Forwarded != 1 || again.Links[0].RXFrames != 2 {
		t.Errorf("got forwarded %d, rx %d after bad commands, want 1, 2 (unchanged)",
			again.LabelSwitch.Forwarded, again.Links[0].RXFrames)
	}
}

func TestControlSocketExisting(t *testing.T) {
	n := obsNode(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "c.sock")
	// A stale socket: bound, then the process "died" without unlinking.
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.ServeControl(ctx, n, path) }()
	var c net.Conn
	for range 100 {
		if c, err = net.Dial("unix", path); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("dial after stale socket: %v", err)
	}
	c.Close()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("got ServeControl error %v, want nil", err)
	}

	// A live socket (another node's) is not taken over.
	live := startControl(t, n)
	if err := node.ServeControl(context.Background(), n, live); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("got error %v for a live socket, want \"in use\"", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("live socket removed: %v", err)
	}

	// A regular file at the path is not removed.
	if err := os.WriteFile(path, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := node.ServeControl(context.Background(), n, path); err == nil {
		t.Errorf("got nil error with a regular file at the path, want an error")
	}
	if b, _ := os.ReadFile(path); string(b) != "keep" {
		t.Errorf("got file content %q, want it untouched", b)
	}
}
