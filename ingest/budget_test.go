package ingest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
)

func TestDecodeBudgetWaitsThenRefuses(t *testing.T) {
	ctx := context.Background()
	b := ingest.NewDecodeBudget(100, 50*time.Millisecond)
	held, err := b.Reserve(ctx, 80)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := b.Reserve(ctx, 30); !errors.Is(err, ingest.ErrDecodeBusy) {
		t.Fatalf("Reserve over what is free: got %v, want ErrDecodeBusy", err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Errorf("wait before ErrDecodeBusy: got %v, want at least the budget's 50ms", waited)
	}
	if got := b.InUse(); got != 80 {
		t.Errorf("in use after a refusal: got %d, want 80", got)
	}
	held.Release()
	// Freed while a request waits: it gets its share. A budget that lets
	// it wait long enough to be seen waiting, however loaded the machine.
	b = ingest.NewDecodeBudget(100, time.Minute)
	held, _ = b.Reserve(ctx, 80)
	got := make(chan error, 1)
	go func() {
		r, err := b.Reserve(ctx, 30)
		if err == nil {
			// Before the send, not deferred after it: the test reads
			// InUse as soon as it has the answer.
			r.Release()
		}
		got <- err
	}()
	waitForWaiters(t, b, 1)
	held.Release()
	held.Release() // a second release gives nothing back twice
	if err := <-got; err != nil {
		t.Fatalf("Reserve after a release: got %v, want the share", err)
	}
	if got := b.InUse(); got != 0 {
		t.Errorf("in use after both released: got %d, want 0", got)
	}
	// A canceled request stops waiting at once.
	full, _ := b.Reserve(ctx, 100)
	defer full.Release()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Reserve(cctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Reserve with a canceled context: got %v, want context.Canceled", err)
	}
}

// Waiters are served in order: a large request is not starved by small
// ones arriving after it; and one that gives up lets those behind it in.
func TestDecodeBudgetServesInOrder(t *testing.T) {
	ctx := context.Background()
	b := ingest.NewDecodeBudget(100, time.Minute)
	held, _ := b.Reserve(ctx, 60)
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	want := func(name string, n int64) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := b.Reserve(ctx, n)
			if err != nil {
				mu.Lock()
				order = append(order, name+" refused")
				mu.Unlock()
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			r.Release()
		}()
	}
	want("large", 70) // waits: only 40 free
	waitForWaiters(t, b, 1)
	want("small", 40) // would fit, but arrives behind large
	waitForWaiters(t, b, 2)
	mu.Lock()
	if len(order) != 0 {
		t.Errorf("before the release: got %v served, want none (small waits behind large)", order)
	}
	mu.Unlock()
	held.Release()
	wg.Wait()
	if strings.Join(order, ",") != "large,small" {
		t.Errorf("order: got %v, want large then small", order)
	}

	// A waiter that gives up (here its client leaves; at the end of its
	// wait it leaves the same way) unblocks those queued behind it.
	blocker, _ := b.Reserve(ctx, 60)
	defer blocker.Release()
	largeCtx, leave := context.WithCancel(ctx)
	largeDone, smallDone := make(chan error, 1), make(chan error, 1)
	go func() { _, err := b.Reserve(largeCtx, 70); largeDone <- err }()
	waitForWaiters(t, b, 1)
	go func() {
		r, err := b.Reserve(ctx, 30)
		if err == nil {
			r.Release()
		}
		smallDone <- err
	}()
	waitForWaiters(t, b, 2)
	leave()
	if err := <-largeDone; !errors.Is(err, ingest.ErrDecodeBusy) {
		t.Errorf("the large waiter that left: got %v, want ErrDecodeBusy", err)
	}
	if err := <-smallDone; err != nil {
		t.Errorf("the small waiter behind it: got %v, want it served", err)
	}
}

// waitForWaiters polls until n requests wait for a share of the budget.
func waitForWaiters(t *testing.T, b *ingest.DecodeBudget, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); b.Waiting() != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting requests: got %d after 10s, want %d", b.Waiting(), n)
		}
	}
}

func TestReservationResize(t *testing.T) {
	ctx := context.Background()
	b := ingest.NewDecodeBudget(1000, 10*time.Millisecond)
	r, err := b.Reserve(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Resize(ctx, 700); err != nil || b.InUse() != 700 || r.Bytes() != 700 {
		t.Fatalf("grow to 700: got %v, in use %d, held %d; want 700 held", err, b.InUse(), r.Bytes())
	}
	if err := r.Resize(ctx, 200); err != nil || b.InUse() != 200 {
		t.Fatalf("shrink to 200: got %v, in use %d; want 200", err, b.InUse())
	}
	// More than the whole budget could never be had: 413, not a wait.
	err = r.Resize(ctx, 1001)
	var re *ingest.RequestError
	if !errors.As(err, &re) || re.Status != http.StatusRequestEntityTooLarge || !strings.Contains(re.Msg, "decode budget of 1000 bytes") {
		t.Fatalf("grow past the budget: got %v, want a 413 naming the budget", err)
	}
	if r.Bytes() != 200 || b.InUse() != 200 {
		t.Errorf("after a refused grow: held %d, in use %d; want 200 both", r.Bytes(), b.InUse())
	}
	r.Release()
	var none *ingest.Reservation
	if err := none.Resize(ctx, 1<<40); err != nil || none.Bytes() != 0 {
		t.Errorf("nil reservation: got %v, %d; want it to hold nothing and refuse nothing", err, none.Bytes())
	}
	none.Release()
}

// unreadable fails the test when read: a body refused by its
// Content-Length must not be read.
type unreadable struct{ t *testing.T }

func (u unreadable) Read([]byte) (int, error) {
	u.t.Error("body read although its Content-Length was over the limit")
	return 0, io.EOF
}

func TestReadBodyWithin(t *testing.T) {
	ctx := context.Background()
	body := bytes.Repeat([]byte("0123456789"), 100_000) // 1 MB
	for _, tc := range []struct {
		name          string
		encoding      string
		data          []byte
		contentLength int64
	}{
		{"identity, length known", "", body, int64(len(body))},
		{"identity, chunked", "", body, -1},
		{"gzip", "gzip", gzipped(t, body), -1},
		{"empty", "", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := ingest.NewDecodeBudget(8<<20, time.Second)
			res, _ := b.Reserve(ctx, 0)
			got, err := ingest.ReadBodyWithin(ctx, res, bytes.NewReader(tc.data), tc.encoding, tc.contentLength, 2<<20)
			if err != nil {
				t.Fatal(err)
			}
			want := body
			if tc.data == nil {
				want = nil
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("body: got %d bytes, want %d", len(got), len(want))
			}
			if cap(got) != len(got) {
				t.Errorf("capacity: got %d for %d bytes, want no spare room held", cap(got), len(got))
			}
			if res.Bytes() < int64(len(got)) || b.InUse() != res.Bytes() {
				t.Errorf("reservation: got %d (in use %d) for %d bytes read, want at least the bytes", res.Bytes(), b.InUse(), len(got))
			}
			res.Release()
		})
	}

	// A gzip bomb: 64 KiB that inflates to 8 MiB, read with a budget of
	// 3 MiB: refused for the budget long before it is inflated whole.
	bomb := gzipped(t, make([]byte, 8<<20))
	b := ingest.NewDecodeBudget(3<<20, 20*time.Millisecond)
	res, _ := b.Reserve(ctx, 0)
	_, err := ingest.ReadBodyWithin(ctx, res, bytes.NewReader(bomb), "gzip", int64(len(bomb)), 16<<20)
	var re *ingest.RequestError
	if !errors.As(err, &re) || re.Status != http.StatusRequestEntityTooLarge || !strings.Contains(re.Msg, "decode budget") {
		t.Fatalf("gzip bomb under a 3 MiB budget: got %v, want a 413 naming the decode budget", err)
	}
	if res.Bytes() > 3<<20 {
		t.Errorf("reservation: got %d, want never over the budget", res.Bytes())
	}
	res.Release()
	// Over the body limit by its Content-Length: refused unread.
	_, err = ingest.ReadBodyWithin(ctx, nil, unreadable{t}, "", 3<<20, 2<<20)
	if !errors.As(err, &re) || re.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("Content-Length over the limit: got %v, want 413", err)
	}
	// A truncated gzip stream is a 400 naming gzip, as ReadBody says it.
	_, err = ingest.ReadBodyWithin(ctx, nil, bytes.NewReader(gzipped(t, body)[:200]), "gzip", -1, 2<<20)
	if !errors.As(err, &re) || re.Status != http.StatusBadRequest || !strings.Contains(re.Msg, "gzip") {
		t.Fatalf("truncated gzip: got %v, want 400 naming gzip", err)
	}
}

// TestDecodeWithinEstimate: what DecodeWithin reserves covers what
// decoding allocates for the costliest shapes of one event (every
// allocation counted, freed or not), and what a batch of ordinary events
// keeps once decoded.
func TestDecodeWithinEstimate(t *testing.T) {
	ctx := context.Background()
	nested := "[" + strings.Repeat("["+strings.Repeat("0,", 9_999)+"0],", 9) + "[" + strings.Repeat("0,", 9_999) + "0]]"
	var object strings.Builder
	object.WriteString("{")
	for i := 0; i < 9_999; i++ {
		object.WriteString(`"key` + strconv.Itoa(i) + `":0,`)
	}
	object.WriteString(`"last":0}`)
	for _, tc := range []struct{ name, body string }{
		{"100,000 values", `{"type":"attempt","execution_id":"x","step_id":"s","attempt":1,"args":` + nested + `}`},
		{"10,000 keys", `{"type":"attempt","execution_id":"x","step_id":"s","attempt":1,"args":` + object.String() + `}`},
		{"a 4 MB string", `{"type":"attempt","execution_id":"x","step_id":"s","attempt":1,"error":"` + strings.Repeat("a", 4<<20) + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.body)
			b := ingest.NewDecodeBudget(1<<30, time.Second)
			res, _ := b.Reserve(ctx, 0)
			defer res.Release()
			allocated := allocatedBy(func() {
				if _, err := ingest.DecodeWithin(ctx, res, data, ingest.FormatJSON, ingest.DefaultLimits); err != nil {
					t.Fatal(err)
				}
			})
			if allocated > uint64(res.Bytes()) {
				t.Errorf("allocated: got %d bytes decoding %d, want at most the %d reserved", allocated, len(data), res.Bytes())
			}
		})
	}
	t.Run("5,000 ordinary events", func(t *testing.T) {
		var events []string
		for i := 0; i < 5000; i++ {
			events = append(events, `{"type":"attempt","execution_id":"exec_01H8","step_id":"step-`+strconv.Itoa(i)+`","attempt":1,"tool":"send_invoice_email","effect":"write","args":{"to":"jordan@acme.dev","subject":"Your June invoice"},"idempotency_key":"ik_a94a0b1d","started_at":"2026-06-30T14:02:11.200Z"}`)
		}
		data := []byte(`{"events":[` + strings.Join(events, ",") + `]}`)
		b := ingest.NewDecodeBudget(1<<30, time.Second)
		res, _ := b.Reserve(ctx, 0)
		defer res.Release()
		var batch ingest.Batch
		kept := keptBy(func() {
			var err error
			if batch, err = ingest.DecodeWithin(ctx, res, data, ingest.FormatJSON, ingest.DefaultLimits); err != nil {
				t.Fatal(err)
			}
		})
		runtime.KeepAlive(batch)
		if len(batch.Events) != 5000 {
			t.Fatalf("events: got %d, want 5000 (rejected %v)", len(batch.Events), batch.Rejected[:min(3, len(batch.Rejected))])
		}
		if kept > uint64(res.Bytes()) {
			t.Errorf("kept: got %d bytes for %d of body, want at most the %d reserved", kept, len(data), res.Bytes())
		}
		if res.Bytes() > 8*int64(len(data)) {
			t.Errorf("reserved: got %d for %d bytes of ordinary events, want at most 8 times the body", res.Bytes(), len(data))
		}
	})
}

// allocatedBy is every byte f allocates, freed or not: an upper bound of
// what it holds at its peak.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// keptBy is what the heap holds after f, collected.
func keptBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}

// TestDecodeBudgetTryReserveNeverMakesARequestWait: TryReserve takes what
// is free, and nothing when the room is short or a request waits for its
// share, so work that may be left undone never stands before a request.
func TestDecodeBudgetTryReserveNeverMakesARequestWait(t *testing.T) {
	ctx := context.Background()
	b := ingest.NewDecodeBudget(100, time.Minute)
	r := b.TryReserve(60)
	if r == nil || b.InUse() != 60 {
		t.Fatalf("TryReserve of a free 60: got %v, in use %d; want it taken", r, b.InUse())
	}
	if again := b.TryReserve(50); again != nil || b.InUse() != 60 {
		t.Errorf("TryReserve of 50 with 40 free: got %v, in use %d; want nothing taken", again, b.InUse())
	}
	got := make(chan error, 1)
	go func() {
		held, err := b.Reserve(ctx, 50)
		if err == nil {
			held.Release()
		}
		got <- err
	}()
	waitForWaiters(t, b, 1)
	if small := b.TryReserve(10); small != nil {
		t.Errorf("TryReserve of 10 with 40 free while a request waits: got it taken, want nothing: the request is first")
	}
	r.Release()
	if err := <-got; err != nil {
		t.Fatalf("the waiting request after the release: got %v, want its share", err)
	}
	if b.InUse() != 0 {
		t.Errorf("in use after all released: got %d, want 0", b.InUse())
	}
}
