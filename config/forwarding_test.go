package config_test

import (
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/config"
)

// TestForwardingRule holds the one rule of whether a node forwards: IP
// transit with more than one link or a forwarding sysctl, label transit
// with a label route that carries packets on.
func TestForwardingRule(t *testing.T) {
	const one = "link add eth0 type afpacket\naddr add 10.0.0.1/24 dev eth0\n"
	const two = one + "link add eth1 type afpacket\naddr add 10.0.1.1/24 dev eth1\n"
	for _, tc := range []struct {
		name               string
		src                string
		ip, labels, anyFwd bool
	}{
		{"one link host", one, false, false, false},
		{"two links", two, true, false, true},
		{"ipv4 sysctl", one + "sysctl net.ipv4.ip_forward=1\n", true, false, true},
		{"ipv6 sysctl", one + "sysctl net.ipv6.conf.all.forwarding=1\n", true, false, true},
		{"local pop only", one + "-f mpls route add 100 dev lo\n", false, false, false},
		{"label swap", one + "-f mpls route add 100 as 200 via inet 10.0.0.2 dev eth0\n", false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse("t.conf", strings.NewReader(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.ForwardsIP(); got != tc.ip {
				t.Errorf("ForwardsIP = %v, want %v", got, tc.ip)
			}
			if got := cfg.SwitchesLabels(); got != tc.labels {
				t.Errorf("SwitchesLabels = %v, want %v", got, tc.labels)
			}
			if got := cfg.IsForwardingNode(); got != tc.anyFwd {
				t.Errorf("IsForwardingNode = %v, want %v", got, tc.anyFwd)
			}
		})
	}
}
