// Package labelstats owns the per-label traffic counters of the userspace
// forwarding plane: packets and bytes per incoming label, as
// `mplsnode -f mpls route show -s` and the mplsnode_label_*_total metrics
// report them (summed with the XDP program's, forward/xdp LabelStats).
//
// A frame is counted once, under the label whose ILM entry decided it (the
// label the drop counters name it by, verdict.Walked.Label): the first
// label that swaps or pops and forwards, or, for a frame whose every label
// is popped for the node, the bottom one. Its bytes are the labelled
// packet as received, from the label stack on (the frame less its Ethernet
// header), as Linux counts MPLS bytes. Frames dropped are not counted
// here: the drop counters name them by reason.
//
// The counters live apart from the ILM, keyed by the label's value, so a
// table replaced (reload, BGP, route add) keeps the counts of the labels
// it keeps, and a label deleted and bound again counts on (counters only
// grow). The package is pure: it imports no gVisor and does no I/O.
package labelstats

import (
	"sync/atomic"

	"github.com/mplsnode/mplsnode/mpls"
)

// chunkBits is the log2 of the labels of one lazily allocated chunk: 1024
// labels of 16 bytes (16 KiB), so a table's fixed part is 1024 pointers
// (8 KiB) however the labels spread over the 20-bit space.
const chunkBits = 10

const (
	chunkLen = 1 << chunkBits
	nChunks  = (mpls.MaxLabel + 1) >> chunkBits
)

type counter struct {
	packets atomic.Uint64
	bytes   atomic.Uint64
}

type chunk [chunkLen]counter

// Table counts packets and bytes per label. The zero value is ready to
// use; Add is lock-free and allocates only the first time a label of a
// chunk of 1024 is counted. A Table must not be copied after first use.
type Table struct {
	chunks [nChunks]atomic.Pointer[chunk]
}

// Count is what a Table holds for one label.
type Count struct {
	// Packets is the number of packets counted (a GSO packet counts as
	// its segments).
	Packets uint64 `json:"packets"`
	// Bytes is their length from the label stack on.
	Bytes uint64 `json:"bytes"`
}

// Add counts packets packets of bytes bytes in all under label l. A value
// above mpls.MaxLabel is not a label and is ignored.
func (t *Table) Add(l mpls.Label, packets, bytes uint64) {
	if l > mpls.MaxLabel {
		return
	}
	p := &t.chunks[l>>chunkBits]
	c := p.Load()
	if c == nil {
		c = new(chunk)
		if !p.CompareAndSwap(nil, c) {
			c = p.Load()
		}
	}
	e := &c[l&(chunkLen-1)]
	e.packets.Add(packets)
	e.bytes.Add(bytes)
}

// Load returns l's counts.
func (t *Table) Load(l mpls.Label) Count {
	if l > mpls.MaxLabel {
		return Count{}
	}
	c := t.chunks[l>>chunkBits].Load()
	if c == nil {
		return Count{}
	}
	e := &c[l&(chunkLen-1)]
	return Count{Packets: e.packets.Load(), Bytes: e.bytes.Load()}
}

// AddTo adds every label's non-zero counts to s (which it creates when
// nil) and returns s.
func (t *Table) AddTo(s Snapshot) Snapshot {
	if s == nil {
		s = Snapshot{}
	}
	for i := range t.chunks {
		c := t.chunks[i].Load()
		if c == nil {
			continue
		}
		for j := range c {
			n := Count{Packets: c[j].packets.Load(), Bytes: c[j].bytes.Load()}
			if n != (Count{}) {
				s.Add(mpls.Label(i<<chunkBits|j), n)
			}
		}
	}
	return s
}

// Snapshot is a copy of counts by label, for reading and summing (the
// Tables of the switch and the links, the XDP program's map).
type Snapshot map[mpls.Label]Count

// Add adds n to l's counts in s.
func (s Snapshot) Add(l mpls.Label, n Count) {
	c := s[l]
	c.Packets += n.Packets
	c.Bytes += n.Bytes
	s[l] = c
}
