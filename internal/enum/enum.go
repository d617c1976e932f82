// Package enum owns the one shape of the node's small enums whose values
// index a table: drop and refusal reasons, link kinds. It gives a value's
// name from its table (with the fallback past the table), the table entry
// of a value (a counter by reason), and the list of values in order. None
// of it allocates but Range and a Format past the table.
package enum

import "strconv"

// Integer is the underlying type of an enum.
type Integer interface {
	~uint8 | ~uint16 | ~uint32 | ~int
}

// in reports whether v indexes a table of n entries.
func in[T Integer](v T, n int) bool {
	return uint64(v) < uint64(n)
}

// At returns table[v], or the zero E when v is past the table.
func At[E any, T Integer](table []E, v T) E {
	if in(v, len(table)) {
		return table[v]
	}
	var zero E
	return zero
}

// Name returns names[v], or "unknown" when v is past the table.
func Name[T Integer](names []string, v T) string {
	if in(v, len(names)) {
		return names[v]
	}
	return "unknown"
}

// Format returns names[v], or typeName(v) (e.g. "reason(31)") when v is
// past the table.
func Format[T Integer](names []string, v T, typeName string) string {
	if in(v, len(names)) {
		return names[v]
	}
	return typeName + "(" + strconv.FormatInt(int64(v), 10) + ")"
}

// Range returns the values from first up to, not including, end, in
// order.
func Range[T Integer](first, end T) []T {
	if end <= first {
		return nil
	}
	vs := make([]T, 0, int(end-first))
	for v := first; v < end; v++ {
		vs = append(vs, v)
	}
	return vs
}
