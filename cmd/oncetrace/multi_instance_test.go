package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/oncetrace/oncetrace/ingest"
)

// historyFixture is web's generated history of 60 agent executions (1,718
// events, some sent twice, exercising every audit rule), one event a line;
// web's TestHistoryFixtureIsCurrent keeps it what its generator makes.
const historyFixture = "../../web/testdata/history.ndjson"

// multiHTTP bounds every request of the test; a commit waits for the
// other instance's writer, so allow more than demoHTTP's 20 s.
var multiHTTP = &http.Client{Timeout: time.Minute}

// TestTwoInstancesOnOnePostgres runs two serve processes, A and B, on one
// PostgreSQL database, as behind a load balancer. Eight clients post the
// history through both at once, shuffled, every batch twice; then every
// event must be stored once, the live tail of each instance must have seen
// every commit of both in one order, and every API answer of A and of B
// must be byte-identical to that of a SQLite serve fed the same history in
// order by one client.
func TestTwoInstancesOnOnePostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three servers as processes and a PostgreSQL cluster")
	}
	dsn := postgresDatabase(t)
	events, ids := readHistory(t)

	// A deep live buffer: this test is about what the tail carries, not
	// about dropping a slow client (which resumes; docs/live.md).
	a := startDemoServer(t, dsn, "serve-a.log", "--live-buffer", "100000")
	b := startDemoServer(t, dsn, "serve-b.log", "--live-buffer", "100000")
	// after=0: the tail from the first event, so nothing committed between
	// the upgrade and the subscription is missed.
	tailA, tailB := dialTail(t, a.url, 0), dialTail(t, b.url, 0)

	// 8 clients; every batch is queued twice, the queue shuffled, and each
	// client sends its requests to A and B in turn.
	rng := rand.New(rand.NewPCG(13, 7))
	shuffled := slices.Clone(events)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	var batches [][]json.RawMessage
	for len(shuffled) > 0 {
		size := min(len(shuffled), 1+rng.IntN(100))
		batches = append(batches, shuffled[:size])
		shuffled = shuffled[size:]
	}
	jobs := append(slices.Clone(batches), batches...)
	rng.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
	queue := make(chan []json.RawMessage)
	var mu sync.Mutex
	var accepted, duplicates, perInstance [2]int
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			n := 0
			for batch := range queue {
				to := (c + n) % 2
				n++
				res, err := postEvents([]string{a.url, b.url}[to], batch, n%2 == 0)
				mu.Lock()
				if err != nil {
					t.Errorf("client %d to %s: %v", c, "AB"[to:to+1], err)
				}
				accepted[to] += res.Accepted
				duplicates[to] += res.Duplicates
				perInstance[to]++
				mu.Unlock()
			}
		})
	}
	for _, batch := range jobs {
		queue <- batch
	}
	close(queue)
	wg.Wait()
	if t.Failed() {
		t.Fatalf("ingest failed\nA:\n%s\nB:\n%s", a.logText(), b.logText())
	}
	t.Logf("%d requests (%d to A, %d to B); accepted by A %d, by B %d", len(jobs), perInstance[0], perInstance[1], accepted[0], accepted[1])
	if got := accepted[0] + accepted[1]; got != len(ids) {
		t.Errorf("accepted by A and B together: got %d, want %d (the distinct events)", got, len(ids))
	}
	if got, want := accepted[0]+accepted[1]+duplicates[0]+duplicates[1], 2*len(events); got != want {
		t.Errorf("accepted plus duplicates: got %d, want %d (every event posted twice)", got, want)
	}
	if accepted[0] == 0 || accepted[1] == 0 {
		t.Errorf("accepted by A, by B: got %d, %d, want both > 0 (both instances must have written)", accepted[0], accepted[1])
	}

	// (a) Every event once in the store.
	stored := exportedIDs(t, cliBinary, dsn)
	if len(stored) != len(ids) {
		t.Errorf("exported events: got %d, want %d", len(stored), len(ids))
	}
	for id := range ids {
		if !stored[id] {
			t.Errorf("event %s: got absent from the export, want present", id)
		}
	}

	// (c) The same answers as one SQLite instance fed in order, byte for
	// byte: nothing is normalised, as no answer carries a server's clock or
	// address.
	s := startDemoServer(t, filepath.Join(t.TempDir(), "oncetrace.db"), "serve-sqlite.log", "--max-events", fmt.Sprint(len(events)))
	if res, err := postEvents(s.url, events, false); err != nil || res.Accepted != len(ids) {
		t.Fatalf("SQLite reference: got accepted %d, err %v, want %d", res.Accepted, err, len(ids))
	}
	want := apiAnswers(t, s.url, 60)
	size := 0
	for _, data := range want {
		size += len(data)
	}
	t.Logf("the SQLite instance: %d answers, %d bytes", len(want), size)
	for _, inst := range []struct{ name, url string }{{"A", a.url}, {"B", b.url}} {
		compareAnswers(t, inst.name+" (PostgreSQL)", apiAnswers(t, inst.url, 60), "the SQLite instance", want)
	}

	// (b) Each tail sees a marker posted only to the other instance, after
	// every event of the history, in one order on both.
	for _, m := range []struct{ to, id string }{{a.url, "marker-posted-to-A"}, {b.url, "marker-posted-to-B"}} {
		marker := json.RawMessage(fmt.Sprintf(`{"type":"execution","id":%q,"execution_id":"exec_marker","name":"marker"}`, m.id))
		if res, err := postEvents(m.to, []json.RawMessage{marker}, false); err != nil || res.Accepted != 1 {
			t.Fatalf("marker %s: got accepted %d, err %v, want 1", m.id, res.Accepted, err)
		}
	}
	// A's marker was committed first, so A's tail ends with B's marker; B's
	// tail is read on to its own, so that both lists end alike.
	seenA := tailA.until(t, "marker-posted-to-B")
	tailB.until(t, "marker-posted-to-A")
	seenB := tailB.until(t, "marker-posted-to-B")
	for _, tail := range []struct {
		name string
		seen []tailEvent
	}{{"A", seenA}, {"B", seenB}} {
		got := map[string]int{}
		for i, e := range tail.seen {
			got[e.id]++
			if i > 0 && e.seq <= tail.seen[i-1].seq {
				t.Errorf("tail on %s: event %s has seq %d after %d, want increasing", tail.name, e.id, e.seq, tail.seen[i-1].seq)
			}
		}
		for id := range ids {
			if got[id] != 1 {
				t.Errorf("tail on %s: event %s got %d times, want once", tail.name, id, got[id])
			}
		}
		if n := len(tail.seen); n != len(ids)+2 {
			t.Errorf("tail on %s: got %d events, want %d (the history and two markers)", tail.name, n, len(ids)+2)
		}
	}
	t.Logf("tails: %d events each, the last with seq %d", len(seenA), seenA[len(seenA)-1].seq)
	if !slices.Equal(seenA, seenB) {
		t.Errorf("tails on A and B: got different sequences (%d and %d events), want one commit order", len(seenA), len(seenB))
	}
	// A client resuming from the middle gets the rest, as A's tail had it:
	// on B from its hub's recent messages, on C, an instance started now,
	// from the store.
	c := startDemoServer(t, dsn, "serve-c.log")
	mid := len(seenA) / 2
	for _, inst := range []struct{ name, url string }{{"B", b.url}, {"C", c.url}} {
		resumed := dialTail(t, inst.url, seenA[mid].seq).until(t, "marker-posted-to-B")
		if !slices.Equal(resumed, seenA[mid+1:]) {
			t.Errorf("tail on %s resumed after seq %d: got %d events, want the %d after it on A's tail",
				inst.name, seenA[mid].seq, len(resumed), len(seenA)-mid-1)
		}
	}
	c.stop(t)
	a.stop(t)
	b.stop(t)
	s.stop(t)
}

// readHistory reads the fixture and the distinct ids ingest gives its
// events, sent or derived.
func readHistory(t *testing.T) ([]json.RawMessage, map[string]bool) {
	t.Helper()
	data, err := os.ReadFile(historyFixture)
	if err != nil {
		t.Fatal(err)
	}
	var events []json.RawMessage
	ids := map[string]bool{}
	for line := range strings.Lines(string(data)) {
		raw := json.RawMessage(strings.TrimSuffix(line, "\n"))
		ev, err := ingest.ParseEvent(raw, ingest.DefaultLimits)
		if err != nil {
			t.Fatalf("%s: %v", historyFixture, err)
		}
		events = append(events, raw)
		ids[ev.ID] = true
	}
	if len(events) < 1200 || len(ids) >= len(events) {
		t.Fatalf("%s: got %d events, %d distinct, want at least 1,200 with some re-sends", historyFixture, len(events), len(ids))
	}
	return events, ids
}

type postResult struct {
	Accepted   int               `json:"accepted"`
	Duplicates int               `json:"duplicates"`
	Rejected   []json.RawMessage `json:"rejected"`
}

// postEvents posts a batch as one JSON document, or as NDJSON.
func postEvents(serverURL string, events []json.RawMessage, ndjson bool) (postResult, error) {
	var body []byte
	contentType := "application/json"
	if ndjson {
		contentType = "application/x-ndjson"
		for _, ev := range events {
			body = append(append(body, ev...), '\n')
		}
	} else {
		body, _ = json.Marshal(map[string]any{"events": events})
	}
	resp, err := multiHTTP.Post(serverURL+"/api/v1/events", contentType, bytes.NewReader(body))
	if err != nil {
		return postResult{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return postResult{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return postResult{}, fmt.Errorf("POST %d events: got status %d, want 200: %s", len(events), resp.StatusCode, data)
	}
	var res postResult
	if err := json.Unmarshal(data, &res); err != nil {
		return res, fmt.Errorf("POST: %v: %s", err, data)
	}
	if len(res.Rejected) > 0 {
		return res, fmt.Errorf("POST: got %d rejected, want 0: %s", len(res.Rejected), data)
	}
	return res, nil
}

// tailEvent is one event a live client received.
type tailEvent struct {
	seq int64
	id  string
}

// tail is a live WebSocket client that keeps every event it receives.
type tail struct {
	mu     sync.Mutex
	events []tailEvent
	err    error         // why reading stopped
	more   chan struct{} // signalled after each message
}

// dialTail opens serverURL's live WebSocket from the event after sequence
// number after on, and reads it until the test ends.
func dialTail(t *testing.T, serverURL string, after int64) *tail {
	t.Helper()
	ws := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	conn, resp, err := ws.Dial(fmt.Sprintf("ws%s/api/v1/live?after=%d", strings.TrimPrefix(serverURL, "http"), after), nil)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s/api/v1/live: got %v (status %d), want 101", serverURL, err, status)
	}
	tl := &tail{more: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, data, err := conn.ReadMessage()
			var msg struct {
				Type   string `json:"type"`
				Seq    int64  `json:"seq"`
				Reason string `json:"reason"`
				Event  struct {
					ID string `json:"id"`
				} `json:"event"`
			}
			if err == nil {
				err = json.Unmarshal(data, &msg)
			}
			if err == nil && msg.Type == "dropped" {
				err = fmt.Errorf("dropped after seq %d: %s", msg.Seq, msg.Reason)
			}
			tl.mu.Lock()
			if err != nil {
				tl.err = err
			} else if msg.Type == "event" {
				tl.events = append(tl.events, tailEvent{seq: msg.Seq, id: msg.Event.ID})
			}
			tl.mu.Unlock()
			select {
			case tl.more <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	return tl
}

// until waits for the event with id and returns every event received up
// to it.
func (tl *tail) until(t *testing.T, id string) []tailEvent {
	t.Helper()
	timeout := time.After(30 * time.Second) // a bound on the wait, not a latency claim
	for {
		tl.mu.Lock()
		for i, e := range tl.events {
			if e.id == id {
				seen := slices.Clone(tl.events[:i+1])
				tl.mu.Unlock()
				return seen
			}
		}
		n, err := len(tl.events), tl.err
		tl.mu.Unlock()
		if err != nil {
			t.Fatalf("live tail: waiting for %s after %d events: %v", id, n, err)
		}
		select {
		case <-tl.more:
		case <-timeout:
			t.Fatalf("live tail: %s not received within 30s (%d events received)", id, n)
		}
	}
}

// apiAnswers is every read API answer of a server, in a fixed order, by
// name: the list of executions in pages, each execution, the outbox in
// pages, the findings; at least atLeast executions.
func apiAnswers(t *testing.T, serverURL string, atLeast int) map[string][]byte {
	t.Helper()
	answers := map[string][]byte{}
	get := func(path string) []byte {
		resp, err := multiHTTP.Get(serverURL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: got status %d, want 200: %s", path, resp.StatusCode, data)
		}
		answers[path] = data
		return data
	}
	var ids []string
	for cursor := ""; ; {
		var page struct {
			Executions []struct {
				ID string `json:"execution_id"`
			} `json:"executions"`
			Next string `json:"next"`
		}
		// Small pages, so that cursors are compared too.
		if err := json.Unmarshal(get("/api/v1/executions?limit=20&cursor="+url.QueryEscape(cursor)), &page); err != nil {
			t.Fatal(err)
		}
		for _, x := range page.Executions {
			ids = append(ids, x.ID)
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	if len(ids) < atLeast {
		t.Fatalf("%s: got %d executions, want at least %d", serverURL, len(ids), atLeast)
	}
	for _, id := range ids {
		get("/api/v1/executions/" + url.PathEscape(id))
	}
	for cursor := ""; ; {
		var page struct {
			Next string `json:"next"`
		}
		if err := json.Unmarshal(get("/api/v1/effects?limit=100&cursor="+url.QueryEscape(cursor)), &page); err != nil {
			t.Fatal(err)
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	for cursor := ""; ; {
		var page struct {
			Next string `json:"next"`
		}
		if err := json.Unmarshal(get("/api/v1/findings?limit=20&cursor="+url.QueryEscape(cursor)), &page); err != nil {
			t.Fatal(err)
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	return answers
}

// compareAnswers reports every answer that differs, with the bytes around
// the first difference.
func compareAnswers(t *testing.T, gotName string, got map[string][]byte, wantName string, want map[string][]byte) {
	t.Helper()
	var paths []string
	for p := range want {
		paths = append(paths, p)
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: answered %s, %s did not", gotName, p, wantName)
		}
	}
	slices.Sort(paths)
	diffs := 0
	for _, p := range paths {
		g, w := got[p], want[p]
		if bytes.Equal(g, w) {
			continue
		}
		if diffs++; diffs > 5 {
			continue
		}
		if g == nil {
			t.Errorf("%s: %s did not answer, %s did", p, gotName, wantName)
			continue
		}
		i := 0
		for i < len(g) && i < len(w) && g[i] == w[i] {
			i++
		}
		from := max(0, i-200)
		t.Errorf("GET %s: %s differs from %s at byte %d:\n got: …%s…\nwant: …%s…", p, gotName, wantName, i,
			g[from:min(len(g), i+200)], w[from:min(len(w), i+200)])
	}
	if diffs > 5 {
		t.Errorf("%s vs %s: %d of %d answers differ, the first 5 shown", gotName, wantName, diffs, len(paths))
	}
}
