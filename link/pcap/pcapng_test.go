package pcap_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/internal/testkit/tshark"
	"github.com/mplsnode/mplsnode/link/pcap"
	"github.com/mplsnode/mplsnode/mplstest"
)

// TestPcapngTshark records the same frame on two links (one sends it, the
// other receives it) to a pcapng Writer and has tshark read the file back:
// two interfaces with their names and MTUs, each frame on its own
// interface with its direction, timestamps to the nanosecond, snap length
// applied. Planted bugs: every frame on interface 0 (the names come out
// equal), or the IDB's if_tsresol left out (tshark then reads the
// timestamps as microseconds and the times are off by 1000x).
func TestPcapngTshark(t *testing.T) {
	tshark.Need(t)
	file := filepath.Join(t.TempDir(), "two.pcapng")
	w, err := pcap.Create(file, pcap.Options{NG: true, SnapLen: 200})
	if err != nil {
		t.Fatal(err)
	}
	sinkA, sinkB := mplstest.NewSink(1500, macA), mplstest.NewSink(9000, macB)
	epA := pcap.NewNamed(sinkA, w, "virt10")
	epB := pcap.NewNamed(sinkB, w, "virt12")
	var d nullDispatcher
	epA.Attach(&d)
	epB.Attach(&d)
	frame := labelledFrame(500)
	writeFrame(t, epA, frame)
	receiveFrame(sinkB, frame)
	ts := time.Unix(1700000000, 123456789)
	w.WriteFrameOn(1, pcap.DirInbound, ts, [][]byte{frame[:10], frame[10:]})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	checkDecoded(t, file, []string{
		"0;virt10;mplsnode link virt10, MTU 1500;0x00000002;558;200;100", // outbound
		"1;virt12;mplsnode link virt12, MTU 9000;0x00000001;558;200;100", // inbound
		"1;virt12;mplsnode link virt12, MTU 9000;0x00000001;558;200;100",
	}, "frame.interface_id", "frame.interface_name", "frame.interface_description",
		"frame.packet_flags_direction", "frame.len", "frame.cap_len", "mpls.label")
	times := tshark.Rows(t, file, "frame.time_epoch")
	if len(times) != 3 || times[2] != "1700000000.123456789" {
		t.Errorf("frame times %q; want the third 1700000000.123456789", times)
	}
}

// TestRotation writes 100 frames of 1058 bytes (1104 in pcapng) with
// FileSize 11000: as tcpdump -C does, a file takes frames until it is past
// the size, so each holds 10 (header + 9 frames = 10056 bytes, + 10 =
// 11160), and 10 files result, named f, f1 .. f9; with FileCount 3 (-W 3)
// only f0, f1, f2 remain, f0 holding the last 10 frames. Every file reads
// on its own in tshark with its interface. Planted bugs: the interfaces
// not written again at the top of a rotated file (tshark: "interface ID 0
// is not valid"), or the file count not wrapping (f3 .. f9 exist).
func TestRotation(t *testing.T) {
	tshark.Need(t)
	frame := labelledFrame(1000) // 1058 bytes
	for _, tc := range []struct {
		name  string
		count int
		files []string
	}{
		{"-C", 0, []string{"f", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9"}},
		{"-C -W 3", 3, []string{"f0", "f1", "f2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, err := pcap.Create(filepath.Join(dir, "f"), pcap.Options{NG: true, FileSize: 11000, FileCount: tc.count})
			if err != nil {
				t.Fatal(err)
			}
			id := w.AddInterface("virt01", 1500)
			for i := range 100 {
				w.WriteFrameOn(id, pcap.DirOutbound, time.Unix(1700000000, int64(i)), [][]byte{frame})
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			ents, _ := os.ReadDir(dir)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if strings.Join(names, " ") != strings.Join(sortedNames(tc.files), " ") {
				t.Fatalf("files %v, want %v", names, tc.files)
			}
			total := 0
			for _, f := range tc.files {
				rows := tshark.Fields(t, filepath.Join(dir, f), "frame.interface_name", "frame.time_epoch")
				if len(rows) != 10 || rows[0][0] != "virt01" {
					t.Errorf("%s: %d frames, first %v; want 10 frames on virt01", f, len(rows), rows)
				}
				if tc.count == 3 && f == "f0" && (len(rows) == 0 || rows[0][1] != "1700000000.000000090") {
					t.Errorf("f0 starts with %v; want the 91st frame, time 1700000000.000000090", rows)
				}
				total += len(rows)
			}
			if tc.count == 0 && total != 100 {
				t.Errorf("the files hold %d frames, want 100", total)
			}
			if w.Files() != 10 {
				t.Errorf("Files() = %d, want 10", w.Files())
			}
		})
	}
}

func sortedNames(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// BenchmarkWriteFrame records a 1514-byte frame per iteration in pcap and
// pcapng to a discarding writer: the capture path allocates nothing per
// frame.
func BenchmarkWriteFrame(b *testing.B) {
	frame := labelledFrame(1400)
	parts := [][]byte{frame[:14], frame[14:]}
	for _, ng := range []bool{false, true} {
		name := "pcap"
		if ng {
			name = "pcapng"
		}
		b.Run(name, func(b *testing.B) {
			w, err := pcap.NewWriterOptions(discard{}, pcap.Options{NG: ng})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			id := w.AddInterface("virt01", 1500)
			ts := time.Unix(1700000000, 0)
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				w.WriteFrameOn(id, pcap.DirOutbound, ts, parts)
			}
		})
	}
}

// discard is io.Discard without io.Closer or ReaderFrom shortcuts.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
