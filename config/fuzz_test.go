package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mplsnode/mplsnode/config"
)

// FuzzParse: Parse never panics; every error carries a position inside the
// input (a real line, a column at most one past its end) and a token that is
// what the file holds there; a parsed config formats to text that parses to
// the same canonical form.
func FuzzParse(f *testing.F) {
	for _, c := range errorCases {
		f.Add(prelude + c.in)
	}
	f.Add(prelude + "-f mpls route add 100 nexthop as 200 via inet 172.16.21.22 dev virt12 nexthop via 172.16.20.21 weight 3\n")
	f.Add(prelude + "route add 10.9.0.0/16 nexthop via 172.16.20.21 weight 1 nexthop via 172.16.20.22 proto static metric 1 scope link\n" +
		"-f mpls route add 101 as to 200 via inet 172.16.20.21 proto bgp\n")
	files, _ := filepath.Glob("testdata/*.conf")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, src string) {
		cfg, err := config.Parse("f.conf", strings.NewReader(src))
		if err != nil {
			if cfg != nil {
				t.Fatalf("got a config and an error %v", err)
			}
			var list config.ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("got error %v (%T), want a non-empty config.ErrorList", err, err)
			}
			if len(list) > config.MaxErrors+1 {
				t.Fatalf("got %d errors, want at most %d", len(list), config.MaxErrors+1)
			}
			lines := strings.Split(src, "\n")
			for _, e := range list {
				if e.File != "f.conf" || e.Line < 1 || e.Line > len(lines) {
					t.Fatalf("error %v: position outside the %d lines", e, len(lines))
				}
				line := lines[e.Line-1]
				if e.Col < 1 || e.Col > len(line)+1 {
					t.Fatalf("error %v: column outside line %q", e, line)
				}
				if e.Token != "" && !strings.HasPrefix(line[e.Col-1:], e.Token) && e.Msg != "too many errors" {
					t.Fatalf("error %v: token %q is not at %d:%d of %q", e, e.Token, e.Line, e.Col, line)
				}
			}
			return
		}
		text := cfg.Format()
		again, err := config.Parse("again.conf", strings.NewReader(text))
		if err != nil {
			t.Fatalf("canonical form does not parse: %v\n%s", err, text)
		}
		if got := again.Format(); got != text {
			t.Fatalf("canonical form changed on reparse:\n%s\nwant\n%s", got, text)
		}
	})
}
