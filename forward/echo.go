package forward

import (
	"github.com/mplsnode/mplsnode/forward/verdict"
	"github.com/mplsnode/mplsnode/link/mplsendpoint"
	"github.com/mplsnode/mplsnode/lspping"
	"github.com/mplsnode/mplsnode/mpls"
	gstack "gvisor.dev/gvisor/pkg/tcpip/stack"
)

// echoHolder boxes an mplsendpoint.EchoHandler for an atomic.Pointer.
type echoHolder struct{ h mplsendpoint.EchoHandler }

// SetEchoHandler sets the handler of the MPLS echo requests (RFC 8029)
// whose label TTL runs out at this node: they go to it instead of an
// ICMP time exceeded (nil: none, the ICMP error is sent).
func (ls *Switch) SetEchoHandler(h mplsendpoint.EchoHandler) {
	if h == nil {
		ls.echo.Store(nil)
		return
	}
	ls.echo.Store(&echoHolder{h})
}

// echoExpired hands a labelled frame whose TTL ran out (pkt, off bytes
// of Ethernet header before what v's offsets count from; head its first
// bytes, contiguous) to the echo handler if it carries an echo request,
// and reports whether it did.
func (ls *Switch) echoExpired(in *mplsendpoint.Endpoint, pkt *gstack.PacketBuffer, head []byte, off int, v *verdict.Verdict) bool {
	eh := ls.echo.Load()
	if eh == nil || v.Reason != verdict.TTLExpired || v.StackEnd == 0 || off+v.QuoteOff > len(head) ||
		!lspping.IsRequest(head[off+v.QuoteOff:]) {
		return false
	}
	data := pkt.Data()
	b, ok := data.PullUp(min(data.Size(), off+v.QuoteOff+maxEchoLen))
	if !ok || len(b) < off+v.QuoteOff {
		return false
	}
	var buf [mpls.DefaultMaxDepth]mpls.Entry
	labels, _, err := mpls.ParseStack(b[off:off+v.StackEnd], 0, buf[:0])
	if err != nil {
		return false
	}
	eh.h.Echo(in, &mplsendpoint.EchoRequest{Where: lspping.TTLExpired, Labels: labels, IP: b[off+v.QuoteOff:]})
	return true
}

// maxEchoLen bounds the bytes of a request handed to the handler.
const maxEchoLen = 9216
