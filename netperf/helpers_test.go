package netperf_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mplsnode/mplsnode/netperf"
)

// vectorsDir holds the captured control messages of stock netperf 2.7.1:
// the steering repo's shared/ folder, which lies beside the checkout
// (../shared from the repository root), or /work/shared.
var vectorsDir = func() string {
	for _, d := range []string{"../../shared/netperf/vectors", "/work/shared/netperf/vectors"} {
		if _, err := os.Stat(d); err == nil {
			return d
		}
	}
	return "../../shared/netperf/vectors"
}()

// readVector returns the messages of one .hex capture (one per line).
func readVector(t testing.TB, name string) []*netperf.Message {
	t.Helper()
	f, err := os.Open(filepath.Join(vectorsDir, name))
	if err != nil {
		t.Skipf("vectors not available: %v", err)
	}
	defer f.Close()
	var out []*netperf.Message
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		b, err := hex.DecodeString(line)
		if err != nil || len(b) != netperf.MessageSize {
			t.Fatalf("%s: bad line (%d bytes, err %v)", name, len(b), err)
		}
		m := new(netperf.Message)
		copy(m[:], b)
		out = append(out, m)
	}
	return out
}

// logBuffer collects server log lines for assertions.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startServer runs a Server on 127.0.0.1:0 until the test ends.
func startServer(t *testing.T, s *netperf.Server) (addr string, logs *logBuffer) {
	t.Helper()
	logs = &logBuffer{}
	if s.Logger == nil {
		s.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(logs), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String(), logs
}

func hostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	var port int
	for _, c := range p {
		port = port*10 + int(c-'0')
	}
	return h, port
}
