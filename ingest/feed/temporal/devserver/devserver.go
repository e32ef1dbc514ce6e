// Package devserver runs a Temporal development server (`temporal server
// start-dev`) on free 127.0.0.1 ports for tests. The Temporal CLI is never a
// dependency of this module: it is a binary built from its own module and
// cached by version (see Binary). A test that needs one calls Start; when
// the binary is absent the test is skipped with a notice, or failed when
// ONCETRACE_REQUIRE_TEMPORAL=1 (CI builds the binary and requires it).
//
// This is the follower's minimal version; the fixtures engineer's build
// script supersedes Binary's search when it lands.
package devserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// Version is the Temporal CLI release the tests run (Temporal Server
// 1.29.1): later ones cannot be built with go install.
const Version = "v1.5.1"

// Binary finds the Temporal CLI: $ONCETRACE_TEMPORAL_CLI, else the build
// cached by version next to the Go build cache
// ($(dirname GOCACHE)/oncetrace-temporal/temporal-v1.5.1), else a prewarmed
// build in that directory (prewarm/temporal). It returns the places it
// looked when none is there.
func Binary() (string, []string) {
	var looked []string
	if p := os.Getenv("ONCETRACE_TEMPORAL_CLI"); p != "" {
		if isExecutable(p) {
			return p, nil
		}
		looked = append(looked, p+" ($ONCETRACE_TEMPORAL_CLI)")
	}
	dir := filepath.Join(cacheRoot(), "oncetrace-temporal")
	for _, p := range []string{filepath.Join(dir, "temporal-"+Version), filepath.Join(dir, "prewarm", "temporal")} {
		if isExecutable(p) {
			return p, nil
		}
		looked = append(looked, p)
	}
	return "", looked
}

// cacheRoot is the directory holding the Go build cache, where the
// Temporal build is cached beside it.
func cacheRoot() string {
	if gc := os.Getenv("GOCACHE"); gc != "" && gc != "off" {
		return filepath.Dir(gc)
	}
	if d, err := os.UserCacheDir(); err == nil {
		return d
	}
	return os.TempDir()
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// Options configure a server.
type Options struct {
	// DBFilename keeps the server's state in this SQLite file, so that a
	// restart (Server.Restart) finds the workflows again; empty: in memory.
	DBFilename string
}

// Server is a running dev server.
type Server struct {
	// HostPort is its frontend gRPC address, 127.0.0.1:PORT; it stays the
	// same across Restart.
	HostPort string

	t       testing.TB
	bin     string
	opts    Options
	ports   [3]int // grpc, http, metrics
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// Start starts a dev server with an in-memory store and returns its
// address and a stop function (also run at the test's cleanup).
func Start(t testing.TB) (hostPort string, stop func()) {
	s := StartServer(t, Options{})
	return s.HostPort, s.Stop
}

// StartServer starts a dev server and waits until its default namespace
// answers. It skips the test when the CLI is absent (fails it with
// ONCETRACE_REQUIRE_TEMPORAL=1). The server is stopped at cleanup.
func StartServer(t testing.TB, opts Options) *Server {
	t.Helper()
	bin, looked := Binary()
	if bin == "" {
		msg := fmt.Sprintf("NOTICE: no Temporal CLI %s (looked in %v); build it with `go install github.com/temporalio/cli/cmd/temporal@%s` into one of those paths", Version, looked, Version)
		if os.Getenv("ONCETRACE_REQUIRE_TEMPORAL") == "1" {
			t.Fatal(msg + " (ONCETRACE_REQUIRE_TEMPORAL=1)")
		}
		fmt.Fprintln(os.Stderr, msg)
		t.Skip(msg)
	}
	s := &Server{t: t, bin: bin, opts: opts, logPath: filepath.Join(t.TempDir(), "temporal.log")}
	for i := range s.ports {
		s.ports[i] = freePort(t)
	}
	s.HostPort = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.ports[0]))
	t.Cleanup(s.Stop)
	s.start()
	return s
}

func (s *Server) start() {
	s.t.Helper()
	args := []string{"server", "start-dev", "--ip", "127.0.0.1", "--headless",
		"--port", strconv.Itoa(s.ports[0]), "--http-port", strconv.Itoa(s.ports[1]), "--metrics-port", strconv.Itoa(s.ports[2]),
		"--log-level", "warn"}
	if s.opts.DBFilename != "" {
		args = append(args, "--db-filename", s.opts.DBFilename)
	}
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("devserver: start %s: %v", s.bin, err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(s.exited) }()
	if err := s.waitReady(90 * time.Second); err != nil {
		s.Stop()
		s.t.Fatalf("devserver: %v\n%s", err, s.Log())
	}
}

// waitReady waits until the frontend answers for the default namespace.
func (s *Server) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("the server exited while starting")
		default:
		}
		last = s.ping()
		if last == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("not ready within %s: %v", limit, last)
}

func (s *Server) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: s.HostPort, Logger: quietLogger{}})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
	return err
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s). Stopping a
// stopped server does nothing.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	cmd := s.cmd
	s.cmd = nil
	_ = cmd.Process.Signal(syscall.SIGTERM) // only the process this package started
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-s.exited
	}
}

// Restart stops the server and starts it again on the same ports (and the
// same DBFilename, if any).
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// Log is what the server printed so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// quietLogger drops the SDK's log lines (a dial retried while the server
// starts is expected).
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
