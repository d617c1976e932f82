package pcap_test

import (
	"bytes"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/mplsnode/mplsnode/internal/testkit/pcaptest"
	"github.com/mplsnode/mplsnode/internal/testkit/tshark"
	"github.com/mplsnode/mplsnode/link/pcap"
	"github.com/mplsnode/mplsnode/mplstest"
)

var (
	macA = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0a")
	macB = tcpip.LinkAddress("\x02\x00\x00\x00\x00\x0b")
)

// tcp is a segment from 10.0.0.1:1000 to 10.0.0.2:2000 with size bytes of
// payload.
func tcp(size int) mplstest.TCP {
	return mplstest.TCP{
		Src:     netip.MustParseAddrPort("10.0.0.1:1000"),
		Dst:     netip.MustParseAddrPort("10.0.0.2:2000"),
		Payload: bytes.Repeat([]byte{0x5a}, size),
	}
}

// labelledFrame is an Ethernet frame carrying label 100 (TTL 64) over an
// IPv4/TCP segment with size bytes of payload.
func labelledFrame(size int) []byte {
	ip := mplstest.IPv4TCP(tcp(size))
	return mplstest.Frame{Dst: macB, Src: macA, Labels: mplstest.Stack(64, 100), Payload: ip}.Bytes()
}

// joinRows joins each row's fields with ";" for comparison.
func joinRows(rows [][]string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = strings.Join(r, ";")
	}
	return out
}

// checkDecoded checks tshark's decode of file, the given fields of each
// frame joined with ";", against want, a row a frame.
func checkDecoded(t *testing.T, file string, want []string, fields ...string) {
	t.Helper()
	got := joinRows(tshark.Fields(t, file, fields...))
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("tshark decoded\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// writeFrame writes frame through ep as one packet.
func writeFrame(t *testing.T, ep stack.LinkEndpoint, frame []byte) {
	t.Helper()
	var pkts stack.PacketBufferList
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	pkts.PushBack(pkt)
	if n, err := ep.WritePackets(pkts); n != 1 || err != nil {
		t.Fatalf("WritePackets = %d, %v", n, err)
	}
	pkt.DecRef()
}

// receiveFrame has sink deliver frame up, as a received one.
func receiveFrame(sink *mplstest.Sink, frame []byte) {
	rx := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(frame)})
	sink.InjectInbound(0, rx)
	rx.DecRef()
}

// TestWriterTshark checks the file against tshark's reader (not ours):
// Ethernet link type, nanosecond timestamps, lengths, truncation.
func TestWriterTshark(t *testing.T) {
	tshark.Need(t)
	file := filepath.Join(t.TempDir(), "w.pcap")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pcap.NewWriter(f, 100)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1700000000, 123456789)
	small, big := labelledFrame(10), labelledFrame(500)
	w.WriteFrame(ts, [][]byte{small[:14], small[14:]})
	w.WriteFrame(ts.Add(time.Nanosecond), [][]byte{big})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := w.Frames(); got != 2 {
		t.Errorf("Frames() = %d, want 2", got)
	}
	checkDecoded(t, file, []string{
		"1700000000.123456789;68;68;0x8847;100;10",
		"1700000000.123456790;558;100;0x8847;100;500",
	}, "frame.time_epoch", "frame.len", "frame.cap_len", "eth.type", "mpls.label", "tcp.len")
	info, err := exec.Command("capinfos", "-M", "-E", "-i", file).CombinedOutput()
	if err == nil && !strings.Contains(string(info), "encapsulation:  ether") {
		t.Errorf("capinfos: %s; want encapsulation ether", info)
	}
}

// failWriter fails every write after the first n bytes.
type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return 0, os.ErrClosed
	}
	f.n -= len(p)
	return len(p), nil
}

// TestWriterError checks that a failing file stops the capture, counts what
// it could not record, and reports the error.
func TestWriterError(t *testing.T) {
	w, err := pcap.NewWriter(&failWriter{n: 24}, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := labelledFrame(100000) // larger than the buffer: the write reaches the file
	w.WriteFrame(time.Now(), [][]byte{f})
	w.WriteFrame(time.Now(), [][]byte{f})
	if w.Err() == nil || w.Dropped() != 2 || w.Frames() != 0 {
		t.Errorf("Err %v Dropped %d Frames %d; want an error, 2, 0", w.Err(), w.Dropped(), w.Frames())
	}
	if err := w.Close(); err == nil {
		t.Error("Close returned nil after a write error")
	}
	if _, err := pcap.NewWriter(&failWriter{}, 0); err == nil {
		t.Error("NewWriter on a failing writer: no error")
	}
	if _, err := pcap.NewWriter(&bytes.Buffer{}, -1); err == nil {
		t.Error("NewWriter with a negative snap length: no error")
	}
}

// nullDispatcher counts delivered packets.
type nullDispatcher struct {
	mu sync.Mutex
	n  int
}

func (d *nullDispatcher) DeliverNetworkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {
	d.mu.Lock()
	d.n++
	d.mu.Unlock()
}
func (d *nullDispatcher) DeliverLinkPacket(tcpip.NetworkProtocolNumber, *stack.PacketBuffer) {}

// TestEndpointTshark sends and receives labelled frames through the capture
// endpoint and has tshark decode the file: both directions recorded, in
// order, labels visible, frames passed on unchanged.
func TestEndpointTshark(t *testing.T) {
	file, w := pcaptest.File(t, "cap.pcap", pcap.Options{})
	sink := mplstest.NewSink(1500, macA)
	sink.Record = true
	ep := pcap.New(sink, w)
	var d nullDispatcher
	ep.Attach(&d)

	out := labelledFrame(1000)
	writeFrame(t, ep, out)
	receiveFrame(sink, mplstest.Frame{Dst: macA, Src: macB, Labels: mplstest.Stack(7, 200, 300), Payload: mplstest.IPv4TCP(tcp(0))}.Bytes())
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := sink.Frames(); len(got) != 1 || !bytes.Equal(got[0], out) {
		t.Errorf("lower link got %d frames (first equal: %v); want the frame unchanged", len(got), len(got) == 1 && bytes.Equal(got[0], out))
	}
	if d.n != 1 {
		t.Errorf("dispatcher got %d packets, want 1", d.n)
	}

	checkDecoded(t, file, []string{
		"1058;02:00:00:00:00:0a;100;1;64;1000",
		"62;02:00:00:00:00:0b;200,300;0,1;7,7;0",
	}, "frame.len", "eth.src", "mpls.label", "mpls.bottom", "mpls.ttl", "tcp.len")
}
