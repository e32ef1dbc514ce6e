package web_test

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
)

// The generator of TestOrderIndependence: small random histories of what
// agents and outbox feeds send, as native events and OTLP spans. A history
// is a set of items; the test posts it in several orders and splits.
//
// Every name a history uses (executions, keys, providers, effects, trace
// ids) carries its own prefix, so that many histories can share one server
// without one's events meeting another's: each stays a set of its own, and
// what is derived from it must not depend on the others either.

// orderItemKind says how an item travels.
type orderItemKind int

const (
	itemNative orderItemKind = iota // a native event, to POST /api/v1/events
	itemSpan                        // an OTLP span, to POST /v1/traces
)

// orderItem is one event or span of a history.
type orderItem struct {
	kind orderItemKind
	body string    // the event, or the span object of an OTLP/JSON request
	at   time.Time // when it would be sent: an event's own time, a span's end
	// resource is a span's resource attributes, as OTLP/JSON.
	resource string
	// unit is shared by an item and its re-sends: the shrinker removes
	// them together.
	unit int
}

// orderHistory is one generated history.
type orderHistory struct {
	seed   int64
	prefix string
	items  []orderItem // in the order an agent and its feeds would send them
	keys   []string    // every idempotency key it uses, for the key pages
	// names are the ids that may name an execution: its executions' ids,
	// its trace ids, and those an orphan effect names.
	names []string
	// what the generator put in, for the coverage report
	features map[string]int
}

// orderGen builds one history.
type orderGen struct {
	r    *rand.Rand
	h    *orderHistory
	t0   time.Time
	n    int
	mail string // provider names, prefixed
	pay  string
	keys []keyUse // keys sent so far, for reuse
	// keyed are the native steps that sent a stable key to a provider.
	keyed  []orderStep
	steps  []genStepUse
	execs  []string
	traces []string
}

// keyUse is a key a step sent, and where.
type keyUse struct{ key, provider string }

// genStepUse is a step already generated, for fingerprints shared between
// steps.
type genStepUse struct{ fingerprint string }

// orderStep is the plan of one step.
type orderStep struct {
	id, tool, class, provider string
	args                      map[string]any
	keyMode                   string // "none", "stable", "per-attempt"
	key                       string
	fingerprint               string
}

// orderAttempt is one try of a step and what the provider did.
type orderAttempt struct {
	n          int
	start, end time.Time
	outcome    string // "" while running: never ended
	dedup      bool
	key        string
	worker     string
	span       string // its span id, when its execution records a trace
	delivered  bool
}

var orderEpoch = time.Date(2026, 7, 1, 9, 0, 0, 0, time.UTC)

// generateOrderHistory makes the history of a seed; index gives it its
// prefix and its own day, so that histories sharing a server stay apart.
func generateOrderHistory(seed int64, index int) *orderHistory {
	g := &orderGen{r: rand.New(rand.NewSource(seed)),
		h:  &orderHistory{seed: seed, prefix: fmt.Sprintf("h%d-", index), features: map[string]int{}},
		t0: orderEpoch.Add(time.Duration(index) * 24 * time.Hour)}
	g.mail, g.pay = g.h.prefix+"mail", g.h.prefix+"pay"
	nExec := 1 + g.r.Intn(3)
	for i := range nExec {
		start := g.t0.Add(time.Duration(i)*40*time.Second + g.ms(0, 20000))
		if g.r.Intn(5) < 2 {
			g.otlpExecution(i, start)
		} else {
			g.nativeExecution(i, start)
		}
	}
	if g.chance(1, 3) {
		g.orphan()
	}
	if g.chance(1, 6) {
		g.outboxOnly()
	}
	g.resends()
	sort.SliceStable(g.h.items, func(i, j int) bool { return g.h.items[i].at.Before(g.h.items[j].at) })
	g.h.keys = slices.Compact(slices.Sorted(slices.Values(g.h.keys)))
	g.h.names = append(g.h.names, g.execs...)
	return g.h
}

func (g *orderGen) ms(lo, hi int) time.Duration {
	return time.Duration(lo+g.r.Intn(hi-lo+1)) * time.Millisecond
}

func (g *orderGen) chance(n, outOf int) bool { return g.r.Intn(outOf) < n }

func (g *orderGen) feature(name string) { g.h.features[name]++ }

func (g *orderGen) id(kind string) string {
	g.n++
	return fmt.Sprintf("%s%s-%d", g.h.prefix, kind, g.n)
}

func (g *orderGen) hex(n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[g.r.Intn(16)]
	}
	return string(b)
}

func ts(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// native adds a native event; half of them get an explicit id.
func (g *orderGen) native(at time.Time, ev map[string]any) {
	if g.chance(1, 2) {
		ev["id"] = g.id("ev")
	}
	js, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	g.h.items = append(g.h.items, orderItem{kind: itemNative, body: string(js), at: at, unit: len(g.h.items)})
}

// resends sends some items a second time, identically, as a client does
// whose response was lost.
func (g *orderGen) resends() {
	for _, it := range g.h.items[:len(g.h.items):len(g.h.items)] {
		if g.chance(1, 10) {
			it.at = it.at.Add(g.ms(1, 5000))
			g.h.items = append(g.h.items, it)
			g.feature("re-send")
		}
	}
}

// planStep picks a step's tool, class, provider, arguments and keying.
func (g *orderGen) planStep(j int) orderStep {
	s := orderStep{id: fmt.Sprintf("s%d", j+1)}
	switch p := g.r.Intn(10); {
	case p < 5:
		s.tool, s.class, s.provider = "send_email", "write", g.mail
		s.args = map[string]any{"to": fmt.Sprintf("user%d@example.com", g.r.Intn(3)), "subject": []string{"Invoice", "Welcome"}[g.r.Intn(2)]}
	case p < 8:
		s.tool, s.class, s.provider = "charge_card", "write", g.pay
		s.args = map[string]any{"amount": 100 * (1 + g.r.Intn(3)), "currency": "eur"}
	case p < 9:
		s.tool, s.class, s.provider = "wire_transfer", "unsafe", g.pay
		s.args = map[string]any{"amount": 5000}
	default:
		s.tool, s.class = "get_customer", "read"
		s.args = map[string]any{"id": g.r.Intn(3)}
	}
	if s.class != "read" && g.chance(1, 8) {
		s.provider = "" // the step does not say which API it calls
		g.feature("step without provider")
	}
	switch p := g.r.Intn(10); {
	case s.class == "read" || p < 3:
		s.keyMode = "none"
	case p < 8:
		s.keyMode = "stable"
		s.key = g.stableKey(s)
	default:
		s.keyMode = "per-attempt"
		g.feature("key changes between attempts")
	}
	// The fingerprint of what the step asks: its retries ask the same;
	// now and then two steps ask the same thing.
	s.fingerprint = fmt.Sprintf("%s %v", s.tool, s.args)
	if len(g.steps) > 0 && g.chance(1, 6) {
		s.fingerprint = g.steps[g.r.Intn(len(g.steps))].fingerprint
		g.feature("two steps with one fingerprint")
	}
	g.steps = append(g.steps, genStepUse{fingerprint: s.fingerprint})
	return s
}

// stableKey is a fresh key for the step's intent, or now and then one
// sent before: by another execution (a key not scoped to its run), by
// another step, or to another provider (the same string is another key).
func (g *orderGen) stableKey(s orderStep) string {
	if len(g.keys) > 0 && g.chance(1, 4) {
		k := g.keys[g.r.Intn(len(g.keys))]
		if k.provider != s.provider {
			g.feature("one key string at two providers")
		} else {
			g.feature("one key reused")
		}
		g.keys = append(g.keys, keyUse{k.key, s.provider})
		return k.key
	}
	k := g.id("ik")
	g.keys = append(g.keys, keyUse{k, s.provider})
	g.h.keys = append(g.h.keys, k)
	return k
}

// attemptKey is the key attempt n sends.
func (g *orderGen) attemptKey(s orderStep, n int) string {
	switch s.keyMode {
	case "stable":
		return s.key
	case "per-attempt":
		k := fmt.Sprintf("%s-a%d", g.id("ik"), n)
		g.h.keys = append(g.h.keys, k)
		return k
	}
	return ""
}

// attempts plans a step's tries, one after the other from cur; running
// allows an attempt to never end: the last, or one whose worker died (a
// crash: nothing runs for a while, then another worker tries again).
func (g *orderGen) attempts(s orderStep, cur time.Time, running bool, worker *string) ([]orderAttempt, time.Time) {
	tries := 1
	switch p := g.r.Intn(10); {
	case p < 5:
	case p < 8:
		tries = 2
	default:
		tries = 3
	}
	var out []orderAttempt
	delivered := false
	for k := 1; k <= tries; k++ {
		a := orderAttempt{n: k, start: cur, key: g.attemptKey(s, k), worker: *worker}
		a.end = a.start.Add(g.ms(50, 3000))
		final := k == tries
		switch {
		case !final && running && g.chance(1, 8):
			a.outcome = "" // the worker died during it
			a.delivered = s.class != "read" && g.chance(1, 2)
			out = append(out, a)
			delivered = delivered || a.delivered
			cur = a.start.Add(g.ms(8000, 60000))
			*worker += "'"
			g.feature("crash: a worker died mid-attempt")
			continue
		case !final && g.chance(1, 25):
			a.outcome = "timeout"
			a.delivered = s.class != "read" && g.chance(1, 2)
			out = append(out, a)
			delivered = delivered || a.delivered
			cur = a.end.Add(25 * time.Hour)
			g.feature("retry after the key retention window")
			continue
		case !final && g.chance(2, 3):
			a.outcome = "timeout"
			a.delivered = g.chance(1, 2)
		case !final:
			a.outcome = "error"
			a.delivered = g.chance(1, 10)
		case running && g.chance(1, 8):
			a.outcome = "" // never ended
			a.delivered = g.chance(1, 2)
			g.feature("attempt never ended")
		case g.chance(1, 10):
			a.outcome = "error"
		case g.chance(1, 12):
			a.outcome = "replayed"
			g.feature("replayed")
		default:
			a.outcome = "ok"
			// A keyed retry of a delivered request is answered from the
			// provider's key store.
			a.dedup = delivered && s.keyMode == "stable"
			if !a.dedup && s.keyMode == "stable" && g.chance(1, 12) {
				a.dedup = true // answered from another run's stored response
				g.feature("deduplicated with nothing delivered")
			}
			a.delivered = !a.dedup
		}
		if s.class == "read" {
			a.delivered = false
		}
		delivered = delivered || a.delivered
		out = append(out, a)
		cur = a.end.Add(g.ms(100, 2000))
	}
	return out, cur
}

// ---- native executions ----

func (g *orderGen) nativeExecution(i int, start time.Time) {
	id := g.id("exec")
	g.execs = append(g.execs, id)
	g.feature("native execution")
	announced := !g.chance(1, 6)
	if announced {
		ev := map[string]any{"type": "execution", "execution_id": id, "status": "running", "started_at": ts(start)}
		if g.chance(3, 4) {
			ev["name"] = []string{"billing-agent", "support-agent"}[g.r.Intn(2)]
		}
		if g.chance(1, 3) {
			ev["labels"] = map[string]any{"team": "t" + fmt.Sprint(g.r.Intn(2))}
		}
		g.native(start, ev)
	} else {
		g.feature("execution known only from its attempts")
	}
	cur := start.Add(g.ms(10, 300))
	nSteps := 1 + g.r.Intn(3)
	worker := "w1"
	// An agent instrumented natively may send its trace context too; the
	// outbox then records it, and the trace is the execution's.
	traceID := ""
	if g.chance(1, 4) {
		traceID = g.hex(32)
		g.h.names = append(g.h.names, traceID)
		g.feature("native execution with trace context")
	}
	for j := range nSteps {
		if j == 0 && len(g.keyed) > 0 && g.chance(1, 4) {
			// The article's email tool: a key hashed from the arguments
			// alone, so that this run's email is taken for a repeat of
			// another run's and answered from its stored response.
			s := g.keyed[g.r.Intn(len(g.keyed))]
			a := orderAttempt{n: 1, start: cur, end: cur.Add(g.ms(50, 500)), outcome: "ok", dedup: true, key: s.key, worker: worker}
			g.nativeAttempt(id, "", s, a)
			cur = a.end.Add(g.ms(100, 1000))
			g.feature("answered from another run's stored response")
			continue
		}
		s := g.planStep(j)
		if s.keyMode == "stable" && s.provider != "" {
			g.keyed = append(g.keyed, s)
		}
		var as []orderAttempt
		as, cur = g.attempts(s, cur, true, &worker)
		for i := range as {
			if traceID != "" {
				as[i].span = g.hex(16)
			}
			g.nativeAttempt(id, traceID, s, as[i])
		}
		g.nativeEffects(id, traceID, s, as)
	}
	if announced && g.chance(4, 5) {
		status := []string{"completed", "completed", "failed"}[g.r.Intn(3)]
		end := cur.Add(g.ms(10, 500))
		g.native(end, map[string]any{"type": "execution", "execution_id": id, "status": status, "ended_at": ts(end)})
		if g.chance(1, 10) {
			other := map[string]string{"completed": "failed", "failed": "completed"}[status]
			g.native(end.Add(g.ms(1, 900)), map[string]any{"type": "execution", "execution_id": id, "status": other,
				"ended_at": ts(end.Add(g.ms(1, 900)))})
			g.feature("conflicting execution end")
		}
	}
}

// nativeAttempt sends an attempt as one event, or as a start event and an
// end event (running, then completed by a later event).
func (g *orderGen) nativeAttempt(execID, traceID string, s orderStep, a orderAttempt) {
	startEv := map[string]any{"type": "attempt", "execution_id": execID, "step_id": s.id, "attempt": a.n,
		"tool": s.tool, "effect": s.class, "args": s.args, "worker": a.worker, "started_at": ts(a.start)}
	if a.span != "" {
		startEv["trace_id"], startEv["span_id"] = traceID, a.span
	}
	if s.provider != "" {
		startEv["provider"] = s.provider
	}
	if a.key != "" {
		startEv["idempotency_key"] = a.key
	}
	if a.outcome == "" {
		g.native(a.start, startEv)
		return
	}
	endEv := map[string]any{"type": "attempt", "execution_id": execID, "step_id": s.id, "attempt": a.n,
		"ended_at": ts(a.end), "outcome": a.outcome}
	switch a.outcome {
	case "ok", "replayed":
		endEv["result"] = map[string]any{"status": "done", "n": a.n}
	case "timeout":
		endEv["error"] = "network timeout"
	case "error":
		endEv["error"] = "upstream returned 500"
	}
	if a.dedup {
		endEv["deduplicated"] = true
		g.feature("deduplicated")
	}
	if a.key != "" && g.chance(1, 20) {
		endEv["idempotency_key"] = a.key + "-end" // a client that recomputes its key at the end
		g.h.keys = append(g.h.keys, a.key+"-end")
		g.feature("attempt events disagree on the key")
	}
	if g.chance(3, 5) {
		g.native(a.start, startEv)
		g.native(a.end, endEv)
		g.feature("attempt started, then completed by a later event")
	} else {
		for k, v := range startEv {
			if _, ok := endEv[k]; !ok {
				endEv[k] = v
			}
		}
		g.native(a.end, endEv)
	}
	if g.chance(1, 20) {
		other := map[string]string{"ok": "error", "error": "ok", "timeout": "ok", "replayed": "error"}[a.outcome]
		at := a.end.Add(g.ms(1, 2000))
		g.native(at, map[string]any{"type": "attempt", "execution_id": execID, "step_id": s.id, "attempt": a.n,
			"ended_at": ts(at), "outcome": other})
		g.feature("conflicting attempt end")
	}
}

// nativeEffects reports what the provider did for a step of a native
// execution, joined by key, by execution and step ids, or both.
func (g *orderGen) nativeEffects(execID, traceID string, s orderStep, as []orderAttempt) {
	for _, a := range as {
		if !a.delivered || g.lost() {
			continue
		}
		provider := s.provider
		if provider == "" {
			provider = g.mail
		}
		ev := g.effectEvent(provider, s, a)
		join := g.r.Intn(3)
		if a.key == "" {
			join = 1
		}
		if a.span != "" && g.chance(1, 2) {
			join = 3
		}
		switch join {
		case 3:
			ev["trace_id"], ev["span_id"] = traceID, a.span
			g.feature("effect joined by trace context to a native attempt")
		case 0:
			ev["idempotency_key"] = a.key
			g.feature("effect joined by key")
		case 1:
			ev["execution_id"], ev["step_id"] = execID, s.id
			g.feature("effect joined by ids")
		default:
			ev["idempotency_key"] = a.key
			ev["execution_id"], ev["step_id"] = execID, s.id
			g.feature("effect joined by key and ids")
		}
		g.emitEffect(ev)
	}
}

// lost says whether the outbox feed missed a delivery.
func (g *orderGen) lost() bool {
	if g.chance(1, 12) {
		g.feature("delivery the outbox never reported")
		return true
	}
	return false
}

// effectEvent is the outbox's record of a delivery during attempt a.
func (g *orderGen) effectEvent(provider string, s orderStep, a orderAttempt) map[string]any {
	at := a.start.Add(g.ms(1, 40))
	ev := map[string]any{"type": "effect", "provider": provider, "effect_id": g.id("fx"), "at": ts(at)}
	if g.chance(4, 5) {
		ev["fingerprint"] = s.fingerprint
		if g.chance(1, 2) {
			ev["summary"] = "what " + s.tool + " asked"
		}
	}
	if to, ok := s.args["to"]; ok && g.chance(1, 2) {
		ev["target"] = to
	}
	return ev
}

// emitEffect sends an effect event, and now and then a second report of
// the same effect with less detail, or naming another execution.
func (g *orderGen) emitEffect(ev map[string]any) {
	at, _ := time.Parse(time.RFC3339Nano, ev["at"].(string))
	g.native(at, ev)
	if g.chance(1, 10) {
		again := map[string]any{"type": "effect", "provider": ev["provider"], "effect_id": ev["effect_id"], "at": ev["at"]}
		if g.chance(1, 3) && len(g.execs) > 1 {
			again["execution_id"] = g.execs[g.r.Intn(len(g.execs))]
			again["step_id"] = "s1"
			g.feature("effect reports disagree on the execution")
		}
		g.native(at.Add(g.ms(1, 3000)), again)
		g.feature("effect reported twice")
	}
}

// orphan adds an effect nobody's attempt explains: a key nobody sent, a
// step that never ran, an execution never traced, or a trace nobody
// exported.
func (g *orderGen) orphan() {
	at := g.t0.Add(g.ms(0, 60000))
	ev := map[string]any{"type": "effect", "provider": []string{g.mail, g.pay}[g.r.Intn(2)], "effect_id": g.id("fx"), "at": ts(at),
		"fingerprint": "orphan"}
	switch g.r.Intn(4) {
	case 0:
		k := g.id("ik-nobody")
		ev["idempotency_key"] = k
		g.h.keys = append(g.h.keys, k)
	case 1:
		if len(g.execs) > 0 {
			ev["execution_id"], ev["step_id"] = g.execs[0], "s99"
		}
	case 2:
		ghost := g.id("exec-ghost")
		ev["execution_id"], ev["step_id"] = ghost, "s1"
		g.h.names = append(g.h.names, ghost)
	default:
		unknown := g.hex(32)
		ev["trace_id"], ev["span_id"] = unknown, g.hex(16)
		g.h.names = append(g.h.names, unknown)
		g.feature("effect of a trace never exported")
	}
	g.feature("orphan effect")
	g.native(at, ev)
}

// outboxOnly adds effects of an outbox feed that knows no run: an email
// with its recipient and fingerprint, and now and then an identical one
// minutes later (two intents, or one sent twice).
func (g *orderGen) outboxOnly() {
	at := g.t0.Add(g.ms(0, 60000))
	provider := []string{g.mail, g.pay}[g.r.Intn(2)]
	fingerprint := fmt.Sprintf("notice %d", g.r.Intn(2))
	n := 1
	if g.chance(1, 2) {
		n = 2
		g.feature("two identical effects of no run")
	}
	for range n {
		g.native(at, map[string]any{"type": "effect", "provider": provider, "effect_id": g.id("fx"), "at": ts(at),
			"target": "ops@example.com", "fingerprint": fingerprint, "summary": "a notice to ops"})
		at = at.Add(g.ms(1000, 400000))
	}
	g.feature("effect of no run")
}

// ---- OpenTelemetry executions ----

// otlpExecution is an agent traced with the OpenTelemetry JS SDK's
// SimpleSpanProcessor and the HTTP instrumentation: every span is
// exported in its own request when it ends, children before parents; a
// tool call's HTTP request is a CLIENT span under the tool span, and the
// outbox records the request's traceparent.
func (g *orderGen) otlpExecution(i int, start time.Time) {
	traceID := g.hex(32)
	g.traces = append(g.traces, traceID)
	g.feature("OTLP execution")
	// The agent may name its run (oncetrace.execution.id on the
	// resource, so on every span); a named run may span two traces, as a
	// run resumed by a new process does.
	resource := `[{"key":"service.name","value":{"stringValue":"agent"}}]`
	execID := traceID
	traces := []string{traceID}
	if g.chance(1, 3) {
		execID = g.id("run")
		resource = fmt.Sprintf(`[{"key":"service.name","value":{"stringValue":"agent"}},{"key":"oncetrace.execution.id","value":{"stringValue":%q}}]`, execID)
		g.feature("OTLP execution named by its resource")
		if g.chance(1, 2) {
			traces = append(traces, g.hex(32))
			g.feature("OTLP execution over two traces")
			g.h.names = append(g.h.names, traces[1])
		}
		g.h.names = append(g.h.names, traceID)
		if g.chance(1, 3) {
			// The agent reports its run natively too.
			g.native(start, map[string]any{"type": "execution", "execution_id": execID, "status": "running",
				"started_at": ts(start), "labels": map[string]any{"team": "t1"}})
			g.feature("OTLP execution with a native execution event")
		}
	}
	g.execs = append(g.execs, execID)
	nSteps := 1 + g.r.Intn(3)
	cur := start.Add(g.ms(10, 300))
	// The framework's tool spans speak one of the dialects the span map
	// knows, or one only the generic rule reads; some frameworks lose the
	// trace context between a tool call and its HTTP request.
	dialect := []string{"gen_ai", "gen_ai", "openinference", "vercel", "generic", "mcp"}[g.r.Intn(6)]
	g.feature("tool spans in dialect " + dialect)
	stray := g.chance(1, 5)
	if stray {
		g.feature("HTTP spans that lost their trace (stray)")
	}
	for t, tr := range traces {
		o := otlpRun{g: g, traceID: tr, rootID: g.hex(16), resource: resource, execID: execID, dialect: dialect, stray: stray}
		rootStart := cur.Add(-g.ms(5, 10))
		if g.chance(1, 3) {
			g.span(o.resource, tr, g.hex(16), o.rootID, "chat gpt-4o", 3, cur, cur.Add(g.ms(100, 800)), map[string]any{
				"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 30}, "")
			g.feature("model call")
		}
		from, to := 0, nSteps
		if len(traces) == 2 {
			from, to = t*nSteps/2, (t+1)*nSteps/2
			if t == 1 {
				to = nSteps
			}
		}
		for j := from; j < to; j++ {
			s := g.planStep(j)
			if s.class == "read" {
				s.provider = ""
			}
			var as []orderAttempt
			worker := "otel"
			as, cur = g.attempts(s, cur, false, &worker)
			args, _ := json.Marshal(s.args)
			for _, a := range as {
				o.attempt(s, a, string(args))
			}
		}
		end := cur.Add(g.ms(10, 400))
		if g.chance(6, 7) {
			errType := ""
			if g.chance(1, 8) {
				errType = "Error"
			}
			g.span(o.resource, tr, o.rootID, "", "invoke_agent billing-agent", 1, rootStart, end,
				map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing-agent"}, errType)
		} else {
			g.feature("root span never exported")
		}
		cur = end.Add(g.ms(1000, 30000))
	}
}

// otlpRun is one trace of an OpenTelemetry execution.
type otlpRun struct {
	g                                 *orderGen
	traceID, rootID, resource, execID string
	dialect                           string
	stray                             bool // HTTP spans start traces of their own
}

// toolAttrs are a tool call's attributes in the run's dialect.
func (o otlpRun) toolAttrs(tool, args string) (name string, attrs map[string]any) {
	call := "call_" + o.g.hex(8)
	switch o.dialect {
	case "openinference":
		return tool, map[string]any{"openinference.span.kind": "TOOL", "tool.name": tool, "input.value": args}
	case "vercel":
		return "ai.toolCall", map[string]any{"ai.toolCall.name": tool, "ai.toolCall.id": call, "ai.toolCall.args": args}
	case "generic":
		return "acme.tool " + tool, map[string]any{"acme.type": "tool", "acme.tool.name": tool, "acme.input": args}
	case "mcp":
		return "tools/call " + tool, map[string]any{"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool",
			"gen_ai.tool.name": tool, "gen_ai.tool.call.arguments": args, "mcp.session.id": o.traceID[:16], "jsonrpc.request.id": call}
	}
	return "execute_tool " + tool, map[string]any{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
		"gen_ai.tool.call.id": call, "gen_ai.tool.call.arguments": args}
}

func (o otlpRun) attempt(s orderStep, a orderAttempt, args string) {
	g, traceID, rootID := o.g, o.traceID, o.rootID
	toolSpan := g.hex(16)
	toolName, attrs := o.toolAttrs(s.tool, args)
	httpTrace := traceID
	if s.class != "read" && g.chance(1, 2) {
		attrs["oncetrace.effect"] = s.class
		if s.provider != "" {
			attrs["oncetrace.provider"] = s.provider
		}
		g.feature("tool span naming its class and provider")
	}
	if a.dedup {
		attrs["oncetrace.deduplicated"] = true
	}
	errType := ""
	switch a.outcome {
	case "timeout":
		errType = "TimeoutError"
	case "error":
		errType = "Error"
	case "replayed":
		attrs["oncetrace.replayed"] = true
	}
	// The HTTP client span the instrumentation records inside the tool
	// call; its request carries the key as a header when there is one.
	httpSpan := ""
	if s.class != "read" {
		httpSpan = g.hex(16)
		hattrs := map[string]any{"http.request.method": "POST", "url.full": "https://api.example/" + s.tool}
		if a.key != "" && g.chance(1, 2) {
			hattrs["http.request.header.idempotency-key"] = a.key
			g.feature("key only in the HTTP span's header")
		} else if a.key != "" {
			attrs["oncetrace.idempotency.key"] = a.key
		}
		if a.outcome == "ok" {
			hattrs["http.response.status_code"] = 200
		}
		herr := ""
		if errType != "" {
			herr = errType
		}
		httpParent := toolSpan
		if o.stray {
			httpTrace, httpParent = g.hex(32), ""
			g.h.names = append(g.h.names, httpTrace)
		}
		if g.chance(9, 10) {
			g.span(o.resource, httpTrace, httpSpan, httpParent, "POST", 3, a.start.Add(time.Millisecond), a.end.Add(-time.Millisecond), hattrs, herr)
		} else {
			g.feature("HTTP span never exported")
		}
	}
	kind := 1 // internal
	if o.dialect == "mcp" {
		kind = 3 // the MCP client's span of its tools/call
	}
	if g.chance(9, 10) {
		g.span(o.resource, traceID, toolSpan, rootID, toolName, kind, a.start, a.end, attrs, errType)
	} else {
		g.feature("tool span never exported")
	}
	if o.dialect == "mcp" {
		o.mcpServerAndProxy(s, a, toolSpan, attrs, args)
	}
	if !a.delivered || g.lost() {
		return
	}
	provider := s.provider
	if provider == "" {
		provider = g.mail
	}
	// The feed recorded the request's traceparent: the HTTP span is its
	// parent, or, without HTTP instrumentation, the tool span.
	ev := g.effectEvent(provider, s, a)
	ev["trace_id"] = traceID
	switch {
	case httpSpan != "" && o.stray:
		// Only what the effect names can join it to the tool call in
		// flight: its recipient.
		ev["trace_id"], ev["span_id"] = httpTrace, httpSpan
		if to, ok := s.args["to"]; ok {
			ev["target"] = to
		}
		g.feature("effect of a stray HTTP span")
	case httpSpan != "" && g.chance(5, 6):
		ev["span_id"] = httpSpan
		g.feature("effect joined by trace context through an HTTP span")
	default:
		ev["span_id"] = toolSpan
		g.feature("effect joined by trace context to the tool span")
	}
	if a.key != "" && g.chance(1, 2) {
		ev["idempotency_key"] = a.key // the recording proxy saw the header
	}
	if g.chance(1, 6) {
		ev["execution_id"] = o.execID // a feed told which run it serves
		g.feature("effect with trace context naming its execution")
	}
	g.emitEffect(ev)
}

// mcpServerAndProxy adds what else sees an MCP client's tools/call: the
// server's span of it, under the client's (context, never a second
// attempt), and the MCP proxy's attempt event, which carries the call's
// traceparent (the client's span) and must be one attempt with the span.
func (o otlpRun) mcpServerAndProxy(s orderStep, a orderAttempt, clientSpan string, attrs map[string]any, args string) {
	g := o.g
	if g.chance(2, 3) {
		g.span(o.resource, o.traceID, g.hex(16), clientSpan, "tools/call "+s.tool, 2, a.start.Add(time.Millisecond), a.end.Add(-time.Millisecond), attrs, "")
		g.feature("MCP server span")
	}
	if !g.chance(2, 3) {
		return
	}
	canon, err := ingest.CanonicalArgs(json.RawMessage(args), ingest.DefaultLimits.Redact)
	if err != nil {
		panic(err)
	}
	// The proxy sees the answer before the client does, or gives up on a
	// lost one after the client's own timeout.
	end := a.end.Add(-g.ms(0, 2))
	if a.outcome == "timeout" {
		end = a.end.Add(g.ms(0, 50))
	}
	outcome := a.outcome
	if outcome == "replayed" {
		outcome = "ok" // the server answered; what it replayed is the client's to say
	}
	ev := map[string]any{"type": "attempt", "execution_id": o.traceID, "step_id": ingest.ToolStepID(s.tool, canon), "tool": s.tool,
		"effect": s.class, "args": json.RawMessage(args), "worker": "mcp-server", "trace_id": o.traceID, "span_id": clientSpan,
		"started_at": ts(a.start.Add(time.Millisecond)), "ended_at": ts(end), "outcome": outcome}
	if s.provider != "" {
		ev["provider"] = s.provider
	}
	if a.key != "" {
		ev["idempotency_key"] = a.key // params._meta["io.oncetrace/idempotency-key"]
	}
	g.native(end, ev)
	g.feature("MCP proxy attempt")
}

// span adds one ended span, exported when it ends.
func (g *orderGen) span(resource, traceID, spanID, parentID, name string, kind int, start, end time.Time, attrs map[string]any, errType string) {
	var kvs []string
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range attrs {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		var v string
		switch x := attrs[k].(type) {
		case string:
			v = fmt.Sprintf(`{"stringValue":%q}`, x)
		case int:
			v = fmt.Sprintf(`{"intValue":"%d"}`, x)
		case bool:
			v = fmt.Sprintf(`{"boolValue":%t}`, x)
		default:
			panic(fmt.Sprintf("attribute %s: %T", k, x))
		}
		kvs = append(kvs, fmt.Sprintf(`{"key":%q,"value":%s}`, k, v))
	}
	status := `{"code":1}`
	if errType != "" {
		kvs = append(kvs, fmt.Sprintf(`{"key":"error.type","value":{"stringValue":%q}}`, errType))
		status = `{"code":2,"message":"` + errType + `: failed"}`
	}
	parent := ""
	if parentID != "" {
		parent = fmt.Sprintf(`"parentSpanId":%q,`, parentID)
	}
	body := fmt.Sprintf(`{"traceId":%q,"spanId":%q,%s"name":%q,"kind":%d,"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[%s],"status":%s}`,
		traceID, spanID, parent, name, kind, start.UnixNano(), end.UnixNano(), strings.Join(kvs, ","), status)
	g.h.items = append(g.h.items, orderItem{kind: itemSpan, body: body, at: end, resource: resource, unit: len(g.h.items)})
}
