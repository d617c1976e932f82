package netperf

import "testing"

// TestClientPorts checks the client ports of TCP_CRR and TCP_CC against
// stock netperf's pick_next_port_number (nettest_omni.c; nettest_bsd.c's
// TCP_CC loop does the same): the first port is client_port_min plus a
// random offset below max-min, each next one the port after it; the
// server's data port is skipped (checked before the bound, so a server at
// the upper bound still wraps); reaching client_port_max wraps to
// client_port_min; with min == max every connection uses min. Planted
// bugs: the wrap test as '>' (port 65535 used), the server's port not
// skipped: each fails here.
func TestClientPorts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		min, max   int
		offset     int
		serverPort int
		want       []int
	}{
		{"wraps at max", DefaultClientPortMin, DefaultClientPortMax, 65532 - 5000, 12865, []int{65532, 65533, 65534, 5000, 5001}},
		{"skips the server's port", 5000, 6000, 10, 5012, []int{5010, 5011, 5013, 5014}},
		{"server at the upper bound", 5000, 5004, 2, 5003, []int{5002, 5000, 5001, 5002, 5000}},
		{"min == max", 7000, 7000, 0, 12865, []int{7000, 7000, 7000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := clientPorts{min: tc.min, max: tc.max, intn: func(n int) int {
				if n != tc.max-tc.min {
					t.Errorf("random offset drawn below %d, want below max-min = %d", n, tc.max-tc.min)
				}
				return tc.offset
			}}
			for i, want := range tc.want {
				if got := p.next(tc.serverPort); got != want {
					t.Fatalf("connection %d: port %d, want %d (sequence %v)", i+1, got, want, tc.want)
				}
			}
		})
	}
	// The real random start stays in [min, max).
	for range 1000 {
		p := clientPorts{min: DefaultClientPortMin, max: DefaultClientPortMax}
		if got := p.next(12865); got < DefaultClientPortMin || got >= DefaultClientPortMax {
			t.Fatalf("first port %d outside [%d, %d)", got, DefaultClientPortMin, DefaultClientPortMax)
		}
	}
}
