package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
)

// The attack suite's "live fan-out slows ingest" bullet of issue 11: the
// hub's Publish ran on the writer's goroutine and handed every message to
// every subscriber there, and each connection encoded each message itself;
// with 1,000 reading WebSocket clients ingest fell from 24k to 398
// events/s. These tests run inside the package so that they can hold the
// hub's fan-out still, which no client can do, and count what it did.
// (The figure itself is `oncebench live`'s, in docs/performance.md.)

// fanOutServer is a real server on a real SQLite file whose writer
// publishes to its hub, as serve wires it; commits counts OnCommit calls.
type fanOutServer struct {
	ts      *httptest.Server
	srv     *Server
	hub     *Hub
	db      *store.DB
	commits atomic.Int64
}

func startFanOutServer(t *testing.T, buffer int) *fanOutServer {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	fs := &fanOutServer{hub: NewHub(buffer), db: db}
	wcfg := writer.DefaultConfig
	wcfg.OnCommit = func(c writer.Commit) {
		fs.commits.Add(1)
		fs.hub.Publish(c)
	}
	w := writer.New(db, wcfg)
	fs.srv = New(Config{DB: db, Writer: w, Limits: ingest.DefaultLimits, Analysis: trace.DefaultConfig, Hub: fs.hub})
	fs.ts = httptest.NewUnstartedServer(fs.srv)
	// Modest kernel send buffers, as across a network: a client that stops
	// reading backs up into the server's write within tens of kilobytes
	// rather than the megabytes loopback allows.
	fs.ts.Listener = sendBufferListener{Listener: fs.ts.Listener, size: 16 << 10}
	fs.ts.Start()
	t.Cleanup(func() {
		fs.srv.Close()
		fs.ts.Close()
		w.Close()
		db.Close()
	})
	return fs
}

type sendBufferListener struct {
	net.Listener
	size int
}

func (l sendBufferListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(l.size)
	}
	return c, err
}

// holdFanOut stops the hub's fan-out from handing anything out (it does
// so under h.mu) until release, which may be called more than once.
func holdFanOut(h *Hub) (release func()) {
	h.mu.Lock()
	var once sync.Once
	return func() { once.Do(h.mu.Unlock) }
}

// postBatch posts n attempt events of one execution as NDJSON and fails
// the test unless all n are accepted.
func (fs *fanOutServer) postBatch(t *testing.T, batch, n int) {
	t.Helper()
	var body bytes.Buffer
	for i := range n {
		fmt.Fprintf(&body, `{"type":"attempt","id":"evt_fan_%d_%d","execution_id":"exec_fan_%d","step_id":"step-%d","attempt":1,"tool":"lookup","effect":"read","outcome":"ok","started_at":"2026-06-30T14:02:11.200Z","ended_at":"2026-06-30T14:02:11.300Z"}`+"\n",
			batch, i, batch, i)
	}
	// A writer that waited for the fan-out would never answer while the
	// test holds it: fail instead of hanging.
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Post(fs.ts.URL+"/api/v1/events", "application/x-ndjson", &body)
	if err != nil {
		t.Fatalf("POST batch %d: %v (want an answer: the writer must not wait for the live fan-out)", batch, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var res struct {
		Accepted int `json:"accepted"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &res) != nil || res.Accepted != n {
		t.Fatalf("POST batch %d: got %d %s, want 200 with %d accepted", batch, resp.StatusCode, data, n)
	}
}

func (fs *fanOutServer) wsURL(query string) string {
	return "ws" + strings.TrimPrefix(fs.ts.URL, "http") + "/api/v1/live?" + query
}

// dialNeverReads opens a live WebSocket that is never read, with a tiny
// receive buffer so that it backs up within kilobytes.
func (fs *fanOutServer) dialNeverReads(t *testing.T) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4096)
		}
		return c, err
	}}
	conn, _, err := d.Dial(fs.wsURL(""), nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// readSeqs reads event messages until it has want of them or the
// connection fails, and returns their sequence numbers as received.
func readSeqs(conn *websocket.Conn, want int) ([]int64, error) {
	var seqs []int64
	for len(seqs) < want {
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		var m LiveMessage
		if err := conn.ReadJSON(&m); err != nil {
			return seqs, err
		}
		switch m.Type {
		case "event":
			seqs = append(seqs, m.Seq)
		case "dropped":
			return seqs, fmt.Errorf("dropped (%s)", m.Reason)
		}
	}
	return seqs, nil
}

// TestAttackLiveFanOutOffTheWritersPath: the writer hands each commit to
// the hub and goes on, whatever the subscribers do. While the test holds
// the fan-out still (the lock it hands batches out under), every request
// is still answered: the writer never waits for it. Once released, every
// reading client gets every event, in order and once, each message having
// been encoded once for all of them rather than once a connection; and
// the clients that never read are dropped.
func TestAttackLiveFanOutOffTheWritersPath(t *testing.T) {
	const (
		readers, stuck = 50, 50
		batches, each  = 24, 25
	)
	fs := startFanOutServer(t, 1024)
	conns := make([]*websocket.Conn, readers)
	for i := range conns {
		conn, _, err := websocket.DefaultDialer.Dial(fs.wsURL(""), nil)
		if err != nil {
			t.Fatalf("dial reader %d: %v", i, err)
		}
		t.Cleanup(func() { conn.Close() })
		conns[i] = conn
	}
	for range stuck {
		fs.dialNeverReads(t)
	}
	for deadline := time.Now().Add(10 * time.Second); fs.hub.Subscribers() != readers+stuck; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("subscribers: got %d, want %d", fs.hub.Subscribers(), readers+stuck)
		}
	}
	encodedBefore := liveEncodings.Load()
	var wg sync.WaitGroup
	got := make([][]int64, readers)
	errs := make([]error, readers)
	for i, conn := range conns {
		wg.Go(func() { got[i], errs[i] = readSeqs(conn, batches*each) })
	}

	// Hold the fan-out still: what it hands out, it hands out under h.mu.
	release := holdFanOut(fs.hub)
	defer release() // if the test fails while holding it
	for b := range batches / 2 {
		fs.postBatch(t, b, each)
	}
	held := fs.hub.handled.Load()
	release()
	if n := fs.commits.Load(); n < 1 || fs.hub.published.Load() != n {
		t.Errorf("with the fan-out held: %d commits, %d published, want every commit published", n, fs.hub.published.Load())
	}
	if held != 0 {
		t.Errorf("with the fan-out held: it handled %d commits, want 0 (the test did not hold it)", held)
	}
	for b := batches / 2; b < batches; b++ {
		fs.postBatch(t, b, each)
	}
	wg.Wait()

	stored, err := fs.db.EventsAfter(context.Background(), 0, "", 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for _, e := range stored {
		want = append(want, e.Seq)
	}
	if len(want) != batches*each {
		t.Fatalf("stored: got %d events, want %d", len(want), batches*each)
	}
	for i := range readers {
		if errs[i] != nil || !slices.Equal(got[i], want) {
			t.Fatalf("reader %d: got %d events (%v), want all %d, in order, once", i, len(got[i]), errs[i], len(want))
		}
	}
	// Each event's message once in the hub — and perhaps once more, read
	// back from the store by a client that subscribed while the fan-out
	// was held — plus a "dropped" message for each connection let go. A
	// connection encoding for itself would be readers × events.
	if n, limit := liveEncodings.Load()-encodedBefore, int64(2*len(want)+readers+stuck); n > limit {
		t.Errorf("messages encoded: got %d for %d events to %d clients, want at most %d", n, len(want), readers+stuck, limit)
	}
	// The clients that never read are let go, not waited for.
	for deadline := time.Now().Add(15 * time.Second); fs.hub.Subscribers() != readers; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("subscribers after the burst: got %d, want the %d readers (the %d that never read dropped)", fs.hub.Subscribers(), readers, stuck)
		}
	}
	if n := fs.hub.SlowDrops(); n != stuck {
		t.Errorf("dropped for being slow: got %d, want %d", n, stuck)
	}
}
