package web_test

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/postgres"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

// TestIngestIsIdempotentAndOrderIndependent posts one generated history
// twice: in order in one request (A), and shuffled in random batches from
// concurrent clients, then all over again (B). docs/audit.md ("Order
// independence") promises that the stored state depends neither on re-sending
// nor on arrival order, so every API answer must be byte-identical between A
// and B, and the findings kept up to date commit by commit must equal an
// audit computed afresh.
//
// It runs on each engine: on PostgreSQL both servers share one cluster,
// each with a database of its own.
func TestIngestIsIdempotentAndOrderIndependent(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) { testIngestIsIdempotentAndOrderIndependent(t, engine) })
	}
}

func testIngestIsIdempotentAndOrderIndependent(t *testing.T, engine string) {
	h := generateHistory(historySeed)
	if len(h.events) < 1200 {
		t.Fatalf("history: got %d events, want at least 1200", len(h.events))
	}
	distinct := h.distinctIDs(t)
	if want := len(h.events) - h.resends; distinct != want {
		t.Fatalf("distinct event ids: got %d, want %d (events minus deliberate re-sends)", distinct, want)
	}
	t.Logf("history: %d events (%d distinct), %d executions", len(h.events), distinct, h.executions)

	// A: in order, in one request.
	bigLimits := ingest.DefaultLimits
	bigLimits.Events = len(h.events)
	bigLimits.BodyBytes = 64 << 20
	a := startServerOn(t, engine, "A", bigLimits)
	res := a.post(t, encodeBody(h.events, bodyJSON))
	if res.Accepted != distinct || res.Duplicates != h.resends {
		t.Fatalf("A: got accepted %d, duplicates %d, want %d, %d", res.Accepted, res.Duplicates, distinct, h.resends)
	}
	snapA := a.snapshot(t)
	if snapA.counts.executions != h.executions {
		t.Errorf("A: got %d executions, want %d", snapA.counts.executions, h.executions)
	}

	// B: shuffled, in random batches and encodings, from 8 clients; twice.
	b := startServerOn(t, engine, "B", ingest.DefaultLimits)
	rng := rand.New(rand.NewSource(7))
	first := b.postConcurrently(t, h.events, rng, 8)
	if first.Accepted != distinct || first.Accepted+first.Duplicates != len(h.events) {
		t.Errorf("B first pass: got accepted %d, duplicates %d, want %d, %d",
			first.Accepted, first.Duplicates, distinct, len(h.events)-distinct)
	}
	snapB1 := b.snapshot(t)
	second := b.postConcurrently(t, h.events, rng, 8)
	if second.Accepted != 0 || second.Duplicates != len(h.events) {
		t.Errorf("B second pass: got accepted %d, duplicates %d, want 0, %d", second.Accepted, second.Duplicates, len(h.events))
	}
	snapB2 := b.snapshot(t)

	if got, want := snapB2.totals(), snapB1.totals(); got != want {
		t.Errorf("B after the re-post: got %s, want %s (a re-send must change nothing)", got, want)
	}
	compareSnapshots(t, "B after the re-post", snapB2, "B after the first pass", snapB1)
	compareSnapshots(t, "B (shuffled, concurrent)", snapB2, "A (in order)", snapA)

	// The comparison only means something if the history exercised every rule.
	var found struct {
		Findings []trace.Finding `json:"findings"`
	}
	if err := json.Unmarshal(snapA.part("findings"), &found); err != nil {
		t.Fatal(err)
	}
	byRule := map[trace.Rule]int{}
	for _, f := range found.Findings {
		byRule[f.Rule]++
	}
	for rule := range trace.Severities {
		if byRule[rule] == 0 {
			t.Errorf("findings of %s: got 0, want at least 1 (the history must exercise every rule)", rule)
		}
	}
	t.Logf("A: %s; findings by rule: %v", snapA.totals(), byRule)
	// Nor without the merge cases that the rules do not name.
	var details []byte
	for _, name := range snapA.names {
		if strings.HasPrefix(name, "execution ") {
			details = append(details, snapA.part(name)...)
		}
	}
	for _, feature := range []string{`"field":"outcome"`, `"field":"status"`, `"deduplicated":true`, `"outcome":"replayed"`,
		`"outcome":"lost"`, `"kind":"crash"`, `"kind":"idle"`} {
		if n := bytes.Count(details, []byte(feature)); n == 0 {
			t.Errorf("A's executions: got no %s, want the history to produce some", feature)
		}
	}

	for _, srv := range []*testServer{a, b} {
		checkIncrementalAudit(t, srv)
	}
}

// TestIncrementalAuditMatchesFreshAudit holds the smallest histories on
// which the writer's per-commit re-audit once went wrong: each is posted in
// one request and one event a request in every order, and each time the
// stored state must equal the in-one-request state and a fresh audit.
func TestIncrementalAuditMatchesFreshAudit(t *testing.T) {
	tests := []struct {
		name   string
		events []string
	}{
		{
			// exec_A's step has two effects, exec_B's the keyed one only: the
			// keyed one is a duplicate, whichever execution was analysed last.
			name: "an effect two executions share through one key",
			events: []string{
				`{"type":"attempt","execution_id":"exec_A","step_id":"s1","attempt":1,"effect":"write","provider":"mail-api","idempotency_key":"K","args":{"to":"a"},"started_at":"2026-06-30T10:00:00Z","ended_at":"2026-06-30T10:00:01Z","outcome":"ok"}`,
				`{"type":"attempt","execution_id":"exec_B","step_id":"s1","attempt":1,"effect":"write","provider":"mail-api","idempotency_key":"K","args":{"to":"b"},"started_at":"2026-06-30T11:00:00Z","ended_at":"2026-06-30T11:00:01Z","outcome":"ok"}`,
				`{"type":"effect","provider":"mail-api","effect_id":"F1","idempotency_key":"K","at":"2026-06-30T10:00:00.500Z"}`,
				`{"type":"effect","provider":"mail-api","effect_id":"F2","execution_id":"exec_A","step_id":"s1","at":"2026-06-30T10:00:00.600Z"}`,
			},
		},
		{
			// The start event's key wins the merge; an effect carrying the
			// end event's key is an orphan even when it was matched first.
			name: "an attempt whose events disagree on its key",
			events: []string{
				`{"type":"attempt","execution_id":"exec_A","step_id":"s1","attempt":1,"effect":"write","provider":"mail-api","idempotency_key":"K2","started_at":"2026-06-30T10:00:00Z"}`,
				`{"type":"attempt","execution_id":"exec_A","step_id":"s1","attempt":1,"idempotency_key":"K1","ended_at":"2026-06-30T10:00:01Z","outcome":"ok"}`,
				`{"type":"effect","provider":"mail-api","effect_id":"F","idempotency_key":"K1","at":"2026-06-30T10:00:00.500Z"}`,
			},
		},
		{
			// The earlier effect event names exec_B: exec_A, which the later
			// one named, is left with no effect and a missing_effect.
			name: "an effect whose events disagree on its execution",
			events: []string{
				`{"type":"attempt","execution_id":"exec_A","step_id":"s1","attempt":1,"effect":"write","provider":"mail-api","started_at":"2026-06-30T10:00:00Z","ended_at":"2026-06-30T10:00:01Z","outcome":"ok"}`,
				`{"type":"attempt","execution_id":"exec_B","step_id":"s1","attempt":1,"effect":"write","provider":"mail-api","started_at":"2026-06-30T10:00:00Z","ended_at":"2026-06-30T10:00:01Z","outcome":"ok"}`,
				`{"type":"effect","provider":"mail-api","effect_id":"F","execution_id":"exec_A","step_id":"s1","at":"2026-06-30T10:00:00.600Z"}`,
				`{"type":"effect","provider":"mail-api","effect_id":"F","execution_id":"exec_B","step_id":"s1","at":"2026-06-30T10:00:00.500Z"}`,
			},
		},
		{
			// Every execution an event names exists, whichever event the
			// merge keeps and however the events were batched.
			name: "an effect whose events name two untraced executions",
			events: []string{
				`{"type":"effect","provider":"mail-api","effect_id":"F","execution_id":"exec_X","step_id":"s1","at":"2026-06-30T10:00:00.600Z"}`,
				`{"type":"effect","provider":"mail-api","effect_id":"F","execution_id":"exec_Y","step_id":"s1","at":"2026-06-30T10:00:00.500Z"}`,
			},
		},
		{
			// exec_B sends exec_A's key from two steps, the later-named one
			// first: the stored message must list them as a fresh audit does.
			name: "one key sent by two steps of another execution",
			events: []string{
				`{"type":"attempt","execution_id":"exec_A","step_id":"s1","attempt":1,"effect":"write","idempotency_key":"K","args":{"to":"a"},"started_at":"2026-06-30T10:00:00Z","ended_at":"2026-06-30T10:00:01Z","outcome":"ok"}`,
				`{"type":"attempt","execution_id":"exec_B","step_id":"a","attempt":1,"effect":"write","idempotency_key":"K","args":{"to":"b"},"started_at":"2026-06-30T11:00:05Z","ended_at":"2026-06-30T11:00:06Z","outcome":"ok"}`,
				`{"type":"attempt","execution_id":"exec_B","step_id":"b","attempt":1,"effect":"write","idempotency_key":"K","args":{"to":"c"},"started_at":"2026-06-30T11:00:00Z","ended_at":"2026-06-30T11:00:01Z","outcome":"ok"}`,
			},
		},
		{
			// The step's class comes from attempt 1, its provider from
			// attempt 2: the first effect of mail-api anywhere must still
			// bring its missing_effect.
			name: "a write step whose provider only a later attempt names",
			events: []string{
				`{"type":"attempt","execution_id":"exec_A","step_id":"s1","attempt":1,"effect":"write","started_at":"2026-06-30T10:00:00Z","ended_at":"2026-06-30T10:00:01Z","outcome":"timeout"}`,
				`{"type":"attempt","execution_id":"exec_A","step_id":"s1","attempt":2,"provider":"mail-api","started_at":"2026-06-30T10:00:02Z","ended_at":"2026-06-30T10:00:03Z","outcome":"ok"}`,
				`{"type":"effect","provider":"mail-api","effect_id":"F","idempotency_key":"Z","at":"2026-06-30T10:00:00.500Z"}`,
			},
		},
		{
			// The email's trace is known (it made the trace's execution)
			// before its tool call's span: once the span arrives, the email
			// is the step's, not an orphan beside a missing_effect.
			name: "an effect sent from a tool call's span that arrives after it",
			events: []string{
				`{"type":"effect","provider":"pay-api","effect_id":"F","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00000000000000c1","at":"2026-06-30T10:00:00.500Z"}`,
				`{"type":"attempt","execution_id":"4bf92f3577b34da6a3ce929d0e0e4736","step_id":"s1","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00000000000000c1","tool":"charge_card","effect":"write","provider":"pay-api","started_at":"2026-06-30T10:00:00Z","ended_at":"2026-06-30T10:00:01Z","outcome":"ok"}`,
			},
		},
		{
			// Two effects of traces no span came from, one key string at
			// two providers: neither is any tool call's, whichever came
			// first (the orphan recheck must not call one matched).
			name: "effects of two unexported traces sharing a key at two providers",
			events: []string{
				`{"type":"effect","provider":"mail-api","effect_id":"F1","idempotency_key":"K","trace_id":"41e2a3a7f6fade948959c0f25fb6a3c2","span_id":"0837d738b1e3d9e9","at":"2026-06-30T10:00:00.500Z"}`,
				`{"type":"effect","provider":"pay-api","effect_id":"F2","idempotency_key":"K","trace_id":"6eba4a3bb8c94aca1bd154c5d0d5962c","span_id":"7d2a8124a9fefeaa","at":"2026-06-30T10:01:00.500Z"}`,
			},
		},
		{
			// An attempt still running is in flight at the email of a lone
			// HTTP span a minute after it started: the email joins it
			// (inferred) whether it came before the attempt or after.
			name: "a stray email sent while an attempt that started long before still runs",
			events: []string{
				`{"type":"attempt","execution_id":"exec_A","step_id":"s1","attempt":1,"tool":"send_email","effect":"write","provider":"mail-api","args":{"to":"jordan@acme.dev"},"started_at":"2026-06-30T10:00:00Z"}`,
				`{"type":"span","execution_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2","trace_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2","span_id":"bbbbbbbbbbbbbbb2","role":"http","name":"POST","http_method":"POST","started_at":"2026-06-30T10:01:00Z","ended_at":"2026-06-30T10:01:01Z"}`,
				`{"type":"effect","provider":"mail-api","effect_id":"m1","target":"jordan@acme.dev","fingerprint":"mail:aa","trace_id":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2","span_id":"bbbbbbbbbbbbbbb2","at":"2026-06-30T10:01:00.500Z"}`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := make([]json.RawMessage, len(tt.events))
			for i, e := range tt.events {
				events[i] = json.RawMessage(e)
			}
			// The reference: everything in one request, so one commit.
			ref := startServer(t, "in one request", ingest.DefaultLimits)
			ref.post(t, encodeBody(events, bodyNDJSON))
			want := ref.snapshot(t)
			checkIncrementalAudit(t, ref)
			for _, order := range permutations(len(events)) {
				srv := startServer(t, fmt.Sprintf("one a request in order %v", order), ingest.DefaultLimits)
				for _, i := range order {
					srv.post(t, encodeBody(events[i:i+1], bodyNDJSON))
				}
				checkIncrementalAudit(t, srv)
				compareSnapshots(t, srv.name, srv.snapshot(t), ref.name, want)
			}
		})
	}
}

// permutations lists every order of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(slices.Clone(p[:i]), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

// checkIncrementalAudit compares what the writer stored commit by commit
// with an audit of the whole database computed afresh: the findings, and
// the outbox's match states.
func checkIncrementalAudit(t *testing.T, srv *testServer) {
	t.Helper()
	ctx := context.Background()
	w, err := srv.db.World(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := srv.db.Findings(ctx, store.FindingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	onlyStored, onlyFresh := diffFindings(stored, trace.Audit(w, trace.DefaultConfig))
	for _, f := range onlyStored {
		t.Errorf("%s: stored finding missing from a fresh audit: %s", srv.name, f)
	}
	for _, f := range onlyFresh {
		t.Errorf("%s: fresh audit finding not stored: %s", srv.name, f)
	}

	want := w.EffectStates()
	var cursor string
	for {
		rows, next, err := srv.db.Effects(ctx, store.EffectFilter{Cursor: cursor, Limit: store.MaxPageSize})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if got := r.State; got != want[r.Ref()] {
				t.Errorf("%s: effect %s/%s: got stored state %s, want %s (World.EffectStates)", srv.name, r.Provider, r.ID, got, want[r.Ref()])
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
}

// diffFindings returns, as JSON lines, the findings only in a and only in b.
func diffFindings(a, b []trace.Finding) (onlyA, onlyB []string) {
	lines := func(fs []trace.Finding) map[string]int {
		m := map[string]int{}
		for _, f := range fs {
			js, _ := json.Marshal(f)
			m[string(js)]++
		}
		return m
	}
	la, lb := lines(a), lines(b)
	for s, n := range la {
		for range n - lb[s] {
			onlyA = append(onlyA, s)
		}
	}
	for s, n := range lb {
		for range n - la[s] {
			onlyB = append(onlyB, s)
		}
	}
	slices.Sort(onlyA)
	slices.Sort(onlyB)
	return onlyA, onlyB
}

// ---- servers ----

type testServer struct {
	name string
	ts   *httptest.Server
	db   *store.DB
}

func startServer(t *testing.T, name string, lim ingest.Limits) *testServer {
	t.Helper()
	return startServerOn(t, "sqlite", name, lim)
}

// startServerOn starts a server on a fresh database of engine: "sqlite" (a
// file in t's TempDir) or "postgres" (a database on the package's cluster).
func startServerOn(t *testing.T, engine, name string, lim ingest.Limits, opts ...func(*web.Config)) *testServer {
	t.Helper()
	ctx := context.Background()
	var db *store.DB
	var err error
	if engine == "postgres" {
		db, err = postgres.Open(ctx, postgresDatabase(t))
	} else {
		db, err = sqlite.Open(ctx, t.TempDir()+"/oncetrace.db", sqlite.SyncNormal)
	}
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(db, writer.DefaultConfig)
	cfg := web.Config{DB: db, Writer: w, Limits: lim, Analysis: trace.DefaultConfig}
	for _, opt := range opts {
		opt(&cfg)
	}
	ts := httptest.NewServer(web.New(cfg))
	t.Cleanup(func() {
		ts.Close()
		w.Close()
		db.Close()
	})
	return &testServer{name: name, ts: ts, db: db}
}

type ingestResult struct {
	Accepted   int               `json:"accepted"`
	Duplicates int               `json:"duplicates"`
	Rejected   []json.RawMessage `json:"rejected"`
}

// post sends one body and requires a 200.
func (s *testServer) post(t *testing.T, b body) ingestResult {
	res, err := s.tryPost(b)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (s *testServer) tryPost(b body) (ingestResult, error) {
	req, err := http.NewRequest(http.MethodPost, s.ts.URL+"/api/v1/events", bytes.NewReader(b.data))
	if err != nil {
		return ingestResult{}, err
	}
	req.Header.Set("Content-Type", b.contentType)
	if b.encoding != "" {
		req.Header.Set("Content-Encoding", b.encoding)
	}
	resp, err := s.ts.Client().Do(req)
	if err != nil {
		return ingestResult{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return ingestResult{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return ingestResult{}, fmt.Errorf("POST %s (%s): got status %d, want 200: %s", b.kind, b.contentType, resp.StatusCode, data)
	}
	var res ingestResult
	if err := json.Unmarshal(data, &res); err != nil {
		return res, fmt.Errorf("POST: %v: %s", err, data)
	}
	if len(res.Rejected) > 0 {
		return res, fmt.Errorf("POST: got %d rejected, want 0: %s", len(res.Rejected), data)
	}
	return res, nil
}

// postConcurrently shuffles the events, cuts them into batches of 1 to 300
// in mixed encodings, and posts them from n clients at once.
func (s *testServer) postConcurrently(t *testing.T, events []json.RawMessage, rng *rand.Rand, n int) ingestResult {
	t.Helper()
	shuffled := slices.Clone(events)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	var bodies []body
	for len(shuffled) > 0 {
		size := min(len(shuffled), 1+rng.Intn(300))
		bodies = append(bodies, encodeBody(shuffled[:size], bodyKind(rng.Intn(int(bodyKinds)))))
		shuffled = shuffled[size:]
	}
	queue := make(chan body)
	var mu sync.Mutex
	var total ingestResult
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for b := range queue {
				res, err := s.tryPost(b)
				mu.Lock()
				if err != nil {
					t.Error(err)
				}
				total.Accepted += res.Accepted
				total.Duplicates += res.Duplicates
				mu.Unlock()
			}
		})
	}
	for _, b := range bodies {
		queue <- b
	}
	close(queue)
	wg.Wait()
	return total
}

type bodyKind int

const (
	bodyJSON bodyKind = iota
	bodyNDJSON
	bodyJSONGzip
	bodyNDJSONGzip
	bodyKinds
)

type body struct {
	kind        string
	contentType string
	encoding    string
	data        []byte
}

func encodeBody(events []json.RawMessage, kind bodyKind) body {
	var b body
	var buf bytes.Buffer
	switch kind {
	case bodyJSON, bodyJSONGzip:
		b.kind, b.contentType = "json", "application/json"
		js, _ := json.Marshal(map[string]any{"events": events})
		buf.Write(js)
	default:
		b.kind, b.contentType = "ndjson", "application/x-ndjson"
		for _, ev := range events {
			buf.Write(ev)
			buf.WriteByte('\n')
		}
	}
	b.data = buf.Bytes()
	if kind == bodyJSONGzip || kind == bodyNDJSONGzip {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(b.data)
		zw.Close()
		b.kind += "+gzip"
		b.encoding, b.data = "gzip", z.Bytes()
	}
	return b
}

// ---- snapshots ----

// snapshot is every read API answer, in a fixed order, as raw bytes.
type snapshot struct {
	names  []string
	parts  map[string][]byte
	counts struct{ executions, attempts, effects, findings int }
}

func (s *snapshot) add(name string, data []byte) {
	s.names = append(s.names, name)
	s.parts[name] = data
}

func (s *snapshot) part(name string) []byte { return s.parts[name] }

func (s *snapshot) totals() string {
	return fmt.Sprintf("%d executions, %d attempts, %d effects, %d findings",
		s.counts.executions, s.counts.attempts, s.counts.effects, s.counts.findings)
}

func (s *testServer) get(t *testing.T, path string) []byte {
	t.Helper()
	resp, err := s.ts.Client().Get(s.ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: got status %d, want 200: %s", path, resp.StatusCode, data)
	}
	return data
}

func (s *testServer) snapshot(t *testing.T) *snapshot {
	t.Helper()
	snap := &snapshot{parts: map[string][]byte{}}
	var ids []string
	for page, cursor := 0, ""; ; page++ {
		data := s.get(t, "/api/v1/executions?limit=1000&cursor="+url.QueryEscape(cursor))
		snap.add(fmt.Sprintf("executions page %d", page), data)
		var list struct {
			Executions []struct {
				ID string `json:"execution_id"`
			} `json:"executions"`
			Next string `json:"next"`
		}
		if err := json.Unmarshal(data, &list); err != nil {
			t.Fatal(err)
		}
		for _, x := range list.Executions {
			ids = append(ids, x.ID)
		}
		if list.Next == "" {
			break
		}
		cursor = list.Next
	}
	snap.counts.executions = len(ids)
	for _, id := range ids {
		data := s.get(t, "/api/v1/executions/"+url.PathEscape(id))
		snap.add("execution "+id, data)
		var d struct {
			Steps []struct {
				Attempts []json.RawMessage `json:"attempts"`
			} `json:"steps"`
		}
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatal(err)
		}
		for _, st := range d.Steps {
			snap.counts.attempts += len(st.Attempts)
		}
	}
	for page, cursor := 0, ""; ; page++ {
		data := s.get(t, "/api/v1/effects?limit=1000&cursor="+url.QueryEscape(cursor))
		snap.add(fmt.Sprintf("effects page %d", page), data)
		var list struct {
			Effects []json.RawMessage `json:"effects"`
			Next    string            `json:"next"`
		}
		if err := json.Unmarshal(data, &list); err != nil {
			t.Fatal(err)
		}
		snap.counts.effects += len(list.Effects)
		if list.Next == "" {
			break
		}
		cursor = list.Next
	}
	// Findings in pages of 20, so that the cursors are compared too, and
	// all of them together as "findings".
	var all []json.RawMessage
	for cursor := ""; ; {
		data := s.get(t, "/api/v1/findings?limit=20&cursor="+url.QueryEscape(cursor))
		snap.add("findings after "+cursor, data)
		var fs struct {
			Findings []json.RawMessage `json:"findings"`
			Next     string            `json:"next"`
		}
		if err := json.Unmarshal(data, &fs); err != nil {
			t.Fatal(err)
		}
		all = append(all, fs.Findings...)
		if cursor = fs.Next; cursor == "" {
			break
		}
	}
	data, err := json.Marshal(map[string]any{"findings": all})
	if err != nil {
		t.Fatal(err)
	}
	snap.add("findings", data)
	snap.counts.findings = len(all)
	return snap
}

// compareSnapshots reports every answer that differs, with the first
// differing bytes of each.
func compareSnapshots(t *testing.T, gotName string, got *snapshot, wantName string, want *snapshot) {
	t.Helper()
	if !slices.Equal(got.names, want.names) {
		t.Errorf("%s vs %s: got answers %v, want %v", gotName, wantName, got.names, want.names)
	}
	diffs := 0
	for _, name := range want.names {
		g, w := got.parts[name], want.parts[name]
		if bytes.Equal(g, w) {
			continue
		}
		diffs++
		if diffs > 5 {
			continue
		}
		i := 0
		for i < len(g) && i < len(w) && g[i] == w[i] {
			i++
		}
		from := max(0, i-300)
		t.Errorf("%s: %s differs from %s at byte %d:\n got: …%s…\nwant: …%s…",
			name, gotName, wantName, i, g[from:min(len(g), i+300)], w[from:min(len(w), i+300)])
	}
	if diffs > 5 {
		t.Errorf("%s vs %s: %d answers differ in all, the first 5 shown", gotName, wantName, diffs)
	}
}

// ---- the generated history ----

var histStart = time.Date(2026, 6, 30, 8, 0, 0, 0, time.UTC)

// historySeed is the seed of the history the tests post, and of
// testdata/history.ndjson.
const historySeed = 20260630

var updateHistory = flag.Bool("update-history", false, "rewrite testdata/history.ndjson from generateHistory")

// TestHistoryFixtureIsCurrent keeps testdata/history.ndjson (the history,
// one event a line, in the order generated) what generateHistory makes:
// cmd/oncetrace's tests post that file to real serve processes and cannot
// call the generator. -update-history rewrites it.
func TestHistoryFixtureIsCurrent(t *testing.T) {
	h := generateHistory(historySeed)
	want := encodeBody(h.events, bodyNDJSON).data
	const path = "testdata/history.ndjson"
	if *updateHistory {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: got %d bytes, want generateHistory(%d)'s %d (run go test ./web -run TestHistoryFixtureIsCurrent -update-history)",
			path, len(got), historySeed, len(want))
	}
}

// history is a generated trace workload: every event as JSON, in the order
// an agent fleet would have sent it.
type history struct {
	rng        *rand.Rand
	events     []json.RawMessage
	resends    int // events deliberately sent twice, identically
	nextID     int
	executions int
}

// distinctIDs counts the ids ingest gives the events, sent or derived.
func (h *history) distinctIDs(t *testing.T) int {
	t.Helper()
	ids := map[string]bool{}
	for _, raw := range h.events {
		ev, err := ingest.ParseEvent(raw, ingest.DefaultLimits)
		if err != nil {
			t.Fatalf("generated event %s: %v", raw, err)
		}
		ids[ev.ID] = true
	}
	return len(ids)
}

// emit adds an event; half get an explicit id, the others rely on the id
// derived from their content, and a few are sent twice, as an agent
// re-sending after a lost response would.
func (h *history) emit(ev map[string]any) {
	if h.rng.Intn(2) == 0 {
		h.nextID++
		ev["id"] = fmt.Sprintf("ev-%05d", h.nextID)
	}
	js, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	h.events = append(h.events, js)
	if h.rng.Intn(40) == 0 {
		h.events = append(h.events, js)
		h.resends++
	}
}

// ts writes a time as RFC 3339 with milliseconds, or now and then as Unix
// milliseconds, which the API also accepts.
func (h *history) ts(t time.Time) any {
	if h.rng.Intn(10) == 0 {
		return t.UnixMilli()
	}
	return t.Format("2006-01-02T15:04:05.000Z07:00")
}

func (h *history) ms(lo, hi int) time.Duration {
	return time.Duration(lo+h.rng.Intn(hi-lo+1)) * time.Millisecond
}

// genStep is the plan of one step of one execution.
type genStep struct {
	id, tool, provider string
	class              trace.EffectClass
	keying             string // "stable", "none" or "unstable"
	key                string
	args               map[string]any
}

// genAttempt is one planned attempt and what the world did during it.
type genAttempt struct {
	n             int
	start, end    time.Time
	outcome       trace.Outcome // "" for one that never ended
	dedup         bool
	key, worker   string
	delivered     bool   // the provider performed the side effect
	endKey        string // a key the end event carries that differs from the start's
	conflictLater trace.Outcome
}

func generateHistory(seed int64) *history {
	h := &history{rng: rand.New(rand.NewSource(seed))}
	const n = 60
	for i := range n {
		h.execution(i)
	}
	h.executions = n + 1 // exec_900 exists only through an orphan effect naming it
	h.orphans()
	return h
}

func (h *history) execution(i int) {
	r := h.rng
	id := fmt.Sprintf("exec_%03d", i)
	start := histStart.Add(time.Duration(i) * 7 * time.Minute)
	// A few executions share a start so that pagination ties are exercised.
	if i%20 == 7 {
		start = histStart.Add(time.Duration(i-1) * 7 * time.Minute)
	}
	crash := i%5 == 2
	noExecutionEvent := i%9 == 4
	conflictingEnd := i%13 == 6
	retention := i == 17 || i == 41
	collides := i == 10 || i == 11 || i == 30 || i == 31
	keyDrift := i%11 == 3

	if !noExecutionEvent {
		ev := map[string]any{"type": "execution", "execution_id": id, "name": []string{"billing-agent", "support-agent", "ops-bot"}[i%3],
			"status": "running", "started_at": h.ts(start), "labels": map[string]any{"customer": fmt.Sprintf("c%d", i%7)}}
		if r.Intn(2) == 0 {
			ev["idempotency_key"] = fmt.Sprintf("run_%03d", i)
		}
		h.emit(ev)
	}

	nSteps := 4 + r.Intn(6)
	crashAt := -1
	if crash {
		crashAt = 1 + r.Intn(nSteps-2)
	}
	worker := fmt.Sprintf("w%03d-a", i)
	cur := start.Add(h.ms(20, 200))
	var done []genStep // steps finished before the crash, for replay
	attempts := map[string][]genAttempt{}
	for j := range nSteps {
		s := h.planStep(id, j)
		if collides && j == 1 {
			// Two executions send one key for different intents.
			pair := i - i%2
			s.class, s.tool, s.provider, s.keying = trace.EffectWrite, "send_email", "mail-api", "stable"
			s.key = fmt.Sprintf("ik_shared_%03d", pair)
			s.args = map[string]any{"to": fmt.Sprintf("user%d@example.com", i), "template": "welcome"}
		}
		if j == crashAt && i%10 == 2 {
			s.class, s.tool, s.provider, s.keying = trace.EffectWrite, "send_email", "mail-api", "none"
		}
		if keyDrift && j == 0 {
			s.class, s.tool, s.provider, s.keying = trace.EffectWrite, "send_email", "mail-api", "stable"
			s.key = fmt.Sprintf("ik_%s_%s", id, s.id)
		}
		if retention && j == 1 {
			s.class, s.tool, s.provider, s.keying = trace.EffectWrite, "charge_card", "pay-api", "stable"
			s.key = fmt.Sprintf("ik_%s_charge", id)
		}

		if j == crashAt {
			// The worker starts the step and dies; nothing runs for a while;
			// a new worker replays the journal, then runs the step again.
			lost := genAttempt{n: 1, start: cur, key: s.attemptKey(1), worker: worker, delivered: r.Intn(2) == 0}
			h.emitAttempt(id, s, lost, true)
			attempts[s.id] = append(attempts[s.id], lost)
			cur = cur.Add(h.ms(20000, 90000))
			worker = fmt.Sprintf("w%03d-b", i)
			for _, d := range done {
				// Most steps are answered from the journal; a step whose
				// result was never recorded runs again.
				n := len(attempts[d.id]) + 1
				a := genAttempt{n: n, start: cur, end: cur.Add(h.ms(1, 20)), outcome: trace.OutcomeReplayed, key: d.attemptKey(n), worker: worker}
				if r.Intn(6) == 0 {
					a.end, a.outcome = cur.Add(h.ms(100, 900)), trace.OutcomeOK
				}
				h.emitAttempt(id, d, a, r.Intn(5) > 0)
				attempts[d.id] = append(attempts[d.id], a)
				cur = a.end.Add(h.ms(5, 50))
			}
		}

		tries := 1
		switch p := r.Intn(20); {
		case s.keying == "unstable":
			tries = 2 + r.Intn(2)
		case p < 11:
		case p < 17:
			tries = 2
		default:
			tries = 3
		}
		if s.class == trace.EffectUnsafe && tries > 2 {
			tries = 2
		}
		if retention && j == 1 {
			tries = 2
		}
		first := len(attempts[s.id]) + 1
		for k := first; k < first+tries; k++ {
			final := k == first+tries-1
			a := genAttempt{n: k, start: cur, key: s.attemptKey(k), worker: worker}
			a.end = a.start.Add(h.ms(40, 2500))
			switch {
			case !final && r.Intn(3) > 0:
				a.outcome = trace.OutcomeTimeout
				a.delivered = s.class != trace.EffectRead && r.Intn(2) == 0
			case !final:
				a.outcome = trace.OutcomeError
			case r.Intn(12) == 0:
				a.outcome = trace.OutcomeError
			default:
				a.outcome = trace.OutcomeOK
				prevDelivered := false
				for _, p := range attempts[s.id] {
					prevDelivered = prevDelivered || p.delivered
				}
				// The API answers a keyed retry of a delivered request from its key store.
				a.dedup = a.key != "" && prevDelivered && s.keying == "stable"
				a.delivered = s.class != trace.EffectRead && !a.dedup
			}
			if r.Intn(30) == 0 {
				// A second report of the end disagrees; the first one wins.
				a.conflictLater = map[trace.Outcome]trace.Outcome{trace.OutcomeOK: trace.OutcomeError,
					trace.OutcomeError: trace.OutcomeOK, trace.OutcomeTimeout: trace.OutcomeOK}[a.outcome]
			}
			if i == 31 && j == 1 {
				// The second user of the shared key never got through, so
				// the key's one keyed effect is exec_030's.
				a.outcome, a.dedup, a.delivered = trace.OutcomeError, false, false
			}
			if i == 11 && j == 1 && final {
				// The provider answers the second user of exec_010's key
				// from the response it stored for exec_010: suppressed.
				a.outcome, a.dedup, a.delivered = trace.OutcomeOK, true, false
			}
			if keyDrift && j == 0 {
				// A buggy client recomputes the key when it reports the end:
				// the attempt's events disagree on its key.
				a.endKey = a.key + "-end"
			}
			h.emitAttempt(id, s, a, a.endKey != "" || r.Intn(5) > 0)
			attempts[s.id] = append(attempts[s.id], a)
			cur = a.end.Add(h.ms(300, 3000)) // a backoff shorter than the gap threshold
			if retention && j == 1 && !final {
				cur = a.start.Add(25 * time.Hour)
			}
		}
		h.emitEffects(id, s, attempts[s.id], i)
		if i == 30 && j == 1 {
			// The provider also reports the shared-key step's delivery by
			// execution and step only: exec_030 sees two effects for the
			// step, exec_031 only the keyed one.
			a := attempts[s.id][len(attempts[s.id])-1]
			h.emit(map[string]any{"type": "effect", "provider": s.provider, "effect_id": "resent_" + id,
				"execution_id": id, "step_id": s.id, "at": h.ts(a.start.Add(h.ms(1, 30)))})
		}
		if j < crashAt || crashAt < 0 {
			done = append(done, s)
		}
	}

	if !noExecutionEvent && r.Intn(8) > 0 {
		status := []string{"completed", "completed", "completed", "failed", "cancelled"}[r.Intn(5)]
		end := cur.Add(h.ms(10, 500))
		h.emit(map[string]any{"type": "execution", "execution_id": id, "status": status, "ended_at": h.ts(end)})
		if conflictingEnd {
			other := map[string]string{"completed": "failed", "failed": "completed", "cancelled": "completed"}[status]
			h.emit(map[string]any{"type": "execution", "execution_id": id, "status": other, "ended_at": h.ts(end.Add(h.ms(1, 5000)))})
		}
	}
}

func (h *history) planStep(execID string, j int) genStep {
	r := h.rng
	s := genStep{id: fmt.Sprintf("step-%d", j+1), args: map[string]any{"n": j + 1, "ref": fmt.Sprintf("%s-%d", execID, j)}}
	switch p := r.Intn(20); {
	case p < 6:
		s.class, s.tool = trace.EffectRead, []string{"search_docs", "get_customer"}[r.Intn(2)]
	case p < 17:
		s.class = trace.EffectWrite
		switch r.Intn(3) {
		case 0:
			s.tool, s.provider = "send_email", "mail-api"
		case 1:
			s.tool, s.provider = "charge_card", "pay-api"
		default:
			s.tool = "create_ticket" // no provider: nothing to expect in an outbox
		}
	default:
		s.class, s.tool, s.provider = trace.EffectUnsafe, "wire_transfer", "bank-api"
	}
	switch p := r.Intn(10); {
	case s.class == trace.EffectRead || s.class == trace.EffectUnsafe:
		s.keying = "none"
	case p < 6:
		s.keying = "stable"
	case p < 8:
		s.keying = "none"
	default:
		s.keying = "unstable"
	}
	if s.keying == "stable" {
		s.key = fmt.Sprintf("ik_%s_%s", execID, s.id)
	}
	return s
}

// attemptKey is the key attempt n sends: derived from the intent when the
// step is keyed properly, from the attempt when it is not.
func (s genStep) attemptKey(n int) string {
	switch s.keying {
	case "stable":
		return s.key
	case "unstable":
		return fmt.Sprintf("ik_%s_%d_%s", s.id, n, s.args["ref"])
	}
	return ""
}

// emitAttempt sends an attempt as a start event and, when it ended, an end
// event; or, when split is false, as one event.
func (h *history) emitAttempt(execID string, s genStep, a genAttempt, split bool) {
	startEv := map[string]any{"type": "attempt", "execution_id": execID, "step_id": s.id, "attempt": a.n,
		"tool": s.tool, "effect": string(s.class), "args": s.args, "worker": a.worker, "started_at": h.ts(a.start)}
	if s.provider != "" {
		startEv["provider"] = s.provider
	}
	if a.key != "" {
		startEv["idempotency_key"] = a.key
	}
	if a.outcome == "" {
		h.emit(startEv)
		return
	}
	endEv := map[string]any{"type": "attempt", "execution_id": execID, "step_id": s.id, "attempt": a.n,
		"ended_at": h.ts(a.end), "outcome": string(a.outcome)}
	switch a.outcome {
	case trace.OutcomeOK, trace.OutcomeReplayed:
		endEv["result"] = map[string]any{"status": "done", "ref": fmt.Sprintf("%s/%s/%d", execID, s.id, a.n)}
	case trace.OutcomeTimeout:
		endEv["error"] = "network timeout"
	case trace.OutcomeError:
		endEv["error"] = "upstream returned 500"
	}
	if a.dedup {
		endEv["deduplicated"] = true
	}
	if a.endKey != "" {
		endEv["idempotency_key"] = a.endKey
	}
	if split {
		h.emit(startEv)
		h.emit(endEv)
	} else {
		for k, v := range startEv {
			if _, ok := endEv[k]; !ok {
				endEv[k] = v
			}
		}
		h.emit(endEv)
	}
	if a.conflictLater != "" {
		h.emit(map[string]any{"type": "attempt", "execution_id": execID, "step_id": s.id, "attempt": a.n,
			"ended_at": h.ts(a.end.Add(h.ms(1, 3000))), "outcome": string(a.conflictLater)})
	}
}

// emitEffects reports what the step's provider actually did: one effect per
// attempt that delivered, matched by key when the attempt sent one, by
// execution and step otherwise (or both); now and then none at all
// although the step ended ok, and now and then one reported twice.
func (h *history) emitEffects(execID string, s genStep, attempts []genAttempt, i int) {
	if s.provider == "" {
		return
	}
	r := h.rng
	for _, a := range attempts {
		if !a.delivered || (a.outcome == trace.OutcomeOK && r.Intn(14) == 0) {
			continue
		}
		ev := map[string]any{"type": "effect", "provider": s.provider, "effect_id": fmt.Sprintf("%s_%s_%s_%d", s.provider, execID, s.id, a.n),
			"at": h.ts(a.start.Add(h.ms(1, 30)))}
		// An effect keyed by a disagreeing end key names nothing else, so
		// that whether it is an orphan depends on which key the merge keeps.
		named := (a.key == "" || r.Intn(2) == 0 || i == 10) && a.endKey == ""
		if a.key != "" {
			ev["idempotency_key"] = cmp.Or(a.endKey, a.key)
		}
		if named {
			ev["execution_id"], ev["step_id"] = execID, s.id
		}
		if r.Intn(3) == 0 {
			ev["target"] = fmt.Sprintf("user%d@example.com", i)
		}
		if (i+a.n)%2 == 0 { // not from r: the rest of the history stays as it was
			// What was asked, as a feed fingerprints it: one per tool, so
			// that two steps of one run calling one tool ask the same.
			ev["fingerprint"] = "mail:" + s.tool
		}
		h.emit(ev)
		if r.Intn(8) == 0 {
			// The outbox feed reports the same effect again, with less detail.
			h.emit(map[string]any{"type": "effect", "provider": s.provider, "effect_id": ev["effect_id"], "at": ev["at"]})
		}
	}
}

// orphans are effects no attempt explains: a key nobody sent, a step that
// never ran, an execution never traced.
func (h *history) orphans() {
	at := histStart.Add(3 * time.Hour)
	for k := range 8 {
		ev := map[string]any{"type": "effect", "provider": []string{"mail-api", "pay-api"}[k%2],
			"effect_id": fmt.Sprintf("orphan_%d", k), "at": h.ts(at.Add(time.Duration(k) * time.Minute))}
		switch k % 4 {
		case 0:
			ev["idempotency_key"] = fmt.Sprintf("ik_unknown_%d", k)
		case 1:
			ev["execution_id"], ev["step_id"] = "exec_000", "step-99"
		case 2:
			ev["execution_id"], ev["step_id"] = "exec_900", "step-1"
		default:
			ev["target"] = "nobody@example.com"
		}
		h.emit(ev)
	}
}
