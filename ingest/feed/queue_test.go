package feed

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/trace"
)

func queuedEffect(i int) trace.Effect {
	return trace.Effect{Provider: "stripe", ID: fmt.Sprintf("ch_%03d", i), IdempotencyKey: fmt.Sprintf("ik_%d", i),
		Target: "cus_1", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7",
		At: time.Date(2026, 6, 30, 14, 0, i, 0, time.UTC)}
}

func effectSize(t *testing.T, e trace.Effect) int64 {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(b))
}

// drainIDs pops every queued effect, oldest first.
func drainIDs(t *testing.T, q *Queue) []string {
	t.Helper()
	var ids []string
	for {
		seq, e, ok := q.Oldest()
		if !ok {
			return ids
		}
		ids = append(ids, e.ID)
		if err := q.Remove(seq); err != nil {
			t.Fatal(err)
		}
	}
}

func TestQueueIsFIFOAndSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	q, err := OpenQueue(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := q.Push(queuedEffect(i)); err != nil {
			t.Fatal(err)
		}
	}
	seq, first, ok := q.Oldest()
	if !ok || !reflect.DeepEqual(first, queuedEffect(0)) {
		t.Fatalf("Oldest: got %+v %v, want %+v", first, ok, queuedEffect(0))
	}
	if err := q.Remove(seq); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	// A write a crash cut short is cleaned up, not read.
	if err := os.WriteFile(filepath.Join(dir, ".tmp-123"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}

	q, err = OpenQueue(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if q.Len() != 4 {
		t.Errorf("Len after reopen: got %d, want 4", q.Len())
	}
	if _, err := q.Push(queuedEffect(5)); err != nil {
		t.Fatal(err)
	}
	got := drainIDs(t, q)
	want := []string{"ch_001", "ch_002", "ch_003", "ch_004", "ch_005"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("order after reopen: got %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, ".tmp-123")); !os.IsNotExist(err) {
		t.Errorf("stray temporary file: got %v, want it removed at open", err)
	}
	if q.Len() != 0 || q.Bytes() != 0 {
		t.Errorf("empty queue: got %d effects, %d bytes, want 0 and 0", q.Len(), q.Bytes())
	}
}

func TestQueueDropsOldestWhenFull(t *testing.T) {
	size := effectSize(t, queuedEffect(0))
	q, err := OpenQueue(t.TempDir(), 3*size) // room for three
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	dropped := 0
	for i := range 5 {
		n, err := q.Push(queuedEffect(i))
		if err != nil {
			t.Fatal(err)
		}
		dropped += n
	}
	if dropped != 2 || q.Dropped() != 2 {
		t.Errorf("dropped: got %d (counter %d), want 2", dropped, q.Dropped())
	}
	if q.Bytes() > 3*size {
		t.Errorf("bytes: got %d, want at most the cap %d", q.Bytes(), 3*size)
	}
	if got := drainIDs(t, q); fmt.Sprint(got) != "[ch_002 ch_003 ch_004]" {
		t.Errorf("kept: got %v, want the newest three", got)
	}

	// An effect larger than the whole cap is refused, and nothing is dropped for it.
	big := queuedEffect(9)
	big.Target = string(make([]byte, 4*size))
	if _, err := q.Push(queuedEffect(7)); err != nil {
		t.Fatal(err)
	}
	if n, err := q.Push(big); err == nil || n != 0 {
		t.Errorf("Push of an effect over the cap: got %d dropped, err %v; want 0 and an error", n, err)
	}
	if q.Len() != 1 {
		t.Errorf("Len: got %d, want 1 (the effect before the refused one)", q.Len())
	}
}

func TestQueueRemoveOfADroppedEffectIsHarmless(t *testing.T) {
	size := effectSize(t, queuedEffect(0))
	q, err := OpenQueue(t.TempDir(), size)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	q.Push(queuedEffect(1))
	seq, _, _ := q.Oldest() // being sent...
	q.Push(queuedEffect(2)) // ...while a newer one pushes it out
	if err := q.Remove(seq); err != nil {
		t.Fatal(err)
	}
	if got := drainIDs(t, q); fmt.Sprint(got) != "[ch_002]" {
		t.Errorf("after removing a dropped effect: got %v, want [ch_002]", got)
	}
}

func TestQueueSkipsAnUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	q, err := OpenQueue(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	q.Push(queuedEffect(1))
	q.Push(queuedEffect(2))
	if err := os.WriteFile(q.path(1), []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := drainIDs(t, q); fmt.Sprint(got) != "[ch_002]" {
		t.Errorf("got %v, want [ch_002]", got)
	}
	if q.Dropped() != 1 {
		t.Errorf("Dropped: got %d, want 1", q.Dropped())
	}
}

func TestQueueOneProcessAtATime(t *testing.T) {
	dir := t.TempDir()
	q, err := OpenQueue(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenQueue(dir, 0); err == nil {
		t.Fatal("second OpenQueue of one directory: got no error, want it refused")
	}
	q.Close()
	q2, err := OpenQueue(dir, 0)
	if err != nil {
		t.Fatalf("OpenQueue after Close: %v", err)
	}
	q2.Close()
}

// legacyEffectFile is an effect file as the queue wrote it before it held
// event batches too: one trace.Effect's JSON. Queues left on disk by that
// version must still be read back.
const legacyEffectFile = `{"provider":"stripe","effect_id":"ch_legacy","idempotency_key":"ik_legacy","execution_id":"run_1",` +
	`"step_id":"charge","target":"cus_1","at":"2026-06-30T14:00:01Z","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736",` +
	`"span_id":"00f067aa0ba902b7","fingerprint":"fp_1","summary":"POST /v1/charges amount=5"}`

func TestQueueReadsAnEffectFileOfThePreviousVersion(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000007.json"), []byte(legacyEffectFile), 0o600); err != nil {
		t.Fatal(err)
	}
	q, err := OpenQueue(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if q.Len() != 1 || q.Bytes() != int64(len(legacyEffectFile)) {
		t.Errorf("opened: got %d effects, %d bytes; want 1 and %d", q.Len(), q.Bytes(), len(legacyEffectFile))
	}
	// A new effect goes after the old one.
	if _, err := q.Push(queuedEffect(1)); err != nil {
		t.Fatal(err)
	}
	seq, got, ok := q.Oldest()
	want := trace.Effect{Provider: "stripe", ID: "ch_legacy", IdempotencyKey: "ik_legacy", ExecutionID: "run_1", StepID: "charge",
		Target: "cus_1", At: time.Date(2026, 6, 30, 14, 0, 1, 0, time.UTC), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
		SpanID: "00f067aa0ba902b7", Fingerprint: "fp_1", Summary: "POST /v1/charges amount=5"}
	if !ok || seq != 7 || !reflect.DeepEqual(got, want) {
		t.Fatalf("Oldest: got seq %d %+v %v, want seq 7 %+v", seq, got, ok, want)
	}
	if err := q.Remove(seq); err != nil {
		t.Fatal(err)
	}
	if got := drainIDs(t, q); fmt.Sprint(got) != "[ch_001]" {
		t.Errorf("after the old effect: got %v, want [ch_001]", got)
	}
	if q.Dropped() != 0 {
		t.Errorf("Dropped: got %d, want 0", q.Dropped())
	}
}
