package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestDockerImage builds the repository's Dockerfile where a Docker daemon
// answers and runs the image's binary: `--version` prints the module line,
// `check` validates a config mounted read-only, and the image holds the
// binary alone (static: it runs on FROM scratch). Where no daemon answers
// it skips and says why. Planted bug: a cgo build (CGO_ENABLED=1) gives a
// dynamically linked binary that FROM scratch cannot run ("no such file or
// directory" for the loader).
func TestDockerImage(t *testing.T) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("needs the docker client")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, docker, "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Skipf("no Docker daemon answers (docker info: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	tag := fmt.Sprintf("mplsnode-test:%d", os.Getpid())
	t.Cleanup(func() { exec.Command(docker, "rmi", "-f", tag).Run() })
	if out, err := exec.CommandContext(ctx, docker, "build", "-t", tag, "../..").CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, docker, "run", "--rm", "--cap-drop", "ALL", tag, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "mplsnode github.com/mplsnode/mplsnode ") {
		t.Errorf("docker run %s --version: %v: %s", tag, err, out)
	}
	conf, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	conf += "/../../examples/seed/ns1.conf"
	out, err = exec.CommandContext(ctx, docker, "run", "--rm", "--cap-drop", "ALL", "--network", "none",
		"-v", conf+":/etc/mplsnode/node.conf:ro", tag, "check", "-c", "/etc/mplsnode/node.conf").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "/etc/mplsnode/node.conf: ok") {
		t.Errorf("docker run %s check: %v: %s", tag, err, out)
	}
}
