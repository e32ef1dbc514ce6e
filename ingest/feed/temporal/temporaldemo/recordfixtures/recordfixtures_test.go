package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/oncetrace/oncetrace/ingest/feed/temporal/temporaldemo"
)

const fixturesDir = "../../../../testdata/frameworks/temporal"

// TestCommittedFixturesComplete: each committed Temporal recording passes
// the checks make fixtures ran when it recorded it — the history closes,
// attempt 2 follows a start-to-close (naive, keyed) or heartbeat (crash)
// timeout, the crash's attempt 2 ran on the second worker and not the
// killed one, two mail requests of the workflow's trace delivered two
// emails (naive, crash) or one (keyed), and the spans are those of the one
// trace, the killed worker's RunActivity span missing.
func TestCommittedFixturesComplete(t *testing.T) {
	for _, sc := range temporaldemo.Scenarios {
		t.Run(sc, func(t *testing.T) {
			dir := filepath.Join(fixturesDir, sc)
			if _, err := os.Stat(dir); err != nil {
				t.Fatalf("no recording: %v (make fixtures records it)", err)
			}
			m, reqs, err := readRecording(dir)
			if err != nil {
				t.Fatal(err)
			}
			if m.Run != sc || m.Framework != "temporal" {
				t.Fatalf("manifest: got %s/%s, want temporal/%s", m.Framework, m.Run, sc)
			}
			res := temporaldemo.Result{Scenario: sc, WorkflowID: m.WorkflowID, RunID: m.RunID, TaskQueue: m.TaskQueue,
				TraceID: m.TraceID, Workers: m.Workers, Killed: m.KilledWorker}
			var mails []request
			for _, q := range reqs {
				if q.Kind == "mail" {
					mails = append(mails, q)
				}
			}
			got, err := check(dir, res, reqs, recordedEmails(mails))
			if err != nil {
				t.Fatal(err)
			}
			if got.ExpectedEmails != m.ExpectedEmails || got.Attempts != m.Attempts || got.FinalWorker != m.FinalWorker {
				t.Errorf("manifest: got %d emails, attempt %d on %q; the recording says %d, %d, %q",
					m.ExpectedEmails, m.Attempts, m.FinalWorker, got.ExpectedEmails, got.Attempts, got.FinalWorker)
			}
		})
	}
}
