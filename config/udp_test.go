package config_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/config"
)

func TestParseUDPLink(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"ports default", "link add mu0 type udp local 172.16.20.20 remote 172.16.20.21",
			"link add mu0 type udp local 172.16.20.20:6635 remote 172.16.20.21:6635"},
		{"ipv6", "link add mu0 type udp remote [2001:db8::21]:16635 local 2001:db8::20 mtu 9000",
			"link add mu0 type udp mtu 9000 local [2001:db8::20]:6635 remote [2001:db8::21]:16635"},
		{"all words", "link add mu0 type udp local 172.16.20.20:6635 remote 172.16.20.21:6635 source-ports 50000-50063 flows 64 checksum zero ttl 32 dscp 46 gso off gro off",
			"link add mu0 type udp local 172.16.20.20:6635 remote 172.16.20.21:6635 source-ports 50000-50063 flows 64 checksum zero ttl 32 dscp 46 gso off gro off"},
		{"defaults written", "link add mu0 type udp local 172.16.20.20 remote 172.16.20.21 checksum compute gso on gro on",
			"link add mu0 type udp local 172.16.20.20:6635 remote 172.16.20.21:6635"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse("node.conf", strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Links[0].String(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			again, err := config.Parse("again.conf", strings.NewReader(cfg.Links[0].String()))
			if err != nil {
				t.Fatal(err)
			}
			if again.Links[0].UDP.Local != cfg.Links[0].UDP.Local || again.Links[0].String() != tc.want {
				t.Errorf("reparse differs: %s", again.Links[0].String())
			}
		})
	}
	cfg, err := config.Parse("node.conf", strings.NewReader("link add mu0 type udp local 172.16.20.20:7000 remote 172.16.20.21 ttl 9 dscp 10\n"))
	if err != nil {
		t.Fatal(err)
	}
	u := cfg.Links[0].UDP
	if u.Local != netip.MustParseAddrPort("172.16.20.20:7000") || u.Remote != netip.MustParseAddrPort("172.16.20.21:6635") || u.TTL != 9 || u.DSCP != 10 {
		t.Errorf("got %+v", u)
	}
}

// udpErrorCases: columns computed by Python's str.find on the intended
// token when the table was written.
var udpErrorCases = []struct {
	name, in string
	col      int
	tok, msg string
}{
	{"no remote", "link add mu0 type udp local 172.16.20.20", 41, "", "a udp link needs local ADDR[:PORT] and remote ADDR[:PORT]"},
	{"families", "link add mu0 type udp local 172.16.20.20 remote 2001:db8::21", 49, "2001:db8::21", "is not of local 172.16.20.20's family"},
	{"zero checksum v6", "link add mu0 type udp local [2001:db8::20]:6635 remote [2001:db8::21]:6635 checksum zero", 56, "[2001:db8::21]:6635", "checksum zero is for IPv4 only"},
	{"mtu small", "link add mu0 type udp local 172.16.20.20 remote 172.16.20.21 mtu 1000", 66, "1000", "a udp link's mtu is the outer IP packet: 1280..65535"},
	{"udp word on afpacket", "link add virt9 type afpacket remote 172.16.20.21", 30, "remote", "remote applies only to type udp"},
	{"port 0", "link add mu0 type udp local 172.16.20.20:0 remote 172.16.20.21", 29, "172.16.20.20:0", "port 0"},
	{"bad address", "link add mu0 type udp local 172.16.20.300:6635 remote 172.16.20.21", 29, "172.16.20.300:6635", "expected ADDRESS:PORT"},
	{"remote multicast", "link add mu0 type udp local 172.16.20.20 remote 224.0.0.1", 49, "224.0.0.1", "not a unicast address"},
	{"source ports reversed", "link add mu0 type udp local 172.16.20.20 remote 172.16.20.21 source-ports 50000-40000", 75, "50000-40000", "bad source port range"},
	{"source ports few", "link add mu0 type udp local 172.16.20.20 remote 172.16.20.21 source-ports 50000-50003", 86, "", "holds 4 ports, fewer than the link's 16 flows"},
	{"checksum word", "link add mu0 type udp local 172.16.20.20 remote 172.16.20.21 checksum none", 71, "none", "unknown checksum \"none\""},
	{"dscp", "link add mu0 type udp local 172.16.20.20 remote 172.16.20.21 dscp 64", 67, "64", "bad outer dscp \"64\""},
	{"same local", "link add mu0 type udp local 172.16.20.20 remote 172.16.20.21\nlink add mu1 type udp local 172.16.20.20:6635 remote 172.16.20.22", 29, "172.16.20.20:6635", "udp link mu0 already receives on 172.16.20.20:6635"},
}

func TestParseUDPLinkErrors(t *testing.T) {
	for _, tc := range udpErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("node.conf", strings.NewReader(tc.in))
			var list config.ErrorList
			if !errors.As(err, &list) || len(list) != 1 {
				t.Fatalf("got %v, want one config error", err)
			}
			e := list[0]
			line := strings.Count(tc.in, "\n") + 1
			if got, want := fmt.Sprintf("%d:%d", e.Line, e.Col), fmt.Sprintf("%d:%d", line, tc.col); got != want {
				t.Errorf("got position %s, want %s (%v)", got, want, e)
			}
			if e.Token != tc.tok {
				t.Errorf("got token %q, want %q (%v)", e.Token, tc.tok, e)
			}
			if !strings.Contains(e.Msg, tc.msg) {
				t.Errorf("got message %q, want it to contain %q", e.Msg, tc.msg)
			}
		})
	}
}
