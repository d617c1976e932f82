package config

import (
	"fmt"
	"strings"
)

// Error is one problem in a config file, at the token that caused it.
type Error struct {
	File string
	Line int // from 1
	Col  int // from 1, in bytes
	// Token is the offending word as written; "" when a word is missing
	// (then Line:Col is just past the end of the line's last word).
	Token string
	// Msg says what is wrong and what was expected, without the position.
	Msg string
}

// Error returns "file:line:col: msg".
func (e *Error) Error() string { return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg) }

// Pos returns the error's position.
func (e *Error) Pos() Pos { return Pos{File: e.File, Line: e.Line, Col: e.Col} }

// ErrorList is every error one Parse found, in file order, at most
// MaxErrors of them (plus a final "too many errors" entry). Parse returns
// it as its error; errors.As(err, new(*Error)) finds the first.
type ErrorList []*Error

// Error returns the errors one per line.
func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap returns the errors, for errors.Is and errors.As.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and transpositions of neighbours
// (the commonest typo: "encpa" for "encap") each cost 1.
func editDistance(a, b string) int {
	pp := make([]int, len(b)+1) // row i-2
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], pp[j-2]+1)
			}
		}
		pp, prev, cur = prev, cur, pp
	}
	return prev[len(b)]
}

// suggest returns ` (did you mean "x"?)` for the closest word in valid, or
// "" when nothing is close: within a third of the word's length, at least 1.
func suggest(word string, valid []string) string {
	if len(word) > 64 { // a long garbage token is close to nothing; bound the work
		return ""
	}
	best, bestD := "", 0
	for _, v := range valid {
		d := editDistance(word, v)
		if best == "" || d < bestD {
			best, bestD = v, d
		}
	}
	limit := max(1, len(word)/3)
	if best == "" || bestD > limit {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// oneOf formats valid words as `a, b or c`.
func oneOf(valid []string) string {
	switch len(valid) {
	case 0:
		return ""
	case 1:
		return valid[0]
	}
	return strings.Join(valid[:len(valid)-1], ", ") + " or " + valid[len(valid)-1]
}
