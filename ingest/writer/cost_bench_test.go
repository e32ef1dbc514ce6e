package writer_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/postgres"
	"github.com/oncetrace/oncetrace/store/postgres/pgtest"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
)

// executionStream returns the n events of one execution as an agent sends
// them: its start, then per step an attempt's start, its end and the
// effect it caused, every third step retried once after a timeout.
func executionStream(b *testing.B, exec string, n int) []trace.Event {
	b.Helper()
	events := make([]trace.Event, 0, n)
	add := func(format string, args ...any) {
		if len(events) == n {
			return
		}
		ev, err := ingest.ParseEvent(fmt.Appendf(nil, format, args...), ingest.DefaultLimits)
		if err != nil {
			b.Fatal(err)
		}
		events = append(events, ev)
	}
	at := func(s, ms int) string {
		return time.Date(2026, 6, 30, 14, 0, 0, 0, time.UTC).Add(time.Duration(s)*time.Second + time.Duration(ms)*time.Millisecond).Format(time.RFC3339Nano)
	}
	add(`{"type":"execution","id":"%s_start","execution_id":"%s","name":"billing-agent","status":"running","started_at":"%s"}`, exec, exec, at(0, 0))
	for s := 1; len(events) < n; s++ {
		tries := 1
		if s%3 == 0 {
			tries = 2
		}
		for try := 1; try <= tries; try++ {
			add(`{"type":"attempt","id":"%s_%d_%d_a","execution_id":"%s","step_id":"step-%d","attempt":%d,"tool":"send_invoice_email",
				"effect":"write","provider":"mail-api","idempotency_key":"ik_%s_%d","worker":"w1","args":{"to":"jordan@acme.dev"},"started_at":"%s"}`,
				exec, s, try, exec, s, try, exec, s, at(s, 10*try))
			outcome := `"outcome":"ok","result":{"status":"sent"}`
			if try < tries {
				outcome = `"outcome":"timeout","error":"no answer in 10s"`
			}
			add(`{"type":"attempt","id":"%s_%d_%d_b","execution_id":"%s","step_id":"step-%d","attempt":%d,
				"started_at":"%s","ended_at":"%s",%s}`, exec, s, try, exec, s, try, at(s, 10*try), at(s, 10*try+5), outcome)
		}
		add(`{"type":"effect","id":"%s_%d_f","provider":"mail-api","effect_id":"msg_%s_%d","idempotency_key":"ik_%s_%d",
			"execution_id":"%s","step_id":"step-%d","at":"%s"}`, exec, s, exec, s, exec, s, exec, s, at(s, 30))
	}
	return events
}

// BenchmarkEventCost appends the events of executions one request at a
// time, as an agent reporting each step does, and reports what the 10th
// and the 1000th event of an execution cost (each the mean of the ten
// events around it) and their ratio: a commit must cost the same however
// long its execution already is. Each iteration fills a long execution to
// just before its 1000th event, then writes the events around its 1000th
// and the first events of a new one by turns, so that both are measured
// under the same load.
func BenchmarkEventCost(b *testing.B) {
	const early, late, window = 10, 1000, 10
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"), sqlite.SyncNormal)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	w := writer.New(db, writer.DefaultConfig)
	defer w.Close()
	// cost is what one event cost: wall time, and the process's CPU time,
	// which other processes on the machine do not stretch.
	type cost struct{ wall, cpu time.Duration }
	cpuKnown := true
	write := func(ev trace.Event) cost {
		cpu0, ok0 := processCPU()
		start := time.Now()
		if _, err := w.Write(ctx, []trace.Event{ev}); err != nil {
			b.Fatal(err)
		}
		wall := time.Since(start)
		cpu1, ok1 := processCPU()
		cpuKnown = cpuKnown && ok0 && ok1
		return cost{wall, cpu1 - cpu0}
	}
	var earlyCost, lateCost cost
	add := func(sum *cost, c cost) { sum.wall += c.wall; sum.cpu += c.cpu }
	i := 0
	// The timer runs throughout, so that an iteration lasts long enough
	// for `go test -bench .` to run one or two: the figures are the
	// metrics below, not ns/op.
	for b.Loop() {
		long := executionStream(b, fmt.Sprintf("long_%d", i), late+window/2)
		short := executionStream(b, fmt.Sprintf("short_%d", i), early+window/2)
		i++
		for _, ev := range long[:late-window/2] {
			write(ev)
		}
		for n := range window + early - window/2 {
			if c := write(short[n]); n >= early-window/2 {
				add(&earlyCost, c)
			}
			if n < window {
				add(&lateCost, write(long[late-window/2+n]))
			}
		}
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(i*window) }
	b.ReportMetric(per(earlyCost.wall), "ns/event@10")
	b.ReportMetric(per(lateCost.wall), "ns/event@1000")
	b.ReportMetric(per(lateCost.wall)/per(earlyCost.wall), "wall-ratio@1000/10")
	if cpuKnown {
		b.ReportMetric(per(earlyCost.cpu), "cpu-ns/event@10")
		b.ReportMetric(per(lateCost.cpu), "cpu-ns/event@1000")
		b.ReportMetric(per(lateCost.cpu)/per(earlyCost.cpu), "ratio@1000/10")
	}
}

// BenchmarkOTLPIntoLargeExecution commits one OTLP request of 20,000 spans
// into an execution that already holds 20,000, and reports how long the
// request took from the writer's queue to its commit, and the process's
// CPU time meanwhile.
func BenchmarkOTLPIntoLargeExecution(b *testing.B) {
	otlpIntoLargeExecution(b, func(i int) *store.DB {
		db, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), fmt.Sprintf("bench%d.db", i)), sqlite.SyncNormal)
		if err != nil {
			b.Fatal(err)
		}
		return db
	})
}

// BenchmarkOTLPIntoLargeExecutionPostgres is the same on PostgreSQL, a
// throwaway cluster (pgtest); the CPU time is this process's only, not
// the server's.
func BenchmarkOTLPIntoLargeExecutionPostgres(b *testing.B) {
	cluster, err := pgtest.Start()
	if err != nil {
		b.Skip(err)
	}
	b.Cleanup(cluster.Stop) // after the databases' own cleanups drop them
	otlpIntoLargeExecution(b, func(int) *store.DB {
		db, err := postgres.Open(context.Background(), cluster.NewDatabase(b))
		if err != nil {
			b.Fatal(err)
		}
		return db
	})
}

// otlpIntoLargeExecution runs BenchmarkOTLPIntoLargeExecution on the
// fresh, empty databases open returns.
func otlpIntoLargeExecution(b *testing.B, open func(i int) *store.DB) {
	const spans = 20000
	ctx := context.Background()
	limits := defaultOTLPConfig
	limits.Limits.Events = 4 * spans
	var took, cpu time.Duration
	cpuKnown := true
	i := 0
	for b.Loop() {
		b.StopTimer()
		db := open(i)
		w := writer.New(db, writer.DefaultConfig)
		for part := range 2 {
			res := ingest.MapOTLP(largeExecutionSpans(uint64(part), spans), limits)
			if res.Rejected != 0 {
				b.Fatalf("rejected %d: %v", res.Rejected, res.Reasons)
			}
			if part == 1 {
				b.StartTimer()
			}
			cpu0, ok0 := processCPU()
			start := time.Now()
			if _, err := w.Write(ctx, res.Events); err != nil {
				b.Fatal(err)
			}
			if part == 1 {
				took += time.Since(start)
				cpu1, ok1 := processCPU()
				cpu += cpu1 - cpu0
				cpuKnown = cpuKnown && ok0 && ok1
			}
		}
		b.StopTimer()
		w.Close()
		db.Close()
		i++
		b.StartTimer()
	}
	b.ReportMetric(took.Seconds()/float64(i), "s/20k-span-commit")
	if cpuKnown {
		b.ReportMetric(cpu.Seconds()/float64(i), "cpu-s/20k-span-commit")
	}
}

// largeExecutionSpans returns part of one long execution: traces of ten
// spans (a root, two model calls, three reads, two writes each retried
// once), every span naming the execution "large", each trace's tool calls
// their own steps (their arguments name the trace's customer).
func largeExecutionSpans(part uint64, spans int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "billing-agent")
	out := rs.ScopeSpans().AppendEmpty().Spans()
	base := time.Date(2026, 6, 30, 14, 0, 0, 0, time.UTC)
	for t := range uint64(spans / 10) {
		n := part<<32 | t
		var traceID pcommon.TraceID
		for i := range 8 {
			traceID[8+i] = byte(n >> (8 * (7 - i)))
		}
		traceID[0] = 0x0b
		seq := byte(0)
		at := base.Add(time.Duration(n&0xffffffff+part*uint64(spans))*time.Second + 0)
		add := func(parent pcommon.SpanID, name string, d time.Duration) ptrace.Span {
			seq++
			sp := out.AppendEmpty()
			sp.SetTraceID(traceID)
			sp.SetSpanID(pcommon.SpanID{0x5e, byte(n >> 32), byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n), 0, seq})
			sp.SetParentSpanID(parent)
			sp.SetName(name)
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(at))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(d)))
			sp.Attributes().PutStr("oncetrace.execution.id", "large")
			at = at.Add(d + time.Millisecond)
			return sp
		}
		root := add(pcommon.SpanID{}, "invoke_agent billing-agent", 0)
		root.Attributes().PutStr("gen_ai.operation.name", "invoke_agent")
		for range 2 {
			chat := add(root.SpanID(), "chat gpt-4o", 80*time.Millisecond)
			chat.Attributes().PutStr("gen_ai.operation.name", "chat")
			chat.Attributes().PutInt("gen_ai.usage.input_tokens", 1200)
		}
		for r := range 3 {
			read := add(root.SpanID(), "execute_tool lookup_customer", 4*time.Millisecond)
			a := read.Attributes()
			a.PutStr("gen_ai.operation.name", "execute_tool")
			a.PutStr("gen_ai.tool.name", "lookup_customer")
			a.PutStr("gen_ai.tool.call.id", fmt.Sprintf("call_read_%d_%d", n, r))
			a.PutStr("gen_ai.tool.call.arguments", fmt.Sprintf(`{"customer":"acme_%d","page":%d}`, n, r))
		}
		for wr := range 2 {
			for attempt := 1; attempt <= 2; attempt++ {
				sp := add(root.SpanID(), "execute_tool send_invoice_email", 12*time.Millisecond)
				a := sp.Attributes()
				a.PutStr("gen_ai.operation.name", "execute_tool")
				a.PutStr("gen_ai.tool.name", "send_invoice_email")
				a.PutStr("gen_ai.tool.call.id", fmt.Sprintf("call_write_%d_%d", n, wr))
				a.PutStr("gen_ai.tool.call.arguments", fmt.Sprintf(`{"to":"jordan@acme.dev","invoice":"%d_%d"}`, n, wr))
				a.PutStr("oncetrace.idempotency.key", fmt.Sprintf("ik_%d_%d", n, wr))
				a.PutStr("oncetrace.effect", "write")
				a.PutStr("oncetrace.provider", "mail-api")
				if attempt == 1 {
					sp.Status().SetCode(ptrace.StatusCodeError)
					a.PutStr("oncetrace.outcome", "timeout")
					continue
				}
				ev := sp.Events().AppendEmpty()
				ev.SetName("oncetrace.effect")
				ev.SetTimestamp(sp.StartTimestamp())
				ev.Attributes().PutStr("oncetrace.effect.provider", "mail-api")
				ev.Attributes().PutStr("oncetrace.effect.id", fmt.Sprintf("msg_%d_%d", n, wr))
			}
		}
		root.SetEndTimestamp(pcommon.NewTimestampFromTime(at))
	}
	return td
}
