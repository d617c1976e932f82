package bgp

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"
)

// TestAliasHandler: GoBGP's records name a neighbour by its loopback
// alias, as an attribute of the record or of the logger; both reach the
// log as the neighbour's address. Planting "Handle passes r on as it is"
// fails the first line; "WithAttrs passes as on" the second.
func TestAliasHandler(t *testing.T) {
	var b strings.Builder
	nbs := []Neighbor{{Address: netip.MustParseAddr("172.16.20.21")}, {Address: netip.MustParseAddr("2001:db8::21")}}
	log := slog.New(newAliasHandler(slog.NewTextHandler(&b, nil), nbs))
	log.Warn("peer down", "Key", loopbackAlias(0).String(), "Topic", "Peer")
	log.With(slog.String("Key", loopbackAlias(1).String())).Warn("fsm", slog.Group("g", "Neighbor", loopbackAlias(0)))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "Key=172.16.20.21 Topic=Peer") ||
		!strings.Contains(lines[1], "Key=2001:db8::21") || !strings.Contains(lines[1], "g.Neighbor=172.16.20.21") {
		t.Errorf("log:\n%s", b.String())
	}
	if strings.Contains(b.String(), "127.100.") {
		t.Errorf("an alias reached the log:\n%s", b.String())
	}
}
