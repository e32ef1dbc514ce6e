package temporal_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/ingest/feed/temporal"
	"github.com/oncetrace/oncetrace/trace"
)

// frameworkFixtures holds the runs `make fixtures` records from a real
// Temporal dev server and worker (naive retry, crash, keyed).
var frameworkFixtures = filepath.Join("..", "..", "testdata", "frameworks", "temporal")

// The recorded histories alone: one execution, one step, the attempts
// Temporal counted, the last one's worker and the one before it known
// only by the timeout Temporal kept as its last failure.
func TestFrameworkFixtureHistories(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join(frameworkFixtures, "*", "history.json"))
	if len(dirs) == 0 {
		t.Skipf("no recorded Temporal histories under %s yet (make fixtures records them)", frameworkFixtures)
	}
	for _, path := range dirs {
		dir := filepath.Dir(path)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
			if err != nil {
				t.Fatal(err)
			}
			var m struct {
				Namespace          string `json:"namespace"`
				ExecutionID        string `json:"execution_id"`
				WorkflowType       string `json:"workflow_type"`
				ActivityType       string `json:"activity_type"`
				ActivityID         string `json:"activity_id"`
				TraceID            string `json:"trace_id"`
				Attempts           int    `json:"attempts"`
				LastFailureTimeout string `json:"last_failure_timeout"`
				FinalWorker        string `json:"final_worker"`
			}
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			s := newStore(t)
			s.write(t, mapHistory(t, readHistoryBytes(t, b), temporal.MapOptions{Namespace: m.Namespace}))
			r := s.read(t, m.ExecutionID)
			x := r.Run.Execution
			if x.Name != m.WorkflowType || x.Status != trace.StatusCompleted || x.Labels["trace_id"] != m.TraceID {
				t.Errorf("execution: got %q %s trace %q, want %s completed in trace %s", x.Name, x.Status, x.Labels["trace_id"], m.WorkflowType, m.TraceID)
			}
			if len(r.Run.Steps) != 1 {
				t.Fatalf("steps: got %d, want 1", len(r.Run.Steps))
			}
			st := step(t, r.Run, m.ActivityID)
			if st.Tool != m.ActivityType || len(st.Attempts) != m.Attempts {
				t.Fatalf("step %s: got %s with %d attempts, want %s with %d", st.ID, st.Tool, len(st.Attempts), m.ActivityType, m.Attempts)
			}
			last := st.Attempts[len(st.Attempts)-1]
			if last.Outcome != trace.OutcomeOK || last.Worker != trace.NormaliseWorker(m.FinalWorker) || last.StartedAt.IsZero() || last.TraceID != m.TraceID {
				t.Errorf("last attempt: got %s on %q from %v in trace %q, want ok on %s with its start", last.Outcome, last.Worker, last.StartedAt, last.TraceID, m.FinalWorker)
			}
			kind := map[string]string{"TIMEOUT_TYPE_START_TO_CLOSE": "start-to-close", "TIMEOUT_TYPE_HEARTBEAT": "heartbeat"}[m.LastFailureTimeout]
			if m.Attempts > 1 {
				prev := st.Attempts[len(st.Attempts)-2]
				if kind == "" || prev.Outcome != trace.OutcomeTimeout || !strings.HasPrefix(prev.Error, kind+" timeout (recorded by Temporal") ||
					prev.Worker != "" || !prev.StartedAt.IsZero() || !prev.EndedAt.IsZero() {
					t.Errorf("attempt %d: got %s %q on %q %v..%v, want the %s timeout alone", prev.Number, prev.Outcome, prev.Error, prev.Worker, prev.StartedAt, prev.EndedAt, m.LastFailureTimeout)
				}
			}
		})
	}
}
