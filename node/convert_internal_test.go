package node

import (
	"strings"
	"testing"
	"time"

	"github.com/mplsnode/mplsnode/config"
)

// TestDefaultBusyPoll converts configs and reads each afpacket link's
// busy-poll as the stack gets it: a node that forwards (two links, or
// ip_forward on) busy-polls adaptively for config.DefaultBusyPoll where
// the link does not say, a host not at all; `busy-poll N` (0 included)
// and `mode mmsg` override the default. Planted bugs it caught: the
// default deleted from convert (the forwarding cases read 0); the default
// applied without checking BusyPollSet (`busy-poll 0` read 50us adaptive).
func TestDefaultBusyPoll(t *testing.T) {
	type want struct {
		poll     time.Duration
		adaptive bool
	}
	def := want{config.DefaultBusyPoll, true}
	for _, c := range []struct {
		name, conf string
		want       []want
	}{
		{"host", "link add v0 type afpacket\naddr add 10.0.0.1/24 dev v0\n", []want{{}}},
		{"host forwarding", "link add v0 type afpacket\naddr add 10.0.0.1/24 dev v0\nsysctl -w net.ipv4.ip_forward=1\n", []want{def}},
		{"lsr", "link add v0 type afpacket\nlink add v1 type afpacket\n", []want{def, def}},
		{"lsr busy-poll 0", "link add v0 type afpacket busy-poll 0\nlink add v1 type afpacket\n", []want{{}, def}},
		{"lsr busy-poll 20", "link add v0 type afpacket busy-poll 20\nlink add v1 type afpacket mode ring\n", []want{{20 * time.Microsecond, false}, def}},
		{"lsr mmsg", "link add v0 type afpacket mode mmsg\nlink add v1 type afpacket\n", []want{{}, def}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := config.Parse("node.conf", strings.NewReader(c.conf))
			if err != nil {
				t.Fatal(err)
			}
			cv, err := convert(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(cv.links) != len(c.want) {
				t.Fatalf("%d links, want %d", len(cv.links), len(c.want))
			}
			for i, l := range cv.links {
				if got := (want{l.BusyPoll, l.BusyPollAdaptive}); got != c.want[i] {
					t.Errorf("link %s: busy-poll %v adaptive %v, want %v adaptive %v", l.Name, got.poll, got.adaptive, c.want[i].poll, c.want[i].adaptive)
				}
			}
		})
	}
}
