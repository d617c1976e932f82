// Package proc starts the helper processes of tests (daemons, capture
// tools, the binary under test) so that none outlives its test. It is for
// tests only.
package proc

import (
	"os/exec"
	"testing"
)

// Start starts cmd; when t ends cmd is killed and waited for, unless the
// test has waited for it already.
func Start(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
}
