package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/web"
)

// TestCarriedModelsMatchFreshReads: two servers on one database, one
// hearing every commit (so carrying its models over those that cannot
// change them, small ones too here) and one that hears none (so reading
// every execution afresh after each commit). After each of many random
// commits — attempts, effects, spans and execution events of several
// executions, sharing keys, traces, targets and providers, some of them
// anchored nowhere — every execution's JSON twin, which carries
// everything its model shows, must be the same from both. And models
// were carried: the test checks what it tests happened.
func TestCarriedModelsMatchFreshReads(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) { carriedMatchFresh(t, seed, 250) })
	}
}

func carriedMatchFresh(t *testing.T, seed uint64, rounds int) {
	stack := startPagesStack(t)
	stack.server.SetCarryMinItems(1)
	fresh := web.New(web.Config{DB: stack.db, Writer: stack.writer, Limits: ingest.DefaultLimits, Analysis: trace.DefaultConfig})
	b := httptest.NewServer(fresh)
	t.Cleanup(func() {
		b.Close()
		fresh.Close()
	})
	hub, a := stack.hub, stack.url

	rng := rand.New(rand.NewPCG(seed, seed*7919))
	read := []string{"x1", "x2", "x3", "x4"}
	gen := newCarryEvents(rng)
	commits := int64(0)
	for round := range rounds {
		events := gen.next(round)
		if postEvents(t, a, events) > 0 {
			commits++
		}
		// The commit carried (or not) before the models are read again.
		for deadline := time.Now().Add(10 * time.Second); hub.HandedOver() < commits; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the hub handed over %d of %d commits after 10 s", round, hub.HandedOver(), commits)
			}
		}
		for _, id := range read {
			got, want := executionJSON(t, a, id), executionJSON(t, b.URL, id)
			if !bytes.Equal(got, want) {
				sent, _ := json.Marshal(events)
				t.Fatalf("round %d, execution %s, after %s: the carrying server answered\n%s\nwant what a fresh read answers\n%s", round, id, sent, got, want)
			}
		}
	}
	counts := modelCounts(t, a)
	t.Logf("seed %d, %d commits: models %v", seed, commits, counts)
	if counts["carried"] == 0 || counts["kept"] == 0 {
		t.Errorf("got models %v, want some carried over commits and answering", counts)
	}
}

// executionJSON is an execution's JSON twin, or its 404.
func executionJSON(t *testing.T, base, id string) []byte {
	t.Helper()
	r := fetchPage(t, base+"/api/v1/executions/"+id, false)
	if r.status != http.StatusOK && r.status != http.StatusNotFound {
		t.Fatalf("GET execution %s: got %d %s", id, r.status, r.body)
	}
	return r.body
}

// postEvents posts events and returns how many were stored; rejected ones
// (the generator may make an event the API refuses) are no failure.
func postEvents(t *testing.T, base string, events []map[string]any) int {
	t.Helper()
	status, accepted, data := postNDJSON(t, base, events)
	if status != http.StatusOK && status != http.StatusMultiStatus {
		t.Fatalf("POST events: got %d %s", status, data)
	}
	return accepted
}

// carryEvents makes random events of a few executions that share keys,
// traces, targets and providers.
type carryEvents struct {
	rng  *rand.Rand
	base time.Time
	seq  int
}

func newCarryEvents(rng *rand.Rand) *carryEvents {
	return &carryEvents{rng: rng, base: time.Date(2026, 7, 2, 9, 0, 0, 0, time.UTC)}
}

func (g *carryEvents) pick(options ...string) string { return options[g.rng.IntN(len(options))] }

// maybe is s with probability p, else "".
func (g *carryEvents) maybe(p float64, s string) string {
	if g.rng.Float64() < p {
		return s
	}
	return ""
}

func (g *carryEvents) at(spread int) string {
	return g.base.Add(time.Duration(g.rng.IntN(spread)) * time.Second).Format(time.RFC3339Nano)
}

func (g *carryEvents) next(round int) []map[string]any {
	var events []map[string]any
	for range 1 + g.rng.IntN(3) {
		g.seq++
		// Most events are of executions nobody reads, most keys an
		// execution's own: so that many commits leave a read one alone.
		// The read executions mostly behave (their keys their own, one
		// provider, every effect keyed), so that their models can be
		// carried; now and then, and always for the others, anything goes:
		// shared keys, their traces, other providers, anchorless effects.
		exec := g.pick("x1", "x2", "x3", "x4", "y1", "y2", "y3", "y4", "y5", "y6", "y7", "y8")
		key := g.pick(exec+"-k1", exec+"-k2")
		traceID, provider := "", "mail-api"
		target, effectID := exec+"@acme.dev", fmt.Sprintf("%s-e%d", exec, g.rng.IntN(6))
		if exec[0] == 'y' || g.rng.IntN(8) == 0 {
			effectID = fmt.Sprintf("e%d", g.rng.IntN(12))
			key = g.maybe(0.7, g.pick(exec+"-k1", "x1-k1", "x2-k2", "k1", "k2"))
			traceID = g.maybe(0.2, g.pick("t1", "t2", "x1", "x3"))
			provider = g.pick("mail-api", "mail-api", "sms-api", g.pick("pay-api", "mail-api"))
			target = g.pick("jordan@acme.dev", "sam@acme.dev", "+15550100", "x1@acme.dev")
		}
		ev := map[string]any{}
		switch kind := g.rng.IntN(10); {
		case kind < 5:
			start := g.at(600)
			ev = map[string]any{"type": "attempt", "execution_id": exec, "step_id": g.pick("s1", "s2", "s3", "s4"),
				"attempt": 1 + g.rng.IntN(3), "tool": g.pick("send_email", "charge", "lookup"), "effect": g.pick("write", "write", "read", "unsafe"),
				"provider": provider, "outcome": g.pick("ok", "ok", "error", "timeout"), "started_at": start,
				"args": map[string]any{"to": target}}
			if key != "" {
				ev["idempotency_key"] = key
			}
			if traceID != "" {
				ev["trace_id"], ev["span_id"] = traceID, fmt.Sprintf("sp%d", g.rng.IntN(6))
				if g.rng.IntN(3) == 0 {
					delete(ev, "attempt") // identified by its span: numbered after the others
				}
			}
		case kind < 8:
			ev = map[string]any{"type": "effect", "provider": provider, "effect_id": effectID,
				"target": target, "at": g.at(600)}
			if key != "" {
				ev["idempotency_key"] = key
			}
			if x := g.maybe(0.8, exec); x != "" {
				ev["execution_id"] = x
				if s := g.maybe(0.5, g.pick("s1", "s2", "s3", "s4")); s != "" {
					ev["step_id"] = s
				}
			}
			if traceID != "" {
				ev["trace_id"] = traceID
			}
			if g.rng.IntN(4) == 0 {
				ev["fingerprint"] = fmt.Sprintf("email:%032x", len(target)*7919+int(target[0]))
			}
		case kind < 9:
			ev = map[string]any{"type": "span", "execution_id": exec, "trace_id": g.pick("t1", "t2", "x1", "x3", exec),
				"span_id": fmt.Sprintf("h%d", g.rng.IntN(8)), "role": "http", "http_method": "POST", "http_url": "https://api.example/send",
				"http_status": 200 + 300*g.rng.IntN(2), "started_at": g.at(600), "parent_span_id": fmt.Sprintf("sp%d", g.rng.IntN(6))}
			if key != "" {
				ev["idempotency_key"] = key
			}
		default:
			ev = map[string]any{"type": "execution", "execution_id": exec, "name": g.pick("billing", "support"),
				"status": g.pick("running", "completed", "failed"), "started_at": g.base.Format(time.RFC3339Nano)}
		}
		events = append(events, ev)
	}
	_ = round
	return events
}
