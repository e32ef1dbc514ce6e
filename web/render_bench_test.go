package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

// BenchmarkExecutionPage renders the execution page of one execution of
// 10,000 attempts, served from a real store, and reports the HTML size.
// Two shapes: 100 steps of 100 attempts (every lane drawn, compact bars),
// and 1,000 steps of 10 (every lane on the page, in collapsed groups).
func BenchmarkExecutionPage(b *testing.B) {
	for _, shape := range []struct{ steps, attempts int }{{100, 100}, {1000, 10}} {
		b.Run(fmt.Sprintf("%dx%d", shape.steps, shape.attempts), func(b *testing.B) {
			srv := benchServer(b, shape.steps, shape.attempts)
			req := httptest.NewRequest(http.MethodGet, "/executions/big", nil)
			var size int
			for b.Loop() {
				rec := httptest.NewRecorder()
				srv.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("GET /executions/big: got %d, want 200", rec.Code)
				}
				size = rec.Body.Len()
			}
			b.ReportMetric(float64(size), "html-bytes")
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/page")
		})
	}
}

func benchServer(b *testing.B, steps, attempts int) http.Handler {
	b.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, b.TempDir()+"/bench.db", sqlite.SyncNormal)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	w := writer.New(db, writer.DefaultConfig)
	b.Cleanup(w.Close)
	start := time.Date(2026, 6, 30, 14, 0, 0, 0, time.UTC)
	var events []trace.Event
	outcomes := []string{"timeout", "error", "ok"}
	for s := 0; s < steps; s++ {
		for n := 1; n <= attempts; n++ {
			at := start.Add(time.Duration(s*attempts+n) * 200 * time.Millisecond)
			outcome := outcomes[0]
			if n == attempts {
				outcome = "ok"
			} else {
				outcome = outcomes[n%2]
			}
			raw := fmt.Sprintf(`{"type":"attempt","execution_id":"big","step_id":"step-%04d","attempt":%d,"tool":"send_invoice_email","effect":"write","idempotency_key":"ik_%d","args":{"to":"x%d@acme.dev"},"worker":"w1","started_at":%q,"ended_at":%q,"outcome":%q}`,
				s, n, s, s, at.Format(time.RFC3339Nano), at.Add(150*time.Millisecond).Format(time.RFC3339Nano), outcome)
			ev, err := ingest.ParseEvent([]byte(raw), ingest.DefaultLimits)
			if err != nil {
				b.Fatal(err)
			}
			events = append(events, ev)
		}
		raw := fmt.Sprintf(`{"type":"effect","provider":"mail-api","effect_id":"msg_%d","idempotency_key":"ik_%d","at":%q}`, s, s,
			start.Add(time.Duration(s*attempts+1)*200*time.Millisecond).Format(time.RFC3339Nano))
		ev, err := ingest.ParseEvent([]byte(raw), ingest.DefaultLimits)
		if err != nil {
			b.Fatal(err)
		}
		events = append(events, ev)
	}
	for i := 0; i < len(events); i += 1000 {
		if _, err := w.Write(ctx, events[i:min(i+1000, len(events))]); err != nil {
			b.Fatal(err)
		}
	}
	return web.New(web.Config{DB: db, Writer: w, Limits: ingest.DefaultLimits, Analysis: trace.DefaultConfig})
}
