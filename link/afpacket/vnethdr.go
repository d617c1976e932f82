//go:build linux

package afpacket

import (
	"github.com/mplsnode/mplsnode/internal/virtionet"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// virtioNetHdrLen is sizeof(struct virtio_net_hdr), the header before each
// frame on a PACKET_VNET_HDR socket (internal/virtionet).
const virtioNetHdrLen = virtionet.HdrLen

// hasGSO reports whether a packet of pkts may leave whole as a TCP GSO
// frame (virtionet.IsGSOFrame).
func hasGSO(pkts []*stack.PacketBuffer) bool {
	for _, p := range pkts {
		if isGSOFrame(p) {
			return true
		}
	}
	return false
}

// isGSOFrame reports whether pkt leaves as a TCP GSO frame for the
// virtio-net socket: virtionet.IsGSOFrame, the one statement of what may.
// A labelled GSO frame
// never may: the kernel drops one from user space unless it has
// CONFIG_NET_MPLS_GSO (TestKernelLabelledGSOOverVeth).
func isGSOFrame(pkt *stack.PacketBuffer) bool { return virtionet.IsGSOFrame(pkt) }

// putVirtioNetHdr fills h for pkt, a whole Ethernet frame: zero (a plain
// frame with its checksums done) unless isGSOFrame(pkt), whose segment
// size, header length and partial TCP checksum it then describes
// (virtionet.ForPacket).
func putVirtioNetHdr(h *[virtioNetHdrLen]byte, pkt *stack.PacketBuffer) {
	virtionet.ForPacket(pkt).Encode(h[:])
}
