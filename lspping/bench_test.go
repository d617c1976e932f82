package lspping_test

import (
	"testing"

	"github.com/mplsnode/mplsnode/lspping"
)

// BenchmarkIsRequest is the planes' check of a packet they would drop or
// deliver: it must not allocate.
func BenchmarkIsRequest(b *testing.B) {
	ip := lspping.BuildIP(&lspping.Packet{Src: src, Dst: dst127, SrcPort: 1, DstPort: lspping.Port, TTL: 1, RouterAlert: true, Payload: request().Marshal()})
	b.ReportAllocs()
	for b.Loop() {
		if !lspping.IsRequest(ip) {
			b.Fatal("not a request")
		}
	}
}

// BenchmarkRespond is the responder's work for one traceroute request
// at a multipath LSR (decode, validate, 32 destinations sorted by hop,
// encode).
func BenchmarkRespond(b *testing.B) {
	n := newNode(b)
	f, _ := lspping.PrefixFEC("ldp", request().FECs[0].Prefix)
	ds := lspping.NewDDMap(1500, lspping.AllRouters4, nil)
	mp := lspping.Bitmask(dst127, 32, func(int) bool { return true })
	ds.Multipath = &mp
	msg := req(f, &ds).Marshal()
	a := &lspping.Arrival{Where: lspping.TTLExpired, Labels: nil,
		IP: lspping.BuildIP(&lspping.Packet{Src: src, Dst: dst127, SrcPort: 1, DstPort: lspping.Port, TTL: 1, Payload: msg})}
	a.Labels = append(a.Labels, n.top(102))
	b.ReportAllocs()
	for b.Loop() {
		if rep, _ := lspping.Respond(msg, a, n); rep == nil {
			b.Fatal("no reply")
		}
	}
}
