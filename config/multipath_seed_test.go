package config

import (
	"strings"
	"testing"
)

// TestMultipathHashSeed parses net.ipv4.fib_multipath_hash_seed (Linux's
// word for the multipath flow hash seed), keeps it through Format, and
// rejects what is not a 32-bit number.
func TestMultipathHashSeed(t *testing.T) {
	cfg, err := Parse("a.conf", strings.NewReader("sysctl -w net.ipv4.fib_multipath_hash_seed=4294967295\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sysctl.MultipathHashSeed != 1<<32-1 {
		t.Errorf("got seed %d, want 4294967295", cfg.Sysctl.MultipathHashSeed)
	}
	again, err := Parse("b.conf", strings.NewReader(cfg.Format()))
	if err != nil || again.Sysctl != cfg.Sysctl {
		t.Errorf("Format round trip: %+v, %v; want %+v", again.Sysctl, err, cfg.Sysctl)
	}
	if d, _ := Parse("c.conf", strings.NewReader("")); d.Sysctl.MultipathHashSeed != 0 || strings.Contains(d.Format(), "seed") {
		t.Errorf("default: seed %d, Format %q; want 0 and no line", d.Sysctl.MultipathHashSeed, d.Format())
	}
	_, err = Parse("d.conf", strings.NewReader("sysctl net.ipv4.fib_multipath_hash_seed=4294967296\n"))
	if err == nil || !strings.Contains(err.Error(), `d.conf:1:41: bad value "4294967296" for net.ipv4.fib_multipath_hash_seed`) {
		t.Errorf("seed over 32 bits: got %v", err)
	}
}
