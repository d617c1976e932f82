package config_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/config"
)

const bgpPrelude = "bgp as 65001 router-id 172.16.20.20\n"

// TestBGPParse parses the example and checks every value.
func TestBGPParse(t *testing.T) {
	src := bgpPrelude + `bgp neighbor 172.16.20.21 remote-as 65002 family ipv4-labeled-unicast ipv6-labeled-unicast
bgp neighbor 2001:db8:1::2 remote-as 65001 next-hop-self hold-time 9
bgp label-range 16000 23999
bgp network 10.10.10.10/32
bgp network 10.20.0.0/16 label explicit-null
bgp network 10.30.0.0/16 label implicit-null
bgp network 2001:db8:9::/48 label 100
`
	cfg, err := config.Parse("node.conf", strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.BGP
	if b == nil || b.AS != 65001 || b.RouterID.String() != "172.16.20.20" || b.LabelLow != 16000 || b.LabelHigh != 23999 {
		t.Fatalf("got %+v", b)
	}
	if len(b.Neighbors) != 2 || b.Neighbors[0].RemoteAS != 65002 || len(b.Neighbors[0].Families) != 2 ||
		!b.Neighbors[1].NextHopSelf || b.Neighbors[1].HoldTime != 9 || b.Neighbors[1].Families != nil {
		t.Errorf("neighbors %+v", b.Neighbors)
	}
	modes := []config.BGPLabelMode{config.BGPLabelFromRange, config.BGPLabelExplicitNull, config.BGPLabelImplicitNull, config.BGPLabelFixed}
	for i, n := range b.Networks {
		if n.Mode != modes[i] {
			t.Errorf("network %s mode %d, want %d", n.Prefix, n.Mode, modes[i])
		}
	}
	if b.Networks[3].Label != 100 {
		t.Errorf("fixed label %d", b.Networks[3].Label)
	}
	// Format gives a file that parses to the same values.
	again, err := config.Parse("again.conf", strings.NewReader(cfg.Format()))
	if err != nil {
		t.Fatalf("%v\n%s", err, cfg.Format())
	}
	if again.Format() != cfg.Format() {
		t.Errorf("Format is not stable:\n%s\n%s", cfg.Format(), again.Format())
	}
}

// TestBGPErrors: each bad line gives one error at the offending token,
// whose column the test finds with strings.Index, not the package's lexer.
func TestBGPErrors(t *testing.T) {
	cases := []struct {
		line, tok, msg string
		pre            bool
	}{
		{"bgp router-id 172.16.20.20 as 0", "0", "bad AS number \"0\"", false},
		{"bgp as 65001 router-id 2001:db8::1", "2001:db8::1", "must be a non-zero IPv4 address", false},
		{"bgp neighbr 172.16.20.21", "neighbr", "did you mean \"neighbor\"", true},
		{"bgp neighbor 172.16.20.21 family ipv4-labeled-unicast", "", "missing remote-as N in bgp neighbor 172.16.20.21", true},
		{"bgp neighbor 172.16.20.21 remote-as 65002 family ipv4-unicast", "ipv4-unicast", "unknown family \"ipv4-unicast\"", true},
		{"bgp neighbor 172.16.20.21 remote-as 65002 hold-time 2", "2", "hold time 2 is below 3 seconds", true},
		{"bgp neighbor 172.16.20.21 remote-as 65002 family ipv4-labeled-unicast ipv4-labeled-unicast", "ipv4-labeled-unicast", "family ipv4-labeled-unicast given twice", true},
		{"bgp label-range 24000 16000", "16000", "label range 24000 16000 is empty", true},
		{"bgp label-range 3 100", "3", "bad first label of the range \"3\"", true},
		{"bgp network 10.20.0.1/16", "10.20.0.1/16", "host bits set", true},
		{"bgp network 10.20.0.0/16 label 3", "3", "bad label \"3\"", true},
		{"bgp network 10.20.0.0/16 label 16001", "16001", "inside the bgp label-range 16000-23999", true},
		{"-f mpls route add 16001 dev lo", "16001", "inside the bgp label-range", true},
		{"ip bgp as 1", "bgp", "is not an ip subcommand", false},
	}
	for _, tc := range cases {
		t.Run(tc.line, func(t *testing.T) {
			src, line := tc.line+"\n", 1
			if tc.pre {
				src, line = bgpPrelude+src, 2
			}
			_, err := config.Parse("node.conf", strings.NewReader(src))
			var list config.ErrorList
			if !errors.As(err, &list) || len(list) != 1 {
				t.Fatalf("got %v, want one error", err)
			}
			col := len(tc.line) + 1 // just past the last word
			if tc.tok != "" {
				col = strings.LastIndex(tc.line, " "+tc.tok) + 2
				if strings.HasPrefix(tc.line, tc.tok) {
					col = 1
				}
			}
			e := list[0]
			if got, want := fmt.Sprintf("%d:%d", e.Line, e.Col), fmt.Sprintf("%d:%d", line, col); got != want {
				t.Errorf("position %s, want %s (%v)", got, want, e)
			}
			if !strings.Contains(e.Msg, tc.msg) {
				t.Errorf("message %q, want it to contain %q", e.Msg, tc.msg)
			}
		})
	}
}
