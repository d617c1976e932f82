package node

import (
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/config"
)

// TestXDPModeDefault reads the XDP plane's mode as the node gets it from
// config: without a `set forward xdp` line, auto on every node that
// forwards (two links, a forwarding sysctl, a label route that carries
// packets on) and off on a host; a written line wins and is not a
// default.
func TestXDPModeDefault(t *testing.T) {
	const one = "link add v0 type afpacket\naddr add 10.0.0.1/24 dev v0\n"
	for _, c := range []struct {
		name, conf string
		mode       config.XDPMode
		dflt       bool
	}{
		{"host", one, config.XDPOff, true},
		{"host with a local pop", one + "-f mpls route add 100 dev lo\n", config.XDPOff, true},
		{"two links", one + "link add v1 type afpacket\n", config.XDPAuto, true},
		{"ip_forward", one + "sysctl -w net.ipv4.ip_forward=1\n", config.XDPAuto, true},
		{"label swap", one + "-f mpls route add 100 as 200 via inet 10.0.0.2 dev v0\n", config.XDPAuto, true},
		{"written off", one + "link add v1 type afpacket\nset forward xdp off\n", config.XDPOff, false},
		{"written on", one + "set forward xdp on\n", config.XDPOn, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := config.Parse("t.conf", strings.NewReader(c.conf))
			if err != nil {
				t.Fatal(err)
			}
			mode, dflt := xdpMode(cfg)
			if mode != c.mode || dflt != c.dflt {
				t.Errorf("xdpMode = %v, %v; want %v, %v", mode, dflt, c.mode, c.dflt)
			}
		})
	}
}
