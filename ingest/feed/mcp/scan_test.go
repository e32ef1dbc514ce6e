package mcp_test

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/ingest/feed/mcp"
)

// writeBigAnswer writes an answer to call id whose text content is n
// bytes, its result before its id as the TypeScript SDK writes it, in
// 32 KB pieces from one buffer.
func writeBigAnswer(sc *mcp.ServerScan, id string, n int, structured string) {
	sc.Write([]byte(`{"result":{"content":[{"type":"text","text":"`))
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 2048)
	for left := n; left > 0; left -= len(chunk) {
		sc.Write(chunk[:min(left, len(chunk))])
	}
	sc.Write([]byte(`"}],"structuredContent":` + structured + `},"jsonrpc":"2.0","id":` + id + `}`))
}

// TestScanClosesALongAnswer: an answer of 10 MB, read as it streams,
// closes its call with the effect id its result names, and the scan
// allocates a small part of it; one that answers with an error, or comes
// withheld, is recorded as such.
func TestScanClosesALongAnswer(t *testing.T) {
	rec := &collected{t: t}
	o := newObserver(t, rec, mcp.Config{})
	s := o.Session("sess-big")
	handshake(t, s)
	s.FromClient(call(2, "send_invoice_email", `{"to":"a@b.c"}`, ""))
	s.FromClient(call(3, "send_invoice_email", `{"to":"d@e.f"}`, `{"io.oncetrace/fault":"lose-response"}`))
	s.FromClient(call(4, "send_invoice_email", `{"to":"g@h.i"}`, ""))

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	sc := s.ScanFromServer()
	writeBigAnswer(sc, "2", 10<<20, `{"id":"msg_big"}`)
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 256<<10 {
		t.Errorf("scanning 10 MB allocated %d bytes, want under 256 KB", grew)
	}
	sc.End(true)

	// lose-response struck 3, but its answer streamed through before its
	// id was read: the client has it.
	sc = s.ScanFromServer()
	probe := s.ScanFromServer()
	probe.Write([]byte(`{"result":{"content":[]`))
	if probe.Struck() {
		t.Error("an answer whose id is not read yet: got struck")
	}
	writeBigAnswer(sc, "3", 1<<20, `{"id":"msg_passed"}`)
	if !sc.End(true) {
		t.Error("3's answer delivered: got no miss, want the fault missed")
	}
	sc = s.ScanFromServer()
	sc.Write([]byte(`{"jsonrpc":"2.0","id":4,"error":{"code":-32001,"message":"mailbox full","data":"` + strings.Repeat("x", 1<<20) + `"}}`))
	sc.End(true)
	wait(t, o)

	attempts, effects := rec.ofType("attempt"), rec.ofType("effect")
	if len(attempts) != 3 {
		t.Fatalf("attempts: got %d, want 3", len(attempts))
	}
	result, _ := attempts[0]["result"].(map[string]any)
	if attempts[0]["outcome"] != "ok" || !strings.Contains(stringOf(result["oncetrace"]), "10485") {
		t.Errorf("the long answer: got %v, want ok with a result saying how long it was", attempts[0])
	}
	if attempts[1]["outcome"] != "ok" {
		t.Errorf("the struck call whose long answer passed: got %v, want ok (the client got it)", attempts[1])
	}
	if attempts[2]["outcome"] != "error" || !strings.HasSuffix(stringOf(attempts[2]["error"]), "JSON-RPC error -32001: mailbox full") {
		t.Errorf("the long error: got %v, want its code and message", attempts[2])
	}
	if len(effects) != 2 || effects[0]["effect_id"] != "msg_big" || effects[1]["effect_id"] != "msg_passed" {
		t.Errorf("effects: got %v, want msg_big and msg_passed, read at the pointer past 10 MB", effects)
	}
	if c := o.Counts(); c.Dropped != 0 {
		t.Errorf("dropped: got %d, want 0 (nothing long is held back)", c.Dropped)
	}
}

// TestScanWithheld: a long answer whose id, read first, names a call
// lose-response struck is withheld: a timeout with its effect.
func TestScanWithheld(t *testing.T) {
	rec := &collected{t: t}
	o := newObserver(t, rec, mcp.Config{})
	s := o.Session("sess-withheld")
	handshake(t, s)
	s.FromClient(call(2, "send_invoice_email", `{"to":"a@b.c"}`, `{"io.oncetrace/fault":"lose-response"}`))
	sc := s.ScanFromServer()
	sc.Write([]byte(`{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"`))
	if !sc.Struck() {
		t.Error("2's answer, its id first: got not struck, want struck once its id is read")
	}
	sc.Write([]byte(`"}],"structuredContent":{"id":"msg_kept"}}}`))
	sc.End(false)
	wait(t, o)
	a, e := rec.ofType("attempt"), rec.ofType("effect")
	if len(a) != 1 || a[0]["outcome"] != "timeout" || !strings.Contains(stringOf(a[0]["error"]), "lose-response") {
		t.Errorf("attempt: got %v, want a timeout naming lose-response", a)
	}
	if len(e) != 1 || e[0]["effect_id"] != "msg_kept" {
		t.Errorf("effects: got %v, want msg_kept", e)
	}
	if c := o.Counts(); c.Dropped != 1 {
		t.Errorf("dropped: got %d, want 1", c.Dropped)
	}
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

// TestScanPointerThroughAnArray: an effect id pointer through an array
// index is followed in a long answer, and found again in the result the
// attempt keeps.
func TestScanPointerThroughAnArray(t *testing.T) {
	rec := &collected{t: t}
	o := newObserver(t, rec, mcp.Config{EffectIDPointer: "/structuredContent/sent/1/id"})
	s := o.Session("sess-array")
	handshake(t, s)
	s.FromClient(call(2, "send_invoice_email", `{"to":"a@b.c"}`, ""))
	sc := s.ScanFromServer()
	writeBigAnswer(sc, "2", 1<<20, `{"sent":[{"id":"msg_0"},{"id":"msg_1"}]}`)
	sc.End(true)
	wait(t, o)
	if e := rec.ofType("effect"); len(e) != 1 || e[0]["effect_id"] != "msg_1" {
		t.Errorf("effects: got %v, want msg_1", e)
	}
}
