package devserver

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestCLIVersionMatchesModule(t *testing.T) {
	got, err := moduleCLIVersion("temporalcli")
	if err != nil {
		t.Fatal(err)
	}
	if got != CLIVersion {
		t.Errorf("temporalcli/go.mod requires github.com/temporalio/cli %s, want CLIVersion %s", got, CLIVersion)
	}
}

// TestStartRestart: a persisted dev server answers on its frontend, and
// again on the same address after a restart; the namespace created through
// the real CLI is still there.
func TestStartRestart(t *testing.T) {
	s := StartServer(t, Options{Persist: true})
	bin, _ := Binary()
	ctx := context.Background()
	cli := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append(args, "--address", s.HostPort)...).CombinedOutput()
		if err != nil {
			t.Fatalf("temporal %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	cli("operator", "namespace", "create", "--namespace", "kept", "--retention", "24h")
	pid := s.PID()
	start := time.Now()
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart took %v", time.Since(start))
	if s.PID() == pid || s.PID() == 0 {
		t.Errorf("PID after restart: got %d, want a new process (was %d)", s.PID(), pid)
	}
	if out := cli("operator", "namespace", "describe", "--namespace", "kept"); !strings.Contains(out, "kept") {
		t.Errorf("namespace after restart: got %q, want it described", out)
	}
	s.Stop()
	if err := waitServing(ctx, s.HostPort, closed()); err == nil {
		t.Errorf("after Stop: the frontend on %s still answers", s.HostPort)
	}
}

func closed() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
