package temporal_test

import (
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed/temporal"
	"github.com/oncetrace/oncetrace/trace"
)

// sendInvoice is the invoice history's send-invoice activity: its
// ActivityTaskScheduled (event 12) and ActivityTaskStarted (event 13).
func sendInvoice(t *testing.T, h *historypb.History) (*historypb.ActivityTaskScheduledEventAttributes, *historypb.ActivityTaskStartedEventAttributes) {
	t.Helper()
	sched := h.GetEvents()[11].GetActivityTaskScheduledEventAttributes()
	started := h.GetEvents()[12].GetActivityTaskStartedEventAttributes()
	if sched.GetActivityId() != "send-invoice" || started.GetScheduledEventId() != 12 {
		t.Fatalf("events 12 and 13: got %v and %v, want send-invoice scheduled and started", sched, started)
	}
	return sched, started
}

func attemptsOf(evs []trace.Event, step string) map[int][]*trace.Attempt {
	out := map[int][]*trace.Attempt{}
	for _, ev := range evs {
		if ev.Type == trace.EventAttempt && ev.Attempt.StepID == step {
			out[ev.Attempt.Number] = append(out[ev.Attempt.Number], ev.Attempt)
		}
	}
	return out
}

// An activity retried without limit: the attempts just before the known
// ones are made of their count, up to MaxEarlierAttempts.
func TestEarlierAttemptsAreBounded(t *testing.T) {
	h := readHistory(t, "invoice")
	_, started := sendInvoice(t, h)
	started.Attempt = 150
	got := attemptsOf(mapHistory(t, h, temporal.MapOptions{}), "send-invoice")
	// 150 (started), 149 (its last failure), 48..148 by count, and 1 (scheduled).
	if want := 1 + 1 + temporal.MaxEarlierAttempts + 1; len(got) != want {
		t.Errorf("got %d attempt numbers, want %d", len(got), want)
	}
	for _, n := range []int{1, 49, 148, 149, 150} {
		if len(got[n]) == 0 {
			t.Errorf("attempt %d: missing", n)
		}
	}
	for _, n := range []int{2, 48} {
		if len(got[n]) != 0 {
			t.Errorf("attempt %d: made, want it counted only by the last attempt's number", n)
		}
	}
	if a := got[149][0]; a.Outcome != trace.OutcomeTimeout || !strings.Contains(a.Error, "attempt 150's last failure") {
		t.Errorf("attempt 149: got %s %q", a.Outcome, a.Error)
	}
}

func TestPayloadsThatAreNotJSON(t *testing.T) {
	h := readHistory(t, "invoice")
	sched, _ := sendInvoice(t, h)
	sched.GetInput().GetPayloads()[0].GetMetadata()["encoding"] = []byte("binary/encrypted")
	for n, as := range attemptsOf(mapHistory(t, h, temporal.MapOptions{}), "send-invoice") {
		for _, a := range as {
			if len(a.Args) != 0 {
				t.Errorf("attempt %d: got args %s, want none from an encrypted payload", n, a.Args)
			}
		}
	}
}

func TestArgumentsOverTheLimitLeaveANote(t *testing.T) {
	for _, c := range []struct {
		limit        int
		args, result string
	}{
		// The input is 68 bytes of canonical JSON, the result 55.
		{64, `{"oncetrace":"args of 68 bytes, over the 64 an attempt keeps"}`, `{"message_id":"msg_jordan@acme.dev","status":"sent"}`},
		{20, "", ""}, // no room for the note either
	} {
		lim := ingest.DefaultLimits
		lim.JSONBytes = c.limit
		evs := mapHistory(t, readHistory(t, "invoice"), temporal.MapOptions{Limits: lim})
		// Attempt 3's events: its start and its end, each with the args.
		var args, result string
		for _, e := range attemptsOf(evs, "send-invoice")[3] {
			if len(e.Args) > 0 {
				args = string(e.Args)
			}
			result += string(e.Result)
		}
		if args != c.args || result != c.result {
			t.Errorf("limit %d: got args %s and result %s, want %s and %s", c.limit, args, result, c.args, c.result)
		}
	}
}

// Secrets in an activity's input are masked as the server masks any
// event's (serve --redact).
func TestArgumentsAreRedacted(t *testing.T) {
	h := readHistory(t, "invoice")
	sched, _ := sendInvoice(t, h)
	sched.GetInput().GetPayloads()[0].Data = []byte(`{"to":"jordan@acme.dev","api_key":"sk_live_123"}`)
	for _, as := range attemptsOf(mapHistory(t, h, temporal.MapOptions{}), "send-invoice") {
		for _, a := range as {
			if strings.Contains(string(a.Args), "sk_live_123") {
				t.Errorf("args: got %s, want the key masked", a.Args)
			}
		}
	}
}

// The other ways an activity's last attempt closes, on the refund
// history's ActivityTaskFailed (event 7, attempt 2).
func TestActivityCloses(t *testing.T) {
	for _, c := range []struct {
		name    string
		attrs   func(scheduled, started int64) any
		outcome trace.Outcome
		err     string
		ended   bool
	}{
		{"timed out", func(s, st int64) any {
			return &historypb.HistoryEvent_ActivityTaskTimedOutEventAttributes{ActivityTaskTimedOutEventAttributes: &historypb.ActivityTaskTimedOutEventAttributes{
				ScheduledEventId: s, StartedEventId: st, Failure: &failurepb.Failure{Message: "activity ScheduleToClose timeout",
					FailureInfo: &failurepb.Failure_TimeoutFailureInfo{TimeoutFailureInfo: &failurepb.TimeoutFailureInfo{TimeoutType: enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE}}}}}
		}, trace.OutcomeTimeout, "schedule-to-close timeout", true},
		{"canceled", func(s, st int64) any {
			return &historypb.HistoryEvent_ActivityTaskCanceledEventAttributes{ActivityTaskCanceledEventAttributes: &historypb.ActivityTaskCanceledEventAttributes{
				ScheduledEventId: s, StartedEventId: st}}
		}, trace.OutcomeError, "canceled", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := readHistory(t, "refund")
			closing := h.GetEvents()[6]
			failed := closing.GetActivityTaskFailedEventAttributes()
			switch a := c.attrs(failed.GetScheduledEventId(), failed.GetStartedEventId()).(type) {
			case *historypb.HistoryEvent_ActivityTaskTimedOutEventAttributes:
				closing.Attributes, closing.EventType = a, enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT
			case *historypb.HistoryEvent_ActivityTaskCanceledEventAttributes:
				closing.Attributes, closing.EventType = a, enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED
			}
			s := newStore(t)
			s.write(t, mapHistory(t, h, temporal.MapOptions{}))
			a := step(t, s.read(t, refundRun).Run, "refund").Attempts[1]
			if a.Number != 2 || a.Outcome != c.outcome || a.Error != c.err || a.EndedAt.IsZero() != !c.ended || a.Worker != workerA {
				t.Errorf("got attempt %d %s %q ended %v on %q, want attempt 2 %s %q on %s", a.Number, a.Outcome, a.Error, a.EndedAt, a.Worker, c.outcome, c.err, workerA)
			}
		})
	}
}
