package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// The live suite measures ingest-to-delivery latency of the live tail: a
// real server, N WebSocket clients on /api/v1/live, and events POSTed one
// a request at a steady rate. Each event's latency is measured from just
// before its POST to its receipt by each client, through a map from event
// id to send time kept in this process.

type liveConfig struct {
	runFlags
	clients  int
	rate     int
	duration time.Duration
	senders  int
	buffer   int
}

func liveFlags(args []string) (liveConfig, error) {
	var c liveConfig
	fs := flag.NewFlagSet("oncebench live", flag.ContinueOnError)
	fs.IntVar(&c.clients, "clients", 100, "connected WebSocket clients")
	fs.IntVar(&c.rate, "rate", 500, "events a second, one event a POST")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to send")
	fs.IntVar(&c.senders, "senders", 16, "concurrent HTTP senders (so one slow POST does not hold up the schedule)")
	fs.IntVar(&c.buffer, "live-buffer", 1024, "the hub's per-client buffer, as serve --live-buffer")
	c.register(fs, "synchronous setting: normal or full", "a CI-sized run: 3 seconds")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.quick {
		c.duration = 3 * time.Second
	}
	if err := c.check(); err != nil {
		return c, err
	}
	if c.clients < 1 || c.rate < 1 || c.senders < 1 || c.duration <= 0 {
		return c, errors.New("-clients, -rate, -senders and -duration must be positive")
	}
	return c, nil
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

// liveClient is one WebSocket reader and what it measured.
type liveClient struct {
	conn      *websocket.Conn
	latencies []time.Duration
	unknown   int    // event messages whose id this run did not send
	dropped   string // the reason, when the server dropped it
}

// runLive sends for -duration on a new file in dir and prints the
// deliveries and latency percentiles.
func runLive(c liveConfig, dir string, out io.Writer) error {
	srv, err := startServer(context.Background(), filepath.Join(dir, "live.db"), c.sync, true, c.buffer)
	if err != nil {
		return err
	}
	defer srv.Close()

	fmt.Fprintf(out, "%d WebSocket clients, %d events/s for %v, one event a POST from %d senders, sync %s, live buffer %d;\n"+
		"server, SQLite and clients share this process and its CPUs\n\n", c.clients, c.rate, c.duration, c.senders, c.sync, c.buffer)

	// The clients, each from now on (no after): they want new events only.
	sent := &sendTimes{at: map[string]time.Time{}}
	clients := make([]*liveClient, c.clients)
	var received atomic.Int64
	var readers sync.WaitGroup
	wsURL := "ws://" + srv.addr + "/api/v1/live"
	for i := range clients {
		conn, _, err := websocket.DefaultDialer.Dial(wsURL, nil)
		if err != nil {
			return fmt.Errorf("client %d: %w", i, err)
		}
		cl := &liveClient{conn: conn}
		clients[i] = cl
		readers.Add(1)
		go func() {
			defer readers.Done()
			cl.read(sent, &received)
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); srv.hub.Subscribers() < c.clients; {
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d clients subscribed within 10s", srv.hub.Subscribers(), c.clients)
		}
		time.Sleep(5 * time.Millisecond)
	}

	// The sender: event i is due at start + i/rate; a pool of senders keeps
	// to the schedule even when one POST is slow.
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
		senders.Add(1)
		go func() {
			defer senders.Done()
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
		}()
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
	for deadline := time.Now().Add(10 * time.Second); received.Load() < want && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	for _, cl := range clients {
		cl.conn.Close()
	}
	readers.Wait()

	var all []time.Duration
	droppedClients, unknown := 0, 0
	for _, cl := range clients {
		all = append(all, cl.latencies...)
		unknown += cl.unknown
		if cl.dropped != "" {
			droppedClients++
		}
	}
	fmt.Fprintf(out, "events sent:    %d in %.2fs (%.0f/s)\n", total, sendElapsed.Seconds(), float64(total)/sendElapsed.Seconds())
	fmt.Fprintf(out, "deliveries:     %d of %d (%d clients × %d events)", len(all), want, c.clients, total)
	if droppedClients > 0 {
		fmt.Fprintf(out, "; %d clients dropped for being slow", droppedClients)
	}
	if unknown > 0 {
		fmt.Fprintf(out, "; %d events this run did not send", unknown)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "%-38s %9s %9s %9s %9s\n", "latency", "p50", "p90", "p99", "max")
	printPercentiles(out, "POST start → 200 (commit)", postLatencies)
	printPercentiles(out, "POST start → receipt by a client", all)
	if int64(len(all)) < want {
		return fmt.Errorf("%d of %d deliveries arrived within 10s of the last POST", len(all), want)
	}
	return nil
}

func (cl *liveClient) read(sent *sendTimes, received *atomic.Int64) {
	var m struct {
		Type   string `json:"type"`
		Reason string `json:"reason"`
		Event  struct {
			ID string `json:"id"`
		} `json:"event"`
	}
	for {
		_, data, err := cl.conn.ReadMessage()
		now := time.Now()
		if err != nil {
			return
		}
		m.Type, m.Event.ID = "", ""
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		switch m.Type {
		case "dropped":
			cl.dropped = m.Reason
		case "event":
			at, ok := sent.get(m.Event.ID)
			if !ok {
				cl.unknown++
				continue
			}
			cl.latencies = append(cl.latencies, now.Sub(at))
			received.Add(1)
		}
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

func printPercentiles(out io.Writer, label string, ds []time.Duration) {
	if len(ds) == 0 {
		fmt.Fprintf(out, "%-38s %9s\n", label, "none")
		return
	}
	slices.Sort(ds)
	at := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }
	fmt.Fprintf(out, "%-38s %9s %9s %9s %9s\n", label, ms(at(0.50)), ms(at(0.90)), ms(at(0.99)), ms(ds[len(ds)-1]))
}
