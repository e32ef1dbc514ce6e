package trace

import (
	"encoding/json"
	"slices"
	"time"
)

// The builders below keep test tables short: times are seconds after t0,
// and a negative end means the attempt never reported one.

var t0 = time.Date(2026, 6, 30, 14, 2, 0, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

type attemptOpt func(*Attempt)

func key(k string) attemptOpt      { return func(a *Attempt) { a.IdempotencyKey = k } }
func worker(w string) attemptOpt   { return func(a *Attempt) { a.Worker = w } }
func args(js string) attemptOpt    { return func(a *Attempt) { a.Args = json.RawMessage(js) } }
func provider(p string) attemptOpt { return func(a *Attempt) { a.Provider = p } }
func dedup(a *Attempt)             { a.Deduplicated = true }

func try(n int, start, end float64, outcome Outcome, opts ...attemptOpt) Attempt {
	a := Attempt{Number: n, StartedAt: at(start), Outcome: outcome}
	if end >= 0 {
		a.EndedAt = at(end)
	}
	for _, opt := range opts {
		opt(&a)
	}
	return a
}

func step(id, tool string, class EffectClass, attempts ...Attempt) Step {
	for i := range attempts {
		attempts[i].ExecutionID, attempts[i].StepID = "exec_1", id
	}
	return Step{ExecutionID: "exec_1", ID: id, Tool: tool, Effect: class, Attempts: attempts}
}

// run is a completed execution exec_1 with the given steps.
func run(steps ...Step) Run {
	return Run{Execution: Execution{ID: "exec_1", Status: StatusCompleted}, Steps: steps}
}

func (r Run) with(effects ...Effect) Run {
	r.Effects = append(r.Effects, effects...)
	return r
}

func (r Run) fed(providers ...string) Run {
	r.FedProviders = map[string]bool{}
	for _, p := range providers {
		r.FedProviders[p] = true
	}
	return r
}

// effect is a mail-api effect at sec; stepID, when set, names exec_1.
func effect(id, key, stepID string, sec float64) Effect {
	e := Effect{Provider: "mail-api", ID: id, IdempotencyKey: key, StepID: stepID, At: at(sec)}
	if stepID != "" {
		e.ExecutionID = "exec_1"
	}
	return e
}

// namedEffect is a mail-api effect at sec naming execID's stepID.
func namedEffect(id, key, execID, stepID string, sec float64) Effect {
	return Effect{Provider: "mail-api", ID: id, IdempotencyKey: key, ExecutionID: execID, StepID: stepID, At: at(sec)}
}

// atProvider returns the effect as provider p recorded it.
func (e Effect) atProvider(p string) Effect {
	e.Provider = p
	return e
}

// peer is an attempt of execution execID's step, as a store loads it into
// another run's Peers.
func peer(execID, stepID string, a Attempt) Attempt {
	a.ExecutionID, a.StepID = execID, stepID
	return a
}

func (r Run) withPeers(peers ...Attempt) Run {
	r.Peers = append(r.Peers, peers...)
	return r
}

// loadedRun builds execution id's Run the way store.loadRun does, without
// World.Runs: its steps, the effects naming it or carrying a key its
// attempts sent (whatever their provider), and the attempts of other
// executions carrying such a key. Tests compare the two paths with it.
func loadedRun(w World, id string) Run {
	r := Run{Execution: Execution{ID: id, Status: StatusRunning}, FedProviders: map[string]bool{}}
	for _, x := range w.Executions {
		if x.ID == id {
			r.Execution = x
		}
	}
	keys := map[string]bool{}
	for _, s := range w.Steps {
		if s.ExecutionID != id {
			continue
		}
		s.Attempts = slices.Clone(s.Attempts)
		for i := range s.Attempts {
			s.Attempts[i].ExecutionID, s.Attempts[i].StepID = id, s.ID
			if k := s.Attempts[i].IdempotencyKey; k != "" {
				keys[k] = true
			}
		}
		r.Steps = append(r.Steps, s)
	}
	// The store keeps the execution a stray trace's effect joined as a
	// derived column and loads the effect with that execution.
	runs, stray := w.runs()
	joined := joinedEffects(runs)
	for _, e := range w.Effects {
		r.FedProviders[e.Provider] = true
		e.JoinedExecutionID, e.StrayTrace = joined[e.Ref()], stray[e.TraceID]
		if e.JoinedExecutionID != "" {
			_, e.Inferred, _ = InferAttempt(e, r)
		}
		if e.ExecutionID == id || keys[e.IdempotencyKey] || e.JoinedExecutionID == id {
			r.Effects = append(r.Effects, e)
		}
	}
	for _, s := range w.Steps {
		for _, a := range s.Attempts {
			if s.ExecutionID != id && keys[a.IdempotencyKey] {
				r.Peers = append(r.Peers, peer(s.ExecutionID, s.ID, a))
			}
		}
	}
	return r
}

func rules(fs []Finding) []Rule {
	var out []Rule
	for _, f := range fs {
		out = append(out, f.Rule)
	}
	return out
}

// designExample is the README's exec_01H8: step-4 timed out, and its retry
// was answered by the mail API from its key store.
func designExample() Run {
	a1 := try(1, 11.2, 21.2, OutcomeTimeout, key("ik_a94a0b1d"), worker("pid-4121"), provider("mail-api"),
		args(`{"subject":"Your June invoice","to":"jordan@acme.dev"}`))
	a1.Tool, a1.Effect, a1.Error = "send_invoice_email", EffectWrite, "network timeout after 10s"
	a2 := try(2, 21.3, 21.41, OutcomeOK, key("ik_a94a0b1d"), dedup,
		args(`{"subject":"Your June invoice","to":"jordan@acme.dev"}`))
	a2.Tool, a2.Effect = "send_invoice_email", EffectWrite
	for _, a := range []*Attempt{&a1, &a2} {
		a.ExecutionID, a.StepID = "exec_01H8", "step-4"
	}
	return Run{
		Execution: Execution{ID: "exec_01H8", Name: "billing-agent", Status: StatusCompleted,
			StartedAt: at(11.12), EndedAt: at(64), IdempotencyKey: "run_7f3a"},
		Steps: []Step{{ExecutionID: "exec_01H8", ID: "step-4", Attempts: []Attempt{a1, a2}}},
		Effects: []Effect{{Provider: "mail-api", ID: "msg_41bcc7", IdempotencyKey: "ik_a94a0b1d",
			ExecutionID: "exec_01H8", StepID: "step-4", Target: "jordan@acme.dev", At: at(11.35)}},
		FedProviders: map[string]bool{"mail-api": true},
	}
}

func span(traceID, spanID string) attemptOpt {
	return func(a *Attempt) { a.TraceID, a.SpanID = traceID, spanID }
}

// httpSpan is an HTTP client span of exec_1 under parent.
func httpSpan(traceID, spanID, parent string) Span {
	return Span{ExecutionID: "exec_1", TraceID: traceID, SpanID: spanID, ParentSpanID: parent, Role: RoleHTTP, Name: "POST"}
}

// traced is a mail-api effect at sec whose request came from span spanID
// of trace traceID.
func traced(id, key, traceID, spanID string, sec float64) Effect {
	return Effect{Provider: "mail-api", ID: id, IdempotencyKey: key, TraceID: traceID, SpanID: spanID, At: at(sec)}
}

func fingerprinted(e Effect, fingerprint string) Effect {
	e.Fingerprint = fingerprint
	return e
}
