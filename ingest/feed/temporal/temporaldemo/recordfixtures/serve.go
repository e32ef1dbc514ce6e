package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// serveProc is an `oncetrace serve` with a throwaway database: its sandbox
// is the mail API the workers send to.
type serveProc struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

func startServe(ctx context.Context, bin, dir string) (*serveProc, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	logf, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", "--addr", addr, "--db", filepath.Join(dir, "oncetrace.db"))
	cmd.Stdout, cmd.Stderr = logf, logf
	// Without the developer's settings (tokens, addresses).
	for _, kv := range os.Environ() {
		if len(kv) < 10 || kv[:10] != "ONCETRACE_" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("oncetrace serve: %w", err)
	}
	s := &serveProc{cmd: cmd, url: "http://" + addr, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	for deadline := time.Now().Add(30 * time.Second); ; {
		if resp, err := http.Get(s.url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("oncetrace serve exited before /healthz answered (log: %s)", filepath.Join(dir, "serve.log"))
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("oncetrace serve: /healthz did not answer within 30 s")
		}
	}
}

// stop ends serve by its PID: SIGTERM, then SIGKILL after 15 s.
func (s *serveProc) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}
