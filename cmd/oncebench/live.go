package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// The live suite measures what live readers cost ingest, and how fast they
// hear of a commit, against a real server with N WebSocket clients on
// /api/v1/live in this process:
//
//   - throughput: the ingest suite's batched load (agent runs, batches of
//     100 from 16 senders, as fast as the server answers) on a fresh
//     database with no live client, then with N clients that read every
//     message and, when dropped, resume from their last sequence as the
//     /live page does; the rounds alternate, and the ratio of the two
//     rates is the figure. After the last answer the clients get time to
//     catch up, and each must have had every event, in order, once.
//   - latency: one event a POST at a steady rate with the N clients
//     connected; each event's latency is measured from just before its
//     POST to its receipt by each client, through a map from event id to
//     send time kept in this process.

type liveConfig struct {
	runFlags
	clients int
	senders int
	buffer  int
	cases   map[string]bool
	// throughput
	events, batch, rounds int
	catchUp               time.Duration
	// latency
	rate     int
	duration time.Duration
}

func liveFlags(args []string) (liveConfig, error) {
	var c liveConfig
	fs := flag.NewFlagSet("oncebench live", flag.ContinueOnError)
	fs.IntVar(&c.clients, "clients", 1000, "connected WebSocket clients")
	fs.IntVar(&c.senders, "senders", 16, "concurrent HTTP senders")
	fs.IntVar(&c.buffer, "live-buffer", 1024, "the hub's per-client buffer, as serve --live-buffer")
	cases := fs.String("cases", "throughput,latency", "comma-separated cases to run: throughput, latency")
	fs.IntVar(&c.events, "events", 100_000, "throughput: events a run, as fast as the server takes them")
	fs.IntVar(&c.batch, "batch", 100, "throughput: events a request")
	fs.IntVar(&c.rounds, "rounds", 2, "throughput: runs without clients and with them, alternating")
	fs.DurationVar(&c.catchUp, "catch-up", 60*time.Second, "throughput: how long the clients get, after the last answer, to have every event")
	fs.IntVar(&c.rate, "rate", 100, "latency: events a second, one event a POST")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "latency: how long to send")
	c.register(fs, "synchronous setting: normal or full", "a CI-sized run: 20,000 events a throughput run, one round, 3 seconds of latency")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.quick {
		c.events, c.rounds, c.duration = 20_000, 1, 3*time.Second
	}
	if err := c.check(); err != nil {
		return c, err
	}
	c.cases = map[string]bool{}
	for _, name := range strings.Split(*cases, ",") {
		switch name = strings.TrimSpace(name); name {
		case "throughput", "latency":
			c.cases[name] = true
		case "":
		default:
			return c, fmt.Errorf("-cases: unknown case %q; known: throughput, latency", name)
		}
	}
	for _, n := range []int{c.clients, c.senders, c.events, c.batch, c.rounds, c.rate} {
		if n < 1 {
			return c, errors.New("-clients, -senders, -events, -batch, -rounds and -rate must be ≥ 1")
		}
	}
	if c.duration <= 0 || c.catchUp <= 0 {
		return c, errors.New("-duration and -catch-up must be positive")
	}
	return c, nil
}

// runLive runs the cases on new files in dir and prints their tables.
func runLive(c liveConfig, dir string, out io.Writer) error {
	if n, err := raiseOpenFiles(); err != nil {
		return fmt.Errorf("raise the open file limit: %w", err)
	} else if need := uint64(2*c.clients + c.senders + 64); n < need {
		return fmt.Errorf("the open file limit is %d; %d clients need about %d (both ends of each connection are in this process)", n, c.clients, need)
	}
	fmt.Fprintf(out, "%d WebSocket clients on /api/v1/live, sync %s, live buffer %d; server, SQLite and clients share this process and its CPUs\n",
		c.clients, c.sync, c.buffer)
	if c.cases["throughput"] {
		if err := runLiveThroughput(c, dir, out); err != nil {
			return err
		}
	}
	if c.cases["latency"] {
		if err := runLiveLatency(c, dir, out); err != nil {
			return err
		}
	}
	return nil
}

// ---- throughput ----

// throughputRun is one row of the throughput table.
type throughputRun struct {
	clients       int
	elapsed, cpu  time.Duration
	posts         []time.Duration
	deliveries    int64 // event messages the clients received while ingest ran
	drops, reconn int64
	rss           int64 // the process's resident memory at the last answer, bytes; 0 when unknown
}

func runLiveThroughput(c liveConfig, dir string, out io.Writer) error {
	bodies := requestBodies(generate(c.events, c.senders, 4), c.batch)
	fmt.Fprintf(out, "\nthroughput: %d events a run in batches of %d from %d senders, each waiting for its answer; fresh database each run\n"+
		"clients read every message and, when dropped, reconnect with after=<last seq> as the /live page does\n\n",
		c.events, c.batch, c.senders)
	fmt.Fprintf(out, "%-8s %7s %8s %9s %10s %10s %12s %7s %11s %6s %10s\n",
		"run", "clients", "seconds", "events/s", "POST p50", "POST p99", "CPU µs/event", "RSS MB", "deliveries", "drops", "reconnects")
	var with, without []throughputRun
	run := 0
	for r := range c.rounds {
		for _, clients := range []int{0, c.clients} {
			run++
			printRow := func(m throughputRun) {
				name := "without"
				if clients > 0 {
					name = "with"
				}
				cpu := "n/a"
				if m.cpu >= 0 {
					cpu = fmt.Sprintf("%.0f", float64(m.cpu)/float64(time.Microsecond)/float64(c.events))
				}
				slices.Sort(m.posts)
				rss := "n/a"
				if m.rss > 0 {
					rss = fmt.Sprintf("%.0f", float64(m.rss)/(1<<20))
				}
				fmt.Fprintf(out, "%-8s %7d %8.2f %9.0f %10s %10s %12s %7s %11d %6d %10d\n", name, clients, m.elapsed.Seconds(),
					float64(c.events)/m.elapsed.Seconds(), ms(percentile(m.posts, 0.5)), ms(percentile(m.posts, 0.99)), cpu, rss,
					m.deliveries, m.drops, m.reconn)
			}
			m, err := throughputOnce(c, filepath.Join(dir, fmt.Sprintf("throughput-%02d.db", run)), bodies, clients, printRow, out)
			if err != nil {
				return fmt.Errorf("throughput round %d, %d clients: %w", r+1, clients, err)
			}
			if clients > 0 {
				with = append(with, m)
			} else {
				without = append(without, m)
			}
		}
	}
	rate := func(runs []throughputRun) float64 {
		var d time.Duration
		for _, m := range runs {
			d += m.elapsed
		}
		return float64(len(runs)*c.events) / d.Seconds()
	}
	fmt.Fprintf(out, "\ningest with %d clients / without: %.0f / %.0f events/s = %.2f   (target ≥ 0.7)\n",
		c.clients, rate(with), rate(without), rate(with)/rate(without))
	return nil
}

// throughputOnce posts bodies to a new server with clients connected (none
// for the comparison run) and, with clients, waits for each to have every
// event.
func throughputOnce(c liveConfig, path string, bodies [][][]byte, clients int, printRow func(throughputRun), out io.Writer) (throughputRun, error) {
	m := throughputRun{clients: clients}
	srv, err := startServer(context.Background(), path, c.sync, true, c.buffer)
	if err != nil {
		return m, err
	}
	defer srv.Close()
	readers, stop, err := connectReaders(srv, clients, nil)
	if err != nil {
		return m, err
	}
	defer stop()

	httpClient := keepAliveClient(len(bodies), 2*time.Minute)
	defer httpClient.CloseIdleConnections()
	endpoint := "http://" + srv.addr + "/api/v1/events"
	var mu sync.Mutex
	var accepted atomic.Int64
	m.elapsed, m.cpu, err = postConcurrently(bodies, func(body []byte) error {
		start := time.Now()
		data, err := post(httpClient, endpoint, "application/json", false, body)
		took := time.Since(start)
		if err != nil {
			return err
		}
		mu.Lock()
		m.posts = append(m.posts, took)
		mu.Unlock()
		var answer struct {
			Accepted int `json:"accepted"`
		}
		if err := json.Unmarshal(data, &answer); err != nil {
			return fmt.Errorf("decode answer: %w", err)
		}
		accepted.Add(int64(answer.Accepted))
		return nil
	})
	if err != nil {
		return m, err
	}
	m.rss = processRSS()
	if n := int(accepted.Load()); n != c.events {
		return m, fmt.Errorf("accepted: got %d events, want %d", n, c.events)
	}
	for _, r := range readers {
		m.deliveries += r.total.Load()
		m.drops += r.drops.Load()
		m.reconn += r.reconnects.Load()
	}
	printRow(m)
	if clients == 0 {
		return m, nil
	}

	// Every client must end with every event, in order, once.
	last, err := srv.db.LastSeq(context.Background())
	if err != nil {
		return m, err
	}
	begin := time.Now()
	for deadline := begin.Add(c.catchUp); ; time.Sleep(20 * time.Millisecond) {
		behind := 0
		for _, r := range readers {
			if r.last.Load() < last {
				behind++
			}
		}
		if behind == 0 {
			break
		}
		if time.Now().After(deadline) {
			return m, fmt.Errorf("%d of %d clients still behind seq %d %v after the last answer", behind, clients, last, c.catchUp)
		}
	}
	caughtUp := time.Since(begin)
	stop()
	for i, r := range readers {
		if n := r.outOfOrder.Load(); n > 0 {
			return m, fmt.Errorf("client %d: %d events at or below a sequence it had already received", i, n)
		}
		if n := r.total.Load(); n != last {
			return m, fmt.Errorf("client %d: got %d events, want %d (every one, once)", i, n, last)
		}
	}
	fmt.Fprintf(out, "%-8s every client had all %d events, in order and once each, %.1f s after the last answer\n", "", last, caughtUp.Seconds())
	return m, nil
}

// ---- latency ----

func runLiveLatency(c liveConfig, dir string, out io.Writer) error {
	srv, err := startServer(context.Background(), filepath.Join(dir, "latency.db"), c.sync, true, c.buffer)
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Fprintf(out, "\nlatency: %d events/s for %v, one event a POST from %d senders, %d clients\n\n", c.rate, c.duration, c.senders, c.clients)

	sent := &sendTimes{at: map[string]time.Time{}}
	readers, stop, err := connectReaders(srv, c.clients, sent)
	if err != nil {
		return err
	}
	defer stop()

	// Event i is due at start + i/rate; a pool of senders keeps to the
	// schedule even when one POST is slow.
	total := int(c.duration.Seconds() * float64(c.rate))
	due := make(chan int, total)
	httpClient := keepAliveClient(c.senders, 30*time.Second)
	defer httpClient.CloseIdleConnections()
	endpoint := "http://" + srv.addr + "/api/v1/events"
	var postMu sync.Mutex
	var postLatencies []time.Duration
	var postErr error
	var senders sync.WaitGroup
	for range c.senders {
		senders.Go(func() {
			for i := range due {
				id := fmt.Sprintf("evt_oncebench_%07d", i)
				body := benchEvent(i, id)
				start := time.Now()
				sent.put(id, start)
				_, err := post(httpClient, endpoint, "application/json", false, body)
				elapsed := time.Since(start)
				postMu.Lock()
				postLatencies = append(postLatencies, elapsed)
				if err != nil && postErr == nil {
					postErr = err
				}
				postMu.Unlock()
			}
		})
	}
	interval := time.Second / time.Duration(c.rate)
	start := time.Now()
	for i := range total {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		due <- i
	}
	close(due)
	senders.Wait()
	sendElapsed := time.Since(start)
	if postErr != nil {
		return postErr
	}

	// Wait for every delivery, or give up after 10 s.
	want := int64(total) * int64(c.clients)
	received := func() (n int64) {
		for _, r := range readers {
			n += r.total.Load()
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); received() < want && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	stop()

	var all []time.Duration
	var drops, unknown int64
	for _, r := range readers {
		all = append(all, r.latencies...)
		drops += r.drops.Load()
		unknown += r.unknown
	}
	fmt.Fprintf(out, "events sent:    %d in %.2fs (%.0f/s)\n", total, sendElapsed.Seconds(), float64(total)/sendElapsed.Seconds())
	fmt.Fprintf(out, "deliveries:     %d of %d (%d clients × %d events)", received(), want, c.clients, total)
	if drops > 0 {
		fmt.Fprintf(out, "; %d drops for being slow (those clients resumed from the store)", drops)
	}
	if unknown > 0 {
		fmt.Fprintf(out, "; %d events this run did not send", unknown)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "%-38s %9s %9s %9s %9s\n", "latency", "p50", "p90", "p99", "max")
	printPercentiles(out, "POST start → 200 (commit)", postLatencies)
	printPercentiles(out, "POST start → receipt by a client", all)
	if got := received(); got < want {
		return fmt.Errorf("%d of %d deliveries arrived within 10s of the last POST", got, want)
	}
	return nil
}

// sendTimes maps an event id to when its POST started.
type sendTimes struct {
	mu sync.RWMutex
	at map[string]time.Time
}

func (s *sendTimes) put(id string, t time.Time) {
	s.mu.Lock()
	s.at[id] = t
	s.mu.Unlock()
}

func (s *sendTimes) get(id string) (time.Time, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.at[id]
	return t, ok
}

// ---- the clients ----

// liveReader is one WebSocket client that behaves like the /live page: it
// reads every message, and when the server drops it or the connection
// breaks it reconnects with after=<the last sequence it received>, after
// 0.5 s, and twice as long each time (up to 10 s) while the server keeps
// dropping it for being too slow. It does not decode whole messages: it
// reads the type, the sequence number and (for latency) the event id, so
// that what the clients cost this process stays small beside the server.
type liveReader struct {
	url  string
	sent *sendTimes // latency only: receipt times are recorded against it

	mu   sync.Mutex
	conn *websocket.Conn
	done bool

	last       atomic.Int64 // the highest event sequence received
	total      atomic.Int64 // event messages received, over every connection
	outOfOrder atomic.Int64 // event messages at or below last
	drops      atomic.Int64 // "dropped" messages
	reconnects atomic.Int64

	latencies []time.Duration // owned by the reading goroutine until it ends
	unknown   int64
}

// connectReaders connects n readers from now on and waits until the hub
// counts them; stop closes them and waits for their goroutines.
func connectReaders(srv *server, n int, sent *sendTimes) ([]*liveReader, func(), error) {
	readers := make([]*liveReader, n)
	var wg sync.WaitGroup
	var once sync.Once
	stop := func() {
		once.Do(func() {
			for _, r := range readers {
				if r != nil {
					r.close()
				}
			}
			wg.Wait()
		})
	}
	base := "ws://" + srv.addr + "/api/v1/live"
	for i := range readers {
		r := &liveReader{url: base, sent: sent}
		conn, _, err := readerDialer.Dial(base, nil)
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("client %d: %w", i, err)
		}
		r.conn = conn
		readers[i] = r
		wg.Go(r.run)
	}
	for deadline := time.Now().Add(30 * time.Second); srv.hub.Subscribers() < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			stop()
			return nil, nil, fmt.Errorf("only %d of %d clients subscribed within 30s", srv.hub.Subscribers(), n)
		}
	}
	return readers, stop, nil
}

func (r *liveReader) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = true
	if r.conn != nil {
		r.conn.Close()
	}
}

func (r *liveReader) run() {
	delay := 500 * time.Millisecond
	opened := time.Now()
	for {
		r.mu.Lock()
		conn, done := r.conn, r.done
		r.mu.Unlock()
		if done {
			return
		}
		err := r.read(conn)
		conn.Close()
		// Reconnect as the /live page does (static/js/oncetrace.js), after
		// the last sequence seen.
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != 4000 || time.Since(opened) > 30*time.Second {
			delay = 500 * time.Millisecond
		}
		for {
			if !r.sleep(delay) {
				return
			}
			delay = min(2*delay, 10*time.Second)
			conn, _, err := readerDialer.Dial(r.url+"?after="+strconv.FormatInt(r.last.Load(), 10), nil)
			if err != nil {
				continue
			}
			r.mu.Lock()
			r.conn, done = conn, r.done
			r.mu.Unlock()
			if done {
				conn.Close()
				return
			}
			r.reconnects.Add(1)
			opened = time.Now()
			break
		}
	}
}

// sleep waits d, or reports false at once when the reader is closed.
func (r *liveReader) sleep(d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		r.mu.Lock()
		done := r.done
		r.mu.Unlock()
		if done {
			return false
		}
	}
	return true
}

// readerDialer reads in large gulps, as a browser does: what the clients
// cost this process should be small beside the server.
var readerDialer = websocket.Dialer{ReadBufferSize: 16 << 10, HandshakeTimeout: 30 * time.Second}

var (
	eventPrefix   = []byte(`{"type":"event","seq":`)
	droppedPrefix = []byte(`{"type":"dropped"`)
	benchIDPrefix = []byte(`"id":"evt_oncebench_`)
)

// read reads until the connection ends and returns why.
func (r *liveReader) read(conn *websocket.Conn) error {
	var buf bytes.Buffer
	for {
		_, rd, err := conn.NextReader()
		if err != nil {
			return err
		}
		buf.Reset()
		if _, err := buf.ReadFrom(rd); err != nil {
			return err
		}
		data := buf.Bytes()
		if bytes.HasPrefix(data, droppedPrefix) {
			r.drops.Add(1)
			continue
		}
		if !bytes.HasPrefix(data, eventPrefix) {
			continue
		}
		rest := data[len(eventPrefix):]
		end := bytes.IndexAny(rest, ",}")
		seq, err := strconv.ParseInt(string(rest[:max(end, 0)]), 10, 64)
		if err != nil {
			continue
		}
		if seq <= r.last.Load() {
			r.outOfOrder.Add(1)
		} else {
			r.last.Store(seq)
		}
		r.total.Add(1)
		if r.sent == nil {
			continue
		}
		if i := bytes.Index(data, benchIDPrefix); i >= 0 {
			id := data[i+len(`"id":"`):]
			if j := bytes.IndexByte(id, '"'); j >= 0 {
				if at, ok := r.sent.get(string(id[:j])); ok {
					r.latencies = append(r.latencies, time.Since(at))
					continue
				}
			}
		}
		r.unknown++
	}
}

// benchEvent is a finished attempt of a running agent: a hundred steps an
// execution, as an agent working through a task would send them.
func benchEvent(i int, id string) []byte {
	now := time.Now().UTC()
	body, _ := json.Marshal(map[string]any{
		"type": "attempt", "id": id, "execution_id": fmt.Sprintf("exec_oncebench_%05d", i/100),
		"step_id": fmt.Sprintf("step-%d", i%100), "attempt": 1, "tool": "lookup_customer", "effect": "read",
		"args": map[string]any{"customer": "acme"}, "worker": "pid-1",
		"started_at": now.Add(-50 * time.Millisecond).Format(time.RFC3339Nano), "ended_at": now.Format(time.RFC3339Nano), "outcome": "ok",
	})
	return body
}

// processRSS is this process's resident memory, in bytes; 0 where there
// is no /proc.
func processRSS() int64 { return max(0, childRSS(os.Getpid())) }

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func printPercentiles(out io.Writer, label string, ds []time.Duration) {
	if len(ds) == 0 {
		fmt.Fprintf(out, "%-38s %9s\n", label, "none")
		return
	}
	slices.Sort(ds)
	fmt.Fprintf(out, "%-38s %9s %9s %9s %9s\n", label, ms(percentile(ds, 0.50)), ms(percentile(ds, 0.90)), ms(percentile(ds, 0.99)), ms(ds[len(ds)-1]))
}
