package devserver

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// Required reports whether EnvRequire asks Temporal tests to fail rather
// than skip when there is no CLI.
func Required() bool { return os.Getenv(EnvRequire) == "1" }

// Start starts an in-memory dev server for the test and returns its
// frontend address and a stop function (also registered with t.Cleanup).
// Without a CLI it skips with a notice on stderr, or fails when
// ONCETRACE_REQUIRE_TEMPORAL=1.
func Start(t testing.TB) (hostPort string, stop func()) {
	t.Helper()
	s := StartServer(t, Options{})
	return s.HostPort, s.Stop
}

// StartServer is Start with options (Dir defaults to a t.TempDir()), for
// tests that restart the server: set Persist to keep its workflows.
func StartServer(t testing.TB, opts Options) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if Required() {
			t.Fatalf("%s=1 but %v", EnvRequire, err)
		}
		msg := fmt.Sprintf("SKIPPED: needs the Temporal CLI: %v (set %s=1 to make this a failure)", err, EnvRequire)
		fmt.Fprintln(os.Stderr, "!!! "+t.Name()+" "+msg)
		t.Skip(msg)
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	s, err := Run(context.Background(), bin, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}
