package gso_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/mplsnode/mplsnode/gso"
)

// writeCorpus turns the test binary into the seed corpus writer: with it,
// TestMain rewrites testdata/fuzz/FuzzSegment from seedPackets and exits
// without running a test. `go generate ./gso` does that (the directive
// below); there is no test that skips unless a flag is set.
//
//go:generate go test -run ^$ . -args -write-corpus
var writeCorpus = flag.Bool("write-corpus", false, "rewrite the seed files in testdata/fuzz/FuzzSegment and exit (go generate)")

func TestMain(m *testing.M) {
	flag.Parse()
	if *writeCorpus {
		if err := writeSeedCorpus(filepath.Join("testdata", "fuzz", "FuzzSegment")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// maxFuzzOutput bounds the output a fuzz input may ask for (MSS 1 on a large
// buffer multiplies the headers), so the fuzzer does not run out of memory.
const maxFuzzOutput = 1 << 24

// seedPackets are the real packets behind the seed corpus: what gVisor's
// host GSO hands over (partial checksum, timestamps) below 0 to 16 labels.
func seedPackets() map[string]gso.Packet {
	return map[string]gso.Packet{
		"ipv4-1label-ts-partial": build(spec{prefix: prefixN(1), tcpOpts: tsOpt, payload: payloadN(3000),
			flags: fACK | fPSH, seq: 1000, id: 7, csum: 1}),
		"ipv6-3labels-hbh-dstopts": build(spec{v6: true, prefix: prefixN(3), tcpOpts: tsOpt,
			exts:    []ext{{typ: 0, body: []byte{1, 4, 0, 0, 0, 0}}, {typ: 60, body: []byte{1, 4, 0, 0, 0, 0}}},
			payload: payloadN(2000), mss: 536, flags: fACK | fFIN | fCWR, seq: 0xffffff00, csum: 1}),
		"ipv4-options-noprefix-mss1": build(spec{ipOpts: []byte{0x94, 4, 0, 0}, payload: payloadN(20), mss: 1,
			flags: fACK | fPSH, id: 0xffff, csum: 2}),
		"ipv6-noprefix-small": build(spec{v6: true, payload: payloadN(100), flags: fACK | fPSH}),
		"ipv4-16labels": build(spec{prefix: prefixN(16), tcpOpts: tsOpt, payload: payloadN(1500), mss: 1000,
			flags: fACK, seq: 5}),
	}
}

// writeSeedCorpus writes one file per seed packet into dir, in the
// encoding go test's fuzzing reads (`go test fuzz v1`).
func writeSeedCorpus(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, p := range seedPackets() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\nint(%d)\nbyte(%s)\nint(%d)\nint(%d)\n",
			strconv.Quote(string(p.Buf)), p.PrefixLen, strconv.QuoteRune(rune(p.Proto)), p.L4Offset, p.MSS)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// FuzzSegment feeds arbitrary packets and parameters to Segment: accepted
// input must yield segments satisfying every invariant of checkSegments
// (sizes, prefix, headers, consecutive sequence numbers, flags, checksums
// verified by an independent implementation, payload concatenation equal to
// the input payload), and a Cutter must write the same bytes; rejected input must yield an *Error, never a panic.
func FuzzSegment(f *testing.F) {
	for _, p := range seedPackets() {
		f.Add(p.Buf, p.PrefixLen, uint8(p.Proto), p.L4Offset, p.MSS)
	}
	f.Add([]byte{}, 0, uint8(gso.ProtoIPv4), 0, 1)
	f.Add([]byte{0x45, 0, 0, 0}, 0, uint8(gso.ProtoIPv4), 20, 1448)
	f.Add(bytes.Repeat([]byte{0x60}, 60), 0, uint8(gso.ProtoIPv6), 40, 1448)
	f.Fuzz(func(t *testing.T, buf []byte, prefixLen int, proto uint8, l4Offset, mss int) {
		p := gso.Packet{Buf: buf, PrefixLen: prefixLen, Proto: gso.Proto(proto), L4Offset: l4Offset, MSS: mss}
		orig := bytes.Clone(buf)
		n, err := gso.SegmentedLen(p)
		if err != nil {
			var ge *gso.Error
			if !errors.As(err, &ge) {
				t.Fatalf("got error type %T (%v), want *gso.Error", err, err)
			}
			if c := gso.Count(p); c != 0 {
				t.Fatalf("Count = %d on a packet SegmentedLen rejects (%v), want 0", c, err)
			}
			if _, err2 := gso.Segment(p, make([]byte, 256), nil); !errors.Is(err2, ge.Err) {
				t.Fatalf("Segment error %v, SegmentedLen error %v: want the same reason", err2, err)
			}
			return
		}
		if n > maxFuzzOutput {
			t.Skipf("output of %d bytes is beyond the fuzzing budget", n)
		}
		segs, err := segment(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkSegments(p, segs); err != nil {
			t.Fatal(err)
		}
		if err := checkCutter(p); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, orig) {
			t.Fatal("Segment modified the input buffer")
		}
	})
}
