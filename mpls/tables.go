package mpls

import "sync/atomic"

// Tables holds the current FTN and ILM. Readers (the packet path) Load the
// current table and look up in it without locks; a writer builds a new
// immutable table and publishes it with SetFTN/SetILM (copy-on-write).
// Readers never block and always see a whole table, old or new. The zero
// value holds empty tables and is ready to use; do not copy a Tables.
type Tables struct {
	ftn atomic.Pointer[FTN]
	ilm atomic.Pointer[ILM]
}

// FTN returns the current FTN (nil, an empty table, if none was set).
func (t *Tables) FTN() *FTN { return t.ftn.Load() }

// ILM returns the current ILM (nil, an empty table, if none was set).
func (t *Tables) ILM() *ILM { return t.ilm.Load() }

// SetFTN publishes f as the current FTN; f must not be modified afterwards
// (tables built by NewFTN never are).
func (t *Tables) SetFTN(f *FTN) { t.ftn.Store(f) }

// SetILM publishes m as the current ILM.
func (t *Tables) SetILM(m *ILM) { t.ilm.Store(m) }
