package ingest_test

import (
	"testing"

	"github.com/oncetrace/oncetrace/ingest"
)

// benchAttemptEvent is a typical attempt end event: args, result, key, times.
const benchAttemptEvent = `{"type":"attempt","id":"evt_2","execution_id":"exec_01H8","step_id":"step-4",
 "attempt":1,"tool":"send_invoice_email","effect":"write","provider":"mail-api",
 "args":{"to":"jordan@acme.dev","subject":"Your June invoice","amount_cents":12900},
 "idempotency_key":"ik_a94a0b1d","worker":"pid-4121",
 "started_at":"2026-06-30T14:02:11.200Z","ended_at":"2026-06-30T14:02:21.200Z",
 "outcome":"ok","deduplicated":false,"result":{"status":"sent","message_id":"msg_41bcc7"}}`

func BenchmarkParseEvent(b *testing.B) {
	raw := []byte(benchAttemptEvent)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ingest.ParseEvent(raw, ingest.DefaultLimits); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
