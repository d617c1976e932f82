package bgp

import (
	"context"
	"log/slog"
)

// aliasHandler passes GoBGP's records on with each neighbour named by its
// address: GoBGP knows a neighbour only by its loopback alias (see the
// package doc) and logs that (Key=127.100.0.1), which tells an operator
// nothing.
type aliasHandler struct {
	slog.Handler
	names map[string]string // loopback alias -> neighbour address
}

func newAliasHandler(h slog.Handler, neighbors []Neighbor) aliasHandler {
	names := make(map[string]string, len(neighbors))
	for i, n := range neighbors {
		names[loopbackAlias(i).String()] = n.Address.String()
	}
	return aliasHandler{Handler: h, names: names}
}

// Handle implements slog.Handler.
func (h aliasHandler) Handle(ctx context.Context, r slog.Record) error {
	named := false
	r.Attrs(func(a slog.Attr) bool {
		named = h.names[a.Value.String()] != "" || a.Value.Kind() == slog.KindGroup
		return !named
	})
	if !named {
		return h.Handler.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.rename(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

// rename returns a with an alias value replaced by the address.
func (h aliasHandler) rename(a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindGroup {
		g := a.Value.Group()
		as := make([]any, len(g))
		for i, x := range g {
			as[i] = h.rename(x)
		}
		return slog.Group(a.Key, as...)
	}
	if n := h.names[a.Value.String()]; n != "" {
		return slog.String(a.Key, n)
	}
	return a
}

// WithAttrs implements slog.Handler.
func (h aliasHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = h.rename(a)
	}
	return aliasHandler{h.Handler.WithAttrs(out), h.names}
}

// WithGroup implements slog.Handler.
func (h aliasHandler) WithGroup(name string) slog.Handler {
	return aliasHandler{h.Handler.WithGroup(name), h.names}
}
