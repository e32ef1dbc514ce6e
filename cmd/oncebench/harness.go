package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/postgres"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

// runFlags are the flags every suite has, with the same meaning in each.
type runFlags struct {
	syncName   string
	sync       sqlite.Sync // from syncName, set by check
	dir        string
	cpuProfile string
	quick      bool
}

// register adds -sync, -dir, -cpuprofile and -quick to fs; each suite says
// what -sync covers and what -quick shrinks.
func (r *runFlags) register(fs *flag.FlagSet, syncUsage, quickUsage string) {
	fs.StringVar(&r.syncName, "sync", "normal", syncUsage)
	fs.StringVar(&r.dir, "dir", "", "directory for the database files (default: a new temporary directory, removed after)")
	fs.StringVar(&r.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.BoolVar(&r.quick, "quick", false, quickUsage)
}

// check validates the registered flags once fs has parsed them.
func (r *runFlags) check() error {
	r.sync = sqlite.Sync(r.syncName)
	if r.sync != sqlite.SyncNormal && r.sync != sqlite.SyncFull {
		return fmt.Errorf("-sync must be normal or full, not %q", r.syncName)
	}
	return nil
}

// setUp returns the directory for the run's database files, -dir or a new
// temporary one, and starts the CPU profile that -cpuprofile asks for;
// cleanUp stops the profile and removes a temporary directory.
func (r runFlags) setUp(suite string) (dir string, cleanUp func(), err error) {
	var undo []func()
	cleanUp = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	dir = r.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "oncebench-"+suite+"-"); err != nil {
			return "", nil, err
		}
		undo = append(undo, func() { os.RemoveAll(dir) })
	}
	if r.cpuProfile != "" {
		f, err := os.Create(r.cpuProfile)
		if err != nil {
			cleanUp()
			return "", nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			cleanUp()
			return "", nil, err
		}
		undo = append(undo, func() {
			pprof.StopCPUProfile()
			f.Close()
		})
	}
	return dir, cleanUp, nil
}

// printHeader starts a suite's output: its title, the machine, and the load
// average, because other work on the machine skews every figure.
func printHeader(out io.Writer, title string) {
	fmt.Fprintf(out, "oncetrace %s benchmark\nmachine: %d CPUs, %s/%s, %s\n", title, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		fields := strings.Fields(string(load))
		fmt.Fprintf(out, "load average at start: %s\n", strings.Join(fields[:min(3, len(fields))], " "))
	}
}

// processCPU is the user and system CPU this process has used so far, from
// /proc/self/stat (in clock ticks, 100 a second on Linux); -1 elsewhere.
func processCPU() time.Duration {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return -1
	}
	return statCPU(stat)
}

// statCPU is the user and system CPU in a /proc/PID/stat, or -1.
func statCPU(stat []byte) time.Duration {
	// Fields after the command name, which is in parentheses and may hold
	// spaces: utime and stime are the 12th and 13th.
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return -1
	}
	fields := strings.Fields(string(stat[end+1:]))
	if len(fields) < 13 {
		return -1
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return -1
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100)
}

// cpuSince returns the CPU used since start, or -1 when unknown.
func cpuSince(start time.Duration) time.Duration {
	now := processCPU()
	if start < 0 || now < 0 {
		return -1
	}
	return now - start
}

// server is a real oncetrace server on 127.0.0.1 over a fresh database,
// wired as serve wires it: the writer's OnCommit publishes every commit to
// the live hub, or on PostgreSQL a follower does, from the store, after
// each notice.
type server struct {
	db      *store.DB
	hub     *web.Hub
	addr    string       // host:port
	commits atomic.Int64 // transactions, for the average group size

	writer   *writer.Writer
	web      *web.Server
	http     *http.Server
	serveErr chan error
	follow   *following // on PostgreSQL
}

// following is a PostgreSQL server's follower and listener, and how to
// stop them.
type following struct {
	stop     context.CancelFunc
	follower *web.Follower
	listened chan struct{}
}

// startServer opens the database target names, a SQLite file or a
// postgres:// URL as serve --db, and serves it; liveBuffer is the hub's
// per-client buffer, as serve --live-buffer.
func startServer(ctx context.Context, target string, syncMode sqlite.Sync, groupCommit bool, liveBuffer int) (*server, error) {
	var db *store.DB
	var err error
	if postgres.IsURL(target) {
		db, err = postgres.Open(ctx, target)
	} else {
		db, err = sqlite.Open(ctx, target, syncMode)
	}
	if err != nil {
		return nil, err
	}
	s := &server{db: db, hub: web.NewHub(liveBuffer), serveErr: make(chan error, 1)}
	wcfg := writer.DefaultConfig
	wcfg.GroupCommit = groupCommit
	wcfg.OnCommit = func(c writer.Commit) {
		s.commits.Add(1)
		s.hub.Publish(c)
	}
	if db.Shared() {
		// As serve: other instances may write, so the hub follows the store.
		if s.follow, err = followStore(db, target, s.hub); err != nil {
			db.Close()
			return nil, err
		}
		wcfg.OnCommit = func(writer.Commit) { s.commits.Add(1) }
	}
	s.writer = writer.New(db, wcfg)
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s.web = web.New(web.Config{DB: db, Writer: s.writer, Limits: ingest.DefaultLimits, Analysis: trace.DefaultConfig,
		Logger: logger, Hub: s.hub})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.writer.Close()
		s.follow.Close()
		db.Close()
		return nil, err
	}
	s.addr = ln.Addr().String()
	s.http = &http.Server{Handler: s.web, ReadHeaderTimeout: 10 * time.Second}
	go func() { s.serveErr <- s.http.Serve(ln) }()
	return s, nil
}

// Close ends the live connections first, which http.Server.Shutdown would
// wait for, then the server, the writer and the database.
func (s *server) Close() {
	s.web.Close()
	_ = s.http.Shutdown(context.Background())
	<-s.serveErr
	s.writer.Close()
	s.follow.Close()
	s.db.Close()
}

// followStore wires the hub as serve's followSharedDatabase does: LISTEN
// for every instance's notices and publish from the store after each.
func followStore(db *store.DB, dsn string, hub *web.Hub) (*following, error) {
	ctx, stop := context.WithCancel(context.Background())
	from, err := db.LastSeq(ctx)
	if err != nil {
		stop()
		return nil, err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	f := &following{stop: stop, follower: hub.FollowStore(ctx, db, from, logger), listened: make(chan struct{})}
	go func() {
		defer close(f.listened)
		logError := func(err error) {
			if ctx.Err() == nil { // not the stop Close asked for
				logger.Warn("live: listening for other instances' commits", "err", err)
			}
		}
		if err := postgres.Listen(ctx, dsn, f.follower.Notice, logError); err != nil {
			logger.Error("live: listener stopped", "err", err)
		}
	}()
	return f, nil
}

// Close stops the listener and the follower and waits for both; a nil
// following (SQLite) has nothing to stop.
func (f *following) Close() {
	if f == nil {
		return
	}
	f.stop()
	<-f.listened
	<-f.follower.Done()
}

// keepAliveClient keeps one connection a client (or sender) alive; the
// default of two idle connections a host would measure connection set-up.
func keepAliveClient(conns int, timeout time.Duration) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns}, Timeout: timeout}
}

// post sends one request body and returns the answer's body; any status
// but 200 is an error. gzipped marks a gzip-compressed body.
func post(client *http.Client, url, contentType string, gzipped bool, body []byte) ([]byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", contentType)
	if gzipped {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST %s: got %s, want 200: %s", req.URL.Path, resp.Status, data)
	}
	return data, nil
}

// postConcurrently has one goroutine a client send that client's bodies in
// order through send, each waiting for its answer (which comes after the
// commit). It times from the first request to the last answer and returns
// the wall time, the process's CPU over it (-1 when unknown) and the first
// error; a client stops at its first error.
func postConcurrently(clients [][][]byte, send func(body []byte) error) (elapsed, cpu time.Duration, err error) {
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	cpuStart, begin := processCPU(), time.Now()
	for _, bodies := range clients {
		wg.Go(func() {
			for _, body := range bodies {
				if err := send(body); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(begin), cpuSince(cpuStart), firstErr
}
