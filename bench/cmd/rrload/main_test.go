package main

import "testing"

// TestKeyValue reads netperf -k output as rrload does: the value of the
// key asked for, on any line, and nothing from a line that only starts
// like it or holds no number.
func TestKeyValue(t *testing.T) {
	out := "MIGRATED TCP REQUEST/RESPONSE TEST\nTHROUGHPUT_UNITS=Trans/s\nTHROUGHPUT=1234.56\nLOCAL_TRANSPORT_RETRANS=0\n"
	if v, ok := keyValue(out, "THROUGHPUT"); !ok || v != 1234.56 {
		t.Errorf("THROUGHPUT = %v, %v; want 1234.56, true", v, ok)
	}
	if v, ok := keyValue(out, "LOCAL_TRANSPORT_RETRANS"); !ok || v != 0 {
		t.Errorf("LOCAL_TRANSPORT_RETRANS = %v, %v; want 0, true", v, ok)
	}
	for _, bad := range []string{"", "THROUGHPUT_UNITS=Trans/s\n", "THROUGHPUT=\n", "THROUGHPUT=fast\n"} {
		if v, ok := keyValue(bad, "THROUGHPUT"); ok {
			t.Errorf("keyValue(%q) = %v, true; want false", bad, v)
		}
	}
}

// TestMedian: odd and even counts, unsorted input left as it was.
func TestMedian(t *testing.T) {
	in := []float64{3, 1, 2, 10}
	if m := median(in); m != 2.5 {
		t.Errorf("median(3 1 2 10) = %v, want 2.5", m)
	}
	if in[0] != 3 || in[3] != 10 {
		t.Errorf("median reordered its input: %v", in)
	}
	if m := median([]float64{5, 1, 9}); m != 5 {
		t.Errorf("median(5 1 9) = %v, want 5", m)
	}
	if m := median(nil); m != 0 {
		t.Errorf("median(nil) = %v, want 0", m)
	}
}
