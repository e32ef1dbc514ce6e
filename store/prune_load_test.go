package store_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/derive"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

// loadOldExecutions stores n executions started 40 days before now, each
// with a keyed write attempt carrying a few hundred bytes of arguments and
// its effect, and one recent execution for every 50 of them that sent the
// same key (so the prune has peers to re-audit). It writes through the
// writer in large batches, as a busy server would have.
func loadOldExecutions(t *testing.T, w *writer.Writer, now time.Time, n int) {
	t.Helper()
	old, recent := now.Add(-40*24*time.Hour), now.Add(-24*time.Hour)
	body := bytes.Repeat([]byte("lorem ipsum "), 30)
	var batch []trace.Event
	add := func(format string, args ...any) {
		ev, err := ingest.ParseEvent(fmt.Appendf(nil, format, args...), ingest.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, ev)
	}
	flush := func() {
		if _, err := w.Write(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
		batch = batch[:0]
	}
	for i := range n {
		x, start := fmt.Sprintf("old_%06d", i), old.Add(time.Duration(i)*time.Second)
		add(`{"type":"execution","execution_id":%q,"name":"billing-agent","status":"completed","started_at":%q,"ended_at":%q}`,
			x, stamp(start), stamp(start.Add(3*time.Second)))
		add(`{"type":"attempt","execution_id":%q,"step_id":"send","attempt":1,"effect":"write","provider":"mail-api","idempotency_key":"ik_%d",`+
			`"args":{"to":"u%d@example.com","body":%q},"started_at":%q,"ended_at":%q,"outcome":"ok"}`,
			x, i, i, body, stamp(start.Add(time.Second)), stamp(start.Add(2*time.Second)))
		add(`{"type":"effect","provider":"mail-api","effect_id":"m_%d","idempotency_key":"ik_%d","execution_id":%q,"step_id":"send","at":%q}`,
			i, i, x, stamp(start.Add(1500*time.Millisecond)))
		if i%50 == 0 {
			add(`{"type":"execution","execution_id":"new_%06d","status":"completed","started_at":%q}`, i, stamp(recent.Add(time.Duration(i)*time.Second)))
			add(`{"type":"attempt","execution_id":"new_%06d","step_id":"send","attempt":1,"effect":"write","provider":"mail-api","idempotency_key":"ik_%d",`+
				`"started_at":%q,"ended_at":%q,"outcome":"ok","deduplicated":true}`, i, i, stamp(recent.Add(time.Duration(i)*time.Second)),
				stamp(recent.Add(time.Duration(i)*time.Second+time.Millisecond)))
		}
		if len(batch) >= 4000 {
			flush()
		}
	}
	flush()
}

// TestPruneWhileIngesting prunes a large database while clients keep
// posting over HTTP, and shows that every post succeeds, that posts are
// committed between the prune's transactions, that each transaction is
// small, and that the file shrinks.
func TestPruneWhileIngesting(t *testing.T) {
	sqliteOnly(t) // it measures the file and its WAL
	n := 20000
	if testing.Short() || raceEnabled {
		n = 2000
	}
	ctx := context.Background()
	now := time.Now().UTC()
	db, w := openDB(t)
	loadStart := time.Now()
	loadOldExecutions(t, w, now, n)
	loaded := time.Since(loadStart)
	srv := httptest.NewServer(web.New(web.Config{DB: db, Writer: w, Limits: ingest.DefaultLimits, Analysis: trace.DefaultConfig}))
	defer srv.Close()
	sizes := func() store.FileSizes {
		sz, err := db.FileSizes()
		if err != nil {
			t.Fatal(err)
		}
		return sz
	}
	// Everything loaded into the file itself, so that its size is the
	// database's and not partly the WAL's.
	if _, err := rawDB(t, db).Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	before := sizes()

	type post struct {
		status int
		done   time.Time
		took   time.Duration
		err    error
	}
	var (
		mu      sync.Mutex
		posts   []post
		batches []store.PruneBatch
		ends    []time.Time // when each executions batch ended
	)
	// Clients post until the delete phase is over, 250 posts each at most:
	// what they add must not hide whether the prune gave space back.
	stop := make(chan struct{})
	var stopOnce sync.Once
	var clients sync.WaitGroup
	for c := range 4 {
		clients.Add(1)
		go func() {
			defer clients.Done()
			for i := range 250 {
				select {
				case <-stop:
					return
				default:
				}
				x := fmt.Sprintf("live_%d_%d", c, i)
				ts := stamp(time.Now().UTC())
				body := fmt.Sprintf(`{"events":[{"type":"execution","execution_id":%q,"status":"running","started_at":%q},`+
					`{"type":"attempt","execution_id":%q,"step_id":"s","attempt":1,"effect":"read","started_at":%q}]}`, x, ts, x, ts)
				sent := time.Now()
				resp, err := http.Post(srv.URL+"/api/v1/events", "application/json", bytes.NewBufferString(body))
				p := post{err: err, done: time.Now(), took: time.Since(sent)}
				if err == nil {
					p.status = resp.StatusCode
					resp.Body.Close()
				}
				mu.Lock()
				posts = append(posts, p)
				mu.Unlock()
			}
		}()
	}
	res, err := db.Prune(ctx, store.PruneOptions{Before: now.Add(-30 * 24 * time.Hour), Interleave: true, Reaudit: derive.Reaudit(trace.DefaultConfig),
		OnBatch: func(b store.PruneBatch) {
			mu.Lock()
			defer mu.Unlock()
			batches = append(batches, b)
			if b.Phase == "executions" {
				ends = append(ends, time.Now())
			} else {
				stopOnce.Do(func() { close(stop) })
			}
		}})
	stopOnce.Do(func() { close(stop) })
	clients.Wait()
	if err != nil {
		t.Fatal(err)
	}
	after := sizes()

	if res.Executions != int64(n) {
		t.Errorf("executions deleted: got %d, want %d", res.Executions, n)
	}
	if res.Reaudited != int64(n/50) {
		t.Errorf("re-audited: got %d, want the %d recent executions that shared a key", res.Reaudited, n/50)
	}
	failed := 0
	for _, p := range posts {
		if p.err != nil || p.status != http.StatusOK {
			failed++
			if failed <= 3 {
				t.Errorf("a POST during the prune: got %d %v, want 200", p.status, p.err)
			}
		}
	}
	// Interleaving: posts answered after the prune's first transaction
	// and before its last, and transactions of the prune between them.
	between := 0
	for _, p := range posts {
		if p.done.After(ends[0]) && p.done.Before(ends[len(ends)-1]) {
			between++
		}
	}
	if len(ends) < 10 || between < 10 {
		t.Errorf("got %d posts answered between the first and the last of %d delete transactions, want the prune in many transactions with ingest between them",
			between, len(ends))
	}
	var holds, works []time.Duration
	biggest := 0
	for _, b := range batches {
		holds = append(holds, b.Hold)
		works = append(works, b.Work)
		if b.Phase == "executions" {
			biggest = max(biggest, b.Items)
		}
	}
	slices.Sort(holds)
	slices.Sort(works)
	p50, p90, p99 := holds[len(holds)/2], holds[len(holds)*9/10], holds[len(holds)*99/100]
	var tooks []time.Duration
	for _, p := range posts {
		tooks = append(tooks, p.took)
	}
	slices.Sort(tooks)
	t.Logf("POST latency during the prune: p50 %v p99 %v max %v", tooks[len(tooks)/2], tooks[len(tooks)*99/100], tooks[len(tooks)-1])
	t.Logf("work before the commit: p50 %v p90 %v p99 %v max %v", works[len(works)/2], works[len(works)*9/10], works[len(works)*99/100], works[len(works)-1])
	t.Logf("%d executions (%d events) loaded in %v; pruned in %v: %d transactions, hold p50 %v p90 %v p99 %v max %v, largest delete batch %d executions; %d posts (%d answered during the delete phase), %d failed",
		n, 3*n+2*(n/50), loaded.Round(time.Millisecond), res.Duration.Round(time.Millisecond), len(batches), p50, p90, p99, res.MaxHold, biggest, len(posts), between, failed)
	slowest := slices.Clone(batches)
	slices.SortFunc(slowest, func(a, b store.PruneBatch) int { return int(b.Hold - a.Hold) })
	for _, b := range slowest[:min(5, len(slowest))] {
		t.Logf("slow transaction: %+v", b)
	}
	t.Logf("size: %d pages' bytes -> %d; file %d -> %d bytes (WAL %d -> %d); vacuum %s",
		res.BytesBefore, res.BytesAfter, before.Main, after.Main, before.WAL, after.WAL, res.Vacuum)
	// Batch sizes adapt to the time transactions take: after one whose
	// work took longer than half of MaxHold, the next of its phase is
	// smaller. (How long a transaction takes is the machine's; how the
	// prune answers it is the prune's, and is what this asserts. A commit
	// that runs SQLite's automatic checkpoint, as ingest's commits also do,
	// adds to the hold on a slow disk; the figures above are logged.)
	for i := 1; i < len(batches); i++ {
		prev, cur := batches[i-1], batches[i]
		if prev.Phase == cur.Phase && prev.Work > store.DefaultPruneMaxHold/2 && prev.Items > 1 && cur.Items >= prev.Items {
			t.Errorf("transaction %d (%s) worked %v with %d items, and the next had %d: want fewer", i-1, prev.Phase, prev.Work, prev.Items, cur.Items)
		}
	}
	if p50 > store.DefaultPruneMaxHold {
		t.Errorf("hold of the prune's transactions: got a median of %v, want at most %v", p50, store.DefaultPruneMaxHold)
	}
	if res.Vacuum != "incremental" {
		t.Errorf("vacuum: got %q, want incremental (a new file)", res.Vacuum)
	}
	if res.BytesAfter > res.BytesBefore/4 {
		t.Errorf("database size: got %d bytes after the prune, want under a quarter of the %d before", res.BytesAfter, res.BytesBefore)
	}
	if after.Main > before.Main/4 {
		t.Errorf("file size: got %d bytes after the prune, want under a quarter of the %d before", after.Main, before.Main)
	}
	if st, err := os.Stat(db.Path); err != nil || st.Size() != after.Main {
		t.Fatalf("stat: %v", err)
	}
	// What was posted during the prune is all there.
	list, _, err := db.ListExecutions(ctx, store.ExecutionFilter{Q: "live_", Limit: store.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	if want := min(len(posts), store.MaxPageSize); len(list) != want {
		t.Errorf("executions posted during the prune: got %d listed, want %d", len(list), want)
	}
}
