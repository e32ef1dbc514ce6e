package writer_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
)

// benchWriterBatch returns 100 events with ids unique to batch i: ten
// executions, each a start, three attempts (start and end), two effects and
// an end.
func benchWriterBatch(b *testing.B, i int) []trace.Event {
	b.Helper()
	var events []trace.Event
	add := func(format string, args ...any) {
		ev, err := ingest.ParseEvent(fmt.Appendf(nil, format, args...), ingest.DefaultLimits)
		if err != nil {
			b.Fatal(err)
		}
		events = append(events, ev)
	}
	for x := range 10 {
		exec := fmt.Sprintf("exec_%d_%d", i, x)
		add(`{"type":"execution","id":"%s_start","execution_id":"%s","name":"billing-agent","status":"running","started_at":"2026-06-30T14:02:11Z"}`, exec, exec)
		for s := 1; s <= 3; s++ {
			add(`{"type":"attempt","id":"%s_%d_a","execution_id":"%s","step_id":"step-%d","attempt":1,"tool":"send_invoice_email",
				"effect":"write","provider":"mail-api","idempotency_key":"ik_%s_%d","args":{"to":"jordan@acme.dev"},"started_at":"2026-06-30T14:02:1%dZ"}`,
				exec, s, exec, s, exec, s, s)
			add(`{"type":"attempt","id":"%s_%d_b","execution_id":"%s","step_id":"step-%d","attempt":1,
				"started_at":"2026-06-30T14:02:1%dZ","ended_at":"2026-06-30T14:02:1%d.5Z","outcome":"ok","result":{"status":"sent"}}`,
				exec, s, exec, s, s, s)
		}
		for s := 1; s <= 2; s++ {
			add(`{"type":"effect","id":"%s_%d_f","provider":"mail-api","effect_id":"msg_%s_%d","idempotency_key":"ik_%s_%d",
				"execution_id":"%s","step_id":"step-%d","at":"2026-06-30T14:02:1%d.2Z"}`, exec, s, exec, s, exec, s, exec, s, s)
		}
		add(`{"type":"execution","id":"%s_end","execution_id":"%s","status":"completed","ended_at":"2026-06-30T14:02:20Z"}`, exec, exec)
	}
	return events
}

// BenchmarkWriterBatch100 is one 100-event request through the writer:
// insert, refold, re-audit, commit. The database grows as b.N does, as a
// server's would.
func BenchmarkWriterBatch100(b *testing.B) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), sqlite.SyncNormal)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	w := writer.New(db, writer.DefaultConfig)
	defer w.Close()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		events := benchWriterBatch(b, i)
		i++
		b.StartTimer()
		res, err := w.Write(ctx, events)
		if err != nil {
			b.Fatal(err)
		}
		if res.Accepted != len(events) {
			b.Fatalf("accepted: got %d, want %d", res.Accepted, len(events))
		}
	}
	b.ReportMetric(float64(i*100)/b.Elapsed().Seconds(), "events/s")
}
