package netperf

import "testing"

// TestMeanTransactionRate: over -i iterations the classic TCP_RR's -v 2
// block uses the mean transaction rate (nettest_bsd.c's thruput), the
// migrated one the last iteration's (nettest_omni.c's transaction_rate).
// Planted bug (the last rate for classic too) caught.
func TestMeanTransactionRate(t *testing.T) {
	var s confStats
	for _, tc := range []struct {
		classic bool
		want    float64
	}{{true, 150}, {false, 200}} {
		rs := []Result{{Classic: tc.classic, TransactionRate: 100, Throughput: 100}, {Classic: tc.classic, TransactionRate: 200, Throughput: 200}}
		if got := s.mean(rs).TransactionRate; got != tc.want {
			t.Errorf("classic %v: transaction rate %v, want %v", tc.classic, got, tc.want)
		}
	}
}
