package mplsendpoint

import (
	"github.com/mplsnode/mplsnode/link/lowerlink"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// LowerGSOFrames reports whether the lower link sends a TCP GSO packet
// given to WriteRawFrames as one frame: a GSOFramer that says so
// (link/afpacket with Options.GSOFrames, through link/pcap too).
func (e *Endpoint) LowerGSOFrames() bool {
	g, ok := e.lower.(lowerlink.GSOFramer)
	return ok && g.GSOFrames()
}

// WriteRawFrames writes whole Ethernet frames (each packet's bytes,
// pkt.AsSlices(), are one frame with its link header) straight to the lower
// link, bypassing AddHeader, the labels and segmentation. It is the output of
// the node's label switch, which builds its frames itself. The frames are
// counted in Stats.TXFrames and those the lower link refuses as
// lower_write_error, as WritePackets counts its own. The caller keeps
// ownership of pkts. It returns the number of frames the lower link took.
func (e *Endpoint) WriteRawFrames(pkts stack.PacketBufferList) (int, tcpip.Error) {
	nFrames := pkts.Len()
	if nFrames == 0 {
		return 0, nil
	}
	n, err := e.lower.WritePackets(pkts)
	e.ctr.txFrames.Add(uint64(n))
	if err != nil {
		e.dropN(DropLowerWriteError, uint64(nFrames-n), -1, errString(err))
	}
	return n, err
}
