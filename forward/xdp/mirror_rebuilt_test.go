package xdp

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mplsnode/mplsnode/mpls"
	"github.com/mplsnode/mplsnode/mplstest"
)

// TestMirrorUpdateAcrossRebuilds: rounds of random changes (routes added,
// withdrawn, their labels changed, and as a reload does, a label changed
// in place) each published as a table rebuilt from scratch in the order
// an Update gives (no base shared with the table before it: the mirror's
// diff walks the two tables side by side)
// leave the program's FIB exactly as a whole sync of the same inputs
// makes it, without a walk of the program's FIB.
func TestMirrorUpdateAcrossRebuilds(t *testing.T) {
	skipUnlessBPF(t)
	m, p := newTestMirror(t)
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 2000
	in := MirrorInput{FIB: mirrorFIB(t, n), MAC: nhMACOf}
	if _, err := m.Sync(in); err != nil {
		t.Fatal(err)
	}
	for round := range 50 {
		add, del := randomChange(rng, 2*n, mplstest.ScalePrefix)
		updated, err := in.FIB.Update(add, del)
		if err != nil {
			t.Fatal(err)
		}
		routes := updated.Routes()
		if i := rng.IntN(len(routes)); rng.IntN(2) == 0 { // a reload's change: a label changed in place
			routes[i] = mirrorRoute(routes[i].Prefix, mpls.Label(16+rng.IntN(4)))
		}
		if in.FIB, err = mpls.NewFIB(routes); err != nil {
			t.Fatal(err)
		}
		res, err := m.Sync(in)
		if err != nil || res.Walked {
			t.Fatalf("round %d: %+v, %v; want no walk", round, res, err)
		}
		before := fibSlots(p)
		st, err := p.SyncFIBSeq(m.Routes(in))
		if after := fibSlots(p); err != nil || st.Deleted != 0 || fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("round %d (add %v, del %v): a whole sync after the update changed the FIB: %d written, %d deleted (%v)",
				round, add, del, st.Written, st.Deleted, err)
		}
	}
}
