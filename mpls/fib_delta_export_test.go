package mpls

// FIBBase returns what identifies f's base: two FIBs of one base share
// it (tests of the delta and its folds).
func FIBBase(f *FIB) any { return f.base }

// FIBDeltaLen returns the size of f's delta over its base: base entries
// it hides and routes it adds.
func FIBDeltaLen(f *FIB) int {
	if f.d == nil {
		return 0
	}
	return len(f.d.gone) + len(f.d.added)
}

// SetCompactBuilt has t call f in each compaction once the new base is
// built, before it is published (Tables.compact).
func SetCompactBuilt(t *Tables, f func()) { t.compactBuilt = f }
