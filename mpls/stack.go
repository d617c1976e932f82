package mpls

// ParseStack parses label stack entries from b, outermost first, up to and
// including the first entry with the bottom-of-stack bit. It appends them to
// dst[:0] and allocates nothing when cap(dst) is large enough (on success;
// errors are allocated). n is the number of bytes consumed,
// EntryLen*len(entries); the payload starts at b[n:].
//
// maxDepth <= 0 means DefaultMaxDepth. Errors, with byte offsets relative
// to b:
//   - *TruncatedError: b ends inside an entry (including an empty b);
//   - *NoBottomOfStackError: b ends on an entry boundary with no S bit seen;
//   - *TooDeepError: maxDepth entries without the S bit and more input.
//
// On error, entries holds the entries read before the problem.
func ParseStack(b []byte, maxDepth int, dst []Entry) (entries []Entry, n int, err error) {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	entries = dst[:0]
	for off := 0; ; off += EntryLen {
		rem := len(b) - off
		switch {
		case rem == 0 && off > 0:
			return entries, off, &NoBottomOfStackError{Offset: off, Entries: len(entries)}
		case len(entries) == maxDepth:
			return entries, off, &TooDeepError{Offset: off, Max: maxDepth}
		case rem < EntryLen:
			return entries, off, &TruncatedError{What: "label stack entry", Offset: off, Have: rem, Need: EntryLen}
		}
		e := DecodeEntry(b[off:])
		entries = append(entries, e)
		if e.S {
			return entries, off + EntryLen, nil
		}
	}
}

// Stack is a label stack, outermost (top) entry first, i.e. in wire order.
// The zero value is an empty stack. Push and Pop keep the bottom-of-stack
// bits consistent: only the last entry has S set.
type Stack []Entry

// Len returns the number of entries.
func (s Stack) Len() int { return len(s) }

// Push puts e on top of the stack. e.S is ignored: it is set when the stack
// was empty (e becomes the bottom) and cleared otherwise. Push returns
// *ReservedLabelError for implicit null, which never appears on the wire, and
// *LabelRangeError for a label over 20 bits; the stack is then unchanged. It
// allocates only when the stack grows beyond its capacity.
func (s *Stack) Push(e Entry) error {
	if err := checkPushLabel(e.Label, 0); err != nil {
		return err
	}
	e.S = len(*s) == 0
	*s = append(*s, Entry{})
	copy((*s)[1:], (*s)[:len(*s)-1])
	(*s)[0] = e
	return nil
}

// Pop removes and returns the top entry; ok is false if the stack is empty.
// The capacity is kept, so a later Push does not allocate.
func (s *Stack) Pop() (e Entry, ok bool) {
	if len(*s) == 0 {
		return Entry{}, false
	}
	e = (*s)[0]
	copy(*s, (*s)[1:])
	*s = (*s)[:len(*s)-1]
	return e, true
}

// Peek returns the top entry without removing it; ok is false if the stack
// is empty.
func (s Stack) Peek() (e Entry, ok bool) {
	if len(s) == 0 {
		return Entry{}, false
	}
	return s[0], true
}

// EncodedLen returns the number of bytes Encode writes.
func (s Stack) EncodedLen() int { return EntryLen * len(s) }

// Encode writes the stack into b in wire order and returns the number of
// bytes written. It panics if len(b) < s.EncodedLen(). The entries' S bits
// are written as stored.
func (s Stack) Encode(b []byte) int {
	_ = b[:EntryLen*len(s)]
	for i, e := range s {
		e.Encode(b[i*EntryLen:])
	}
	return EntryLen * len(s)
}
