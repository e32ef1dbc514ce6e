package follow_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed/temporal/devserver"
	"github.com/oncetrace/oncetrace/ingest/feed/temporal/follow"
	"github.com/oncetrace/oncetrace/ingest/writer"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
	"github.com/oncetrace/oncetrace/trace"
)

const taskQueue = "oncetrace-follow-test"

// startWorker runs a worker of BlockingWorkflow (devserver's blocking
// worker) on hostPort until the test ends.
func startWorker(t *testing.T, hostPort string, g *devserver.Gate) *devserver.BlockingWorker {
	return devserver.StartBlockingWorker(t, hostPort, "BlockingWorkflow", taskQueue, g)
}

func startWorkflow(t *testing.T, w *devserver.BlockingWorker, id string) string {
	return w.Start(t, id)
}

// oncetrace is a real SQLite database and writer.
func oncetrace(t *testing.T) (*store.DB, *writer.Writer) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(db, writer.DefaultConfig)
	t.Cleanup(func() { w.Close(); db.Close() })
	return db, w
}

func startFollower(t *testing.T, hostPort string, w *writer.Writer, maxRuns int) *follow.Follower {
	t.Helper()
	target, err := follow.ParseTarget(hostPort)
	if err != nil {
		t.Fatal(err)
	}
	f := follow.Start(context.Background(), follow.Config{Target: target, Map: follow.ExecutionsOnly(ingest.DefaultLimits),
		Writer: w, PollInterval: 200 * time.Millisecond, MaxRuns: maxRuns})
	t.Cleanup(f.Stop)
	return f
}

// waitStatus waits until the execution is stored with the status.
func waitStatus(t *testing.T, db *store.DB, id string, want trace.Status, within time.Duration) {
	t.Helper()
	var got trace.Status
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		run, err := db.Run(context.Background(), id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			got = "(absent)"
		case err != nil:
			t.Fatal(err)
		default:
			got = run.Execution.Status
		}
		if got == want {
			return
		}
	}
	t.Fatalf("execution %s: got status %s after %s, want %s", id, got, within, want)
}

func TestFollowRunningThenClosed(t *testing.T) {
	hostPort, _ := devserver.Start(t)
	g := &devserver.Gate{}
	c := startWorker(t, hostPort, g)
	db, w := oncetrace(t)

	// Closed before the follower starts: found by the look-back.
	before := startWorkflow(t, c, "before")
	g.Release("before")
	waitClosed(t, c.Client, "before")

	f := startFollower(t, hostPort, w, follow.DefaultMaxRuns)
	waitStatus(t, db, before, trace.StatusCompleted, 30*time.Second)

	during := startWorkflow(t, c, "during")
	waitStatus(t, db, during, trace.StatusRunning, 30*time.Second)
	if st := f.Status(); st.State != follow.StateFollowing || st.RunsFollowed != 1 || st.LastPoll.IsZero() || st.Lag > 10*time.Second {
		t.Errorf("status while one run is open: got %+v, want following, 1 run followed, a recent poll", st)
	}
	g.Release("during")
	waitStatus(t, db, during, trace.StatusCompleted, 30*time.Second)

	// Read again and again, the history stores nothing twice.
	var seq int64
	for range 3 {
		time.Sleep(300 * time.Millisecond)
		s, err := db.LastSeq(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if seq != 0 && s != seq {
			t.Errorf("events stored while nothing happened: sequence went from %d to %d", seq, s)
		}
		seq = s
	}
	if seq != 4 {
		t.Errorf("events stored: got %d, want 4 (started and closed for each of two runs)", seq)
	}
}

// TestFollowOverTheCap: with room for one long poll, a second running run
// is read whole at each pass instead: it still shows what its history
// gains while it runs (a signal), and goes from running to completed.
func TestFollowOverTheCap(t *testing.T) {
	hostPort, _ := devserver.Start(t)
	g := &devserver.Gate{}
	c := startWorker(t, hostPort, g)
	db, w := oncetrace(t)
	target, err := follow.ParseTarget(hostPort)
	if err != nil {
		t.Fatal(err)
	}
	f := follow.Start(context.Background(), follow.Config{Target: target, Map: everyEvent(t), Writer: w,
		PollInterval: 200 * time.Millisecond, MaxRuns: 1})
	t.Cleanup(f.Stop)
	a, b := startWorkflow(t, c, "a"), startWorkflow(t, c, "b")
	waitStatus(t, db, a, trace.StatusRunning, 30*time.Second)
	waitStatus(t, db, b, trace.StatusRunning, 30*time.Second)
	if st := f.Status(); st.RunsFollowed != 1 || st.RunsPolled != 1 {
		t.Errorf("status: got %d followed and %d polled, want 1 and 1", st.RunsFollowed, st.RunsPolled)
	}
	for _, id := range []string{"a", "b"} {
		x := id + "/" + runID(t, c.Client, id)
		before := storedEvents(t, db, x)
		if err := c.Client.SignalWorkflow(context.Background(), id, "", "nudge", nil); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); storedEvents(t, db, x) <= before; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("run %s: still %d events 30 s after a signal, want more while it runs", x, before)
			}
		}
	}
	waitStatus(t, db, b, trace.StatusRunning, time.Second)
	g.Release("a")
	g.Release("b")
	waitStatus(t, db, a, trace.StatusCompleted, 30*time.Second)
	waitStatus(t, db, b, trace.StatusCompleted, 30*time.Second)
}

// everyEvent maps a history as ExecutionsOnly does, plus one execution
// event per history event, so that a test sees a history grow.
func everyEvent(t *testing.T) follow.Mapper {
	runs := follow.ExecutionsOnly(ingest.DefaultLimits)
	return func(h *historypb.History, run follow.Run) ([]trace.Event, error) {
		out, err := runs(h, run)
		if err != nil || len(out) == 0 {
			return out, err
		}
		x := out[0].Execution.ID
		for _, he := range h.GetEvents() {
			raw := fmt.Sprintf(`{"type":"execution","id":%q,"execution_id":%q}`, fmt.Sprintf("test:%s:%d", x, he.GetEventId()), x)
			ev, err := ingest.ParseEvent([]byte(raw), ingest.DefaultLimits)
			if err != nil {
				t.Error(err)
				return nil, err
			}
			out = append(out, ev)
		}
		return out, nil
	}
}

func runID(t *testing.T, c client.Client, id string) string {
	t.Helper()
	d, err := c.DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	return d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

func storedEvents(t *testing.T, db *store.DB, executionID string) int {
	t.Helper()
	evs, err := db.EventsAfter(context.Background(), 0, executionID, 100000)
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

// TestFollowAcrossARestart: the cluster goes away (the status says so and
// the lag grows) and comes back with its state (--db-filename); a run
// open across the restart and one started after it both end completed.
func TestFollowAcrossARestart(t *testing.T) {
	srv := devserver.StartServer(t, devserver.Options{Persist: true})
	g := &devserver.Gate{}
	c := startWorker(t, srv.HostPort, g)
	db, w := oncetrace(t)
	f := startFollower(t, srv.HostPort, w, follow.DefaultMaxRuns)
	across := startWorkflow(t, c, "across")
	waitStatus(t, db, across, trace.StatusRunning, 30*time.Second)

	srv.Stop()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		st := f.Status()
		if st.State == follow.StateUnreachable && st.Errors > 0 && st.LastError != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status with the cluster stopped: got %+v, want unreachable with an error", st)
		}
	}
	if err := srv.Restart(context.Background()); err != nil {
		t.Fatalf("restart the dev server: %v", err)
	}
	after := startWorkflow(t, c, "after")
	g.Release("across")
	g.Release("after")
	waitStatus(t, db, after, trace.StatusCompleted, 60*time.Second)
	waitStatus(t, db, across, trace.StatusCompleted, 60*time.Second)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if st := f.Status(); st.State == follow.StateFollowing && st.Lag < 10*time.Second {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("status after the restart: got %+v, want following with a small lag", st)
		}
	}
}

func waitClosed(t *testing.T, c client.Client, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
		t.Fatal(fmt.Errorf("workflow %s: %w", id, err))
	}
}

// TestFollowAcrossAnInMemoryRestart: a cluster that forgets everything on
// restart (start-dev without --db-filename) loses its runs, not
// oncetrace's: what was stored stays, and a run started after the restart
// is followed.
func TestFollowAcrossAnInMemoryRestart(t *testing.T) {
	srv := devserver.StartServer(t, devserver.Options{})
	g := &devserver.Gate{}
	c := startWorker(t, srv.HostPort, g)
	db, w := oncetrace(t)
	f := startFollower(t, srv.HostPort, w, follow.DefaultMaxRuns)
	before := startWorkflow(t, c, "before")
	g.Release("before")
	waitStatus(t, db, before, trace.StatusCompleted, 30*time.Second)
	open := startWorkflow(t, c, "open")
	waitStatus(t, db, open, trace.StatusRunning, 30*time.Second)

	if err := srv.Restart(context.Background()); err != nil {
		t.Fatalf("restart the dev server: %v", err)
	}
	after := startWorkflow(t, c, "after")
	waitStatus(t, db, after, trace.StatusRunning, 60*time.Second)
	g.Release("after")
	waitStatus(t, db, after, trace.StatusCompleted, 60*time.Second)
	waitStatus(t, db, before, trace.StatusCompleted, time.Second)
	waitStatus(t, db, open, trace.StatusRunning, time.Second) // the cluster forgot it; oncetrace did not
	if st := f.Status(); st.State != follow.StateFollowing || st.RunsFollowed != 0 {
		t.Errorf("status after the restart: got %+v, want following with no run left open", st)
	}
}
