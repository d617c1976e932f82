package mplsendpoint_test

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// TestPushMaxLabelDepth pushes label stacks of exactly the endpoint's
// maximum depth and of one entry more. Options.MaxLabels is "the deepest
// label stack the endpoint pushes or parses"; 0 means 16
// (docs/CONTRACTS.md: "0 = 16"). A stack of exactly that depth must leave
// as one frame with every label, S on the last only (RFC 3032 §2.1),
// decoded by tshark; one entry more is dropped as label_stack_too_deep
// with nothing written. (The FIB itself refuses more than 16 labels, so
// the "one more" cases use a smaller MaxLabels.)
//
// Guards mutant w05: with pushHeader's `if n > e.maxLabels {` changed to
// `if n >= e.maxLabels {` (a stack of exactly the maximum depth taken as
// too deep), "max=16/push=16" fails with "got 0 frames, want 1;
// label_stack_too_deep=1". Before this test that bug was caught only by
// TestTransferMatrix's labels=16 cases hanging until the package timeout;
// their transfer now fails within seconds (transfer's stall watchdog).
func TestPushMaxLabelDepth(t *testing.T) {
	cases := []struct {
		maxLabels int // Options.MaxLabels
		push      int
		ok        bool
	}{
		{0, 16, true}, // the default maximum, 16
		{0, 15, true},
		{4, 4, true},
		{4, 5, false},
		{1, 1, true},
		{1, 2, false},
		{16, 16, true},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("max=%d/push=%d", c.maxLabels, c.push), func(t *testing.T) {
			labels := labelStack(c.push)
			tables := routeTables(t, hostRoutes(labels, netip.Addr{}, pushDst4))
			opts := mplsendpoint.Options{MaxLabels: c.maxLabels, Tables: tables, Logger: slog.New(slog.DiscardHandler)}
			sink := mplstest.NewSink(1500, macA)
			sink.Record = true
			ep, err := mplsendpoint.New(sink, opts)
			if err != nil {
				t.Fatal(err)
			}
			ep.Attach(newRecorder())
			writeTCP(ep, pushSegment(false, 64, []byte("depth")), stack.GSO{})
			frames := sink.Frames()
			st := ep.Stats()
			tooDeep := st.Drop(mplsendpoint.DropLabelStackTooDeep)
			_, named := dropsNamed(&st)
			if !c.ok {
				if len(frames) != 0 || tooDeep != 1 {
					t.Fatalf("got %d frames, drops %v; want none written and label_stack_too_deep=1", len(frames), named)
				}
				return
			}
			if len(frames) != 1 || tooDeep != 0 {
				t.Fatalf("got %d frames, want 1; drops %v", len(frames), named)
			}
			f := frames[0]
			if typ := uint16(f[12])<<8 | uint16(f[13]); typ != 0x8847 {
				t.Fatalf("ethertype %#04x, want 0x8847", typ)
			}
			var ls, bos, ttls []string
			for i, l := range labels {
				e := f[14+4*i : 18+4*i]
				if got := mpls.Label(uint32(e[0])<<12 | uint32(e[1])<<4 | uint32(e[2])>>4); got != l {
					t.Errorf("entry %d: label %d, want %d", i, got, l)
				}
				if s := e[2]&1 == 1; s != (i == len(labels)-1) {
					t.Errorf("entry %d: S %v, want it on the last entry only", i, s)
				}
				ls = append(ls, fmt.Sprint(l))
				bos = append(bos, map[bool]string{false: "0", true: "1"}[i == len(labels)-1])
				ttls = append(ttls, "64")
			}
			// The IP header right after the stack: tshark finds it and
			// its checksum good only if the stack has the length it says.
			checkWithTshark(t, linkTypeEthernet, frames, []string{"mpls.label", "mpls.bottom", "mpls.ttl", "ip.dst", "ip.checksum.status"},
				[]string{strings.Join(ls, ",") + "\t" + strings.Join(bos, ",") + "\t" + strings.Join(ttls, ",") + "\t" + pushDst4.String() + "\t1"})
		})
	}
}
