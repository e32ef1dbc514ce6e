package devserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Options configure a dev server.
type Options struct {
	// Dir holds the server's log (server.log) and, with Persist, its SQLite
	// file (temporal.db). Required.
	Dir string
	// Persist keeps workflows across Restart (--db-filename); without it
	// the server runs in memory and a restart loses them.
	Persist bool
	// Namespaces to create at launch besides "default".
	Namespaces []string
	// StartTimeout bounds the wait for the frontend; 60 s when zero.
	StartTimeout time.Duration
}

// Server is a running `temporal server start-dev` on 127.0.0.1.
type Server struct {
	// HostPort is the frontend's gRPC address, 127.0.0.1:PORT.
	HostPort string

	bin   string
	opts  Options
	ports [3]int // frontend, HTTP API, metrics: kept across Restart

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	err  error         // cmd's exit, once done is closed
}

// Run starts a dev server with bin (see Binary) on free ports and returns
// once its frontend answers gRPC health checks.
func Run(ctx context.Context, bin string, opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("devserver: Options.Dir is required")
	}
	s := &Server{bin: bin, opts: opts}
	for i := range s.ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		s.ports[i] = p
	}
	s.HostPort = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.ports[0]))
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// PID is the server process's id (0 when stopped).
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

func (s *Server) args() []string {
	args := []string{"server", "start-dev", "--headless", "--ip", "127.0.0.1",
		"--port", strconv.Itoa(s.ports[0]), "--http-port", strconv.Itoa(s.ports[1]),
		"--metrics-port", strconv.Itoa(s.ports[2]), "--log-level", "warn"}
	if s.opts.Persist {
		args = append(args, "--db-filename", filepath.Join(s.opts.Dir, "temporal.db"))
	}
	for _, ns := range s.opts.Namespaces {
		args = append(args, "--namespace", ns)
	}
	return args
}

func (s *Server) start(ctx context.Context) error {
	logf, err := os.OpenFile(filepath.Join(s.opts.Dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("devserver: %w", err)
	}
	defer logf.Close() // the child keeps its own descriptor
	cmd := exec.Command(s.bin, s.args()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so a Ctrl-C at the test's terminal does not
	// reach it before Stop does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("devserver: start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(done)
	}()
	timeout := s.opts.StartTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := waitServing(wctx, s.HostPort, done); err != nil {
		s.Stop()
		return fmt.Errorf("devserver: %s %s: %w (log: %s)", s.bin, strings.Join(s.args(), " "), err, s.logTail())
	}
	return nil
}

// waitServing polls the frontend's gRPC health service until it reports
// SERVING, the process exits or ctx ends.
func waitServing(ctx context.Context, hostPort string, exited <-chan struct{}) error {
	conn, err := grpc.NewClient(hostPort, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := health.Check(cctx, &healthpb.HealthCheckRequest{Service: "temporal.api.workflowservice.v1.WorkflowService"})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if err != nil {
			last = err
		} else {
			last = fmt.Errorf("health: %v", resp.GetStatus())
		}
		select {
		case <-exited:
			return errors.New("the server exited before its frontend answered")
		case <-ctx.Done():
			return fmt.Errorf("the frontend on %s did not answer: %v", hostPort, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop ends the server by its PID: SIGTERM, then SIGKILL after 10 s. It
// may be called more than once.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Restart stops the server and starts it again on the same ports. With
// Options.Persist the workflows survive; in memory they are lost.
func (s *Server) Restart(ctx context.Context) error {
	s.Stop()
	return s.start(ctx)
}

// logTail is the end of the server's log, for error messages.
func (s *Server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.opts.Dir, "server.log"))
	if err != nil {
		return err.Error()
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("devserver: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
