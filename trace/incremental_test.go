package trace

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"testing"
	"time"
)

// TestRunAuditorMatchesAnalyseRun grows and changes runs at random, one
// change at a time as commits do, and requires the incremental analysis
// of each to equal AnalyseRun's.
func TestRunAuditorMatchesAnalyseRun(t *testing.T) {
	base := time.Date(2026, 6, 30, 14, 0, 0, 0, time.UTC)
	incremental := 0
	for seed := range int64(40) {
		rng := rand.New(rand.NewSource(seed))
		r := Run{Execution: Execution{ID: "x", Status: StatusRunning}, FedProviders: map[string]bool{"mail": true}}
		var ra RunAuditor
		pick := func(options ...string) string { return options[rng.Intn(len(options))] }
		key := func() string { return pick("", "k1", "k2", "k3", "k4", "k5", fmt.Sprintf("k%d", rng.Intn(40))) }
		attempt := func(step string, n int) Attempt {
			at := base.Add(time.Duration(rng.Intn(600)) * time.Second)
			a := Attempt{ExecutionID: "x", StepID: step, Number: n, Tool: pick("send", "read", ""), Effect: EffectClass(pick("write", "read", "unsafe", "")),
				Provider: pick("mail", "pay", ""), Outcome: Outcome(pick("ok", "ok", "error", "timeout", "replayed", "")), Deduplicated: rng.Intn(5) == 0,
				IdempotencyKey: key(), Worker: pick("w1", "w2"), StartedAt: at, Args: json.RawMessage(pick(`{"to":"a"}`, `{"to":"b"}`, ""))}
			if a.Outcome != "" {
				a.EndedAt = at.Add(time.Duration(rng.Intn(3000)) * time.Millisecond)
			}
			if rng.Intn(3) == 0 {
				// A tool call's span: effects with its trace context hang
				// from it.
				a.TraceID, a.SpanID = "x", pick("sp1", "sp2", "sp3", fmt.Sprintf("sp%d", rng.Intn(40)))
			}
			return a
		}
		for change := range 120 {
			switch n := rng.Intn(10); {
			case n < 4 || len(r.Steps) == 0: // an attempt, in a new step or an old one
				i := rng.Intn(len(r.Steps) + 1)
				if i == len(r.Steps) {
					id := fmt.Sprintf("s%d", change)
					r.Steps = append(slices.Clone(r.Steps), Step{ExecutionID: "x", ID: id, Attempts: []Attempt{attempt(id, 1)}})
				} else {
					r.Steps = slices.Clone(r.Steps)
					s := &r.Steps[i]
					s.Attempts = append(slices.Clone(s.Attempts), attempt(s.ID, len(s.Attempts)+1))
				}
			case n < 5: // an attempt changes (its end arrives)
				r.Steps = slices.Clone(r.Steps)
				s := &r.Steps[rng.Intn(len(r.Steps))]
				s.Attempts = slices.Clone(s.Attempts)
				a := &s.Attempts[rng.Intn(len(s.Attempts))]
				a.Outcome, a.EndedAt = "ok", a.StartedAt.Add(time.Second)
			case n < 7: // an effect
				f := Effect{Provider: pick("mail", "pay"), ID: fmt.Sprintf("m%d", change), IdempotencyKey: key(),
					At: base.Add(time.Duration(rng.Intn(600)) * time.Second), Fingerprint: pick("", "fa", "fb")}
				switch rng.Intn(5) {
				case 3:
					// Of another trace, which may be a stray one (a lone HTTP
					// span's): the run holds it by its names or key.
					f.TraceID, f.SpanID, f.StrayTrace = "t2", "h1", rng.Intn(2) == 0
					if rng.Intn(2) == 0 {
						f.ExecutionID = "x"
					}
				case 0:
					f.ExecutionID, f.StepID = "x", r.Steps[rng.Intn(len(r.Steps))].ID
				case 1:
					f.ExecutionID, f.StepID = pick("x", "y"), pick("s1", "s2", "gone")
				case 2:
					f.TraceID = "x"
					if rng.Intn(2) == 0 {
						// Sent from a tool call's span, which may not have
						// arrived yet.
						f.SpanID = pick("sp1", "sp2", "sp3", fmt.Sprintf("sp%d", rng.Intn(40)))
					}
				}
				r.Effects = append(slices.Clone(r.Effects), f)
			case n < 8 && len(r.Effects) > 0: // an effect changes or goes
				r.Effects = slices.Clone(r.Effects)
				i := rng.Intn(len(r.Effects))
				switch rng.Intn(3) {
				case 0:
					r.Effects[i].IdempotencyKey = key()
				case 1:
					// Its trace turns out stray, or no longer is.
					r.Effects[i].StrayTrace = !r.Effects[i].StrayTrace
				default:
					r.Effects = slices.Delete(r.Effects, i, i+1)
				}
			case n < 9: // a peer
				p := attempt(pick("p1", "p2"), rng.Intn(3)+1)
				p.ExecutionID = pick("y", "z")
				r.Peers = append(slices.Clone(r.Peers), p)
			default: // the fed providers, or a step goes
				if rng.Intn(2) == 0 {
					r.FedProviders = map[string]bool{"mail": true, "pay": rng.Intn(2) == 0}
				} else {
					i := rng.Intn(len(r.Steps))
					r.Steps = slices.Delete(slices.Clone(r.Steps), i, i+1)
				}
			}
			got, want := ra.Analyse(r, DefaultConfig), AnalyseRun(r, DefaultConfig)
			if ra.ready && len(r.Steps) > 0 {
				incremental++
			}
			if g, w := mustJSON(t, got.Findings), mustJSON(t, want.Findings); g != w {
				t.Fatalf("seed %d, change %d: findings\ngot  %s\nwant %s", seed, change, g, w)
			}
			if g, w := mustJSON(t, got.Verdict), mustJSON(t, want.Verdict); g != w {
				t.Fatalf("seed %d, change %d: verdict\ngot  %s\nwant %s", seed, change, g, w)
			}
			if got.Counts != want.Counts || !maps.Equal(got.States, want.States) {
				t.Fatalf("seed %d, change %d: counts %+v states %v, want %+v %v", seed, change, got.Counts, got.States, want.Counts, want.States)
			}
		}
	}
	if incremental == 0 {
		t.Fatal("no analysis was incremental")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
