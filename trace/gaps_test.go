package trace

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestGaps(t *testing.T) {
	tests := []struct {
		name string
		run  Run
		cfg  Config
		want []Gap
	}{
		{"crash: the worker changed", run(
			step("s1", "t", EffectWrite, try(1, 0, 1, OutcomeOK, worker("w1"))),
			step("s2", "t", EffectWrite, try(1, 54, 55, OutcomeOK, worker("w2")))),
			Config{},
			[]Gap{{Start: at(1), End: at(54), Kind: GapCrash, WorkerBefore: "w1", WorkerAfter: "w2"}}},
		{"crash: an attempt before it never finished (contract ui_gap)", run(
			step("step-4", "send_invoice_email", EffectWrite,
				try(1, 0, -1, "", worker("w1")),
				try(2, 53, 53.1, OutcomeOK, worker("w1"), dedup))),
			Config{},
			[]Gap{{Start: at(0), End: at(53), Kind: GapCrash, WorkerBefore: "w1", WorkerAfter: "w1"}}},
		{"idle: same worker, everything finished", run(
			step("s1", "t", EffectWrite, try(1, 0, 1, OutcomeOK, worker("w1"))),
			step("s2", "t", EffectWrite, try(1, 31, 32, OutcomeOK, worker("w1")))),
			Config{},
			[]Gap{{Start: at(1), End: at(31), Kind: GapIdle, WorkerBefore: "w1", WorkerAfter: "w1"}}},
		{"idle: a worker unknown on one side", run(
			step("s1", "t", EffectWrite, try(1, 0, 1, OutcomeOK, worker("w1"))),
			step("s2", "t", EffectWrite, try(1, 31, 32, OutcomeOK))),
			Config{},
			[]Gap{{Start: at(1), End: at(31), Kind: GapIdle, WorkerBefore: "w1"}}},
		{"below the default threshold: none", run(
			step("s1", "t", EffectWrite, try(1, 0, 1, OutcomeOK, worker("w1"))),
			step("s2", "t", EffectWrite, try(1, 5, 6, OutcomeOK, worker("w2")))),
			Config{},
			nil},
		{"a configured threshold reports shorter gaps", run(
			step("s1", "t", EffectWrite, try(1, 0, 1, OutcomeOK, worker("w1"))),
			step("s2", "t", EffectWrite, try(1, 3, 4, OutcomeOK, worker("w1")))),
			Config{GapThreshold: time.Second},
			[]Gap{{Start: at(1), End: at(3), Kind: GapIdle, WorkerBefore: "w1", WorkerAfter: "w1"}}},
		{"overlapping attempts leave no gap; the one that ended last is before it", run(
			step("s1", "t", EffectRead, try(1, 0, 20, OutcomeOK, worker("w1"))),
			step("s2", "t", EffectRead, try(1, 5, 10, OutcomeOK, worker("w9"))),
			step("s3", "t", EffectRead, try(1, 40, 41, OutcomeOK, worker("w1")))),
			Config{},
			[]Gap{{Start: at(20), End: at(40), Kind: GapIdle, WorkerBefore: "w1", WorkerAfter: "w1"}}},
		{"an unfinished attempt explains only the first gap after it", run(
			step("s1", "t", EffectWrite, try(1, 0, -1, ""), try(2, 30, 31, OutcomeOK)),
			step("s2", "t", EffectWrite, try(1, 60, 61, OutcomeOK))),
			Config{},
			[]Gap{
				{Start: at(0), End: at(30), Kind: GapCrash},
				{Start: at(31), End: at(60), Kind: GapIdle},
			}},
		{"no attempts", run(), Config{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Gaps(tt.run, tt.cfg)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestGapJSONCarriesSeconds(t *testing.T) {
	b, err := json.Marshal(Gap{Start: at(0), End: at(53), Kind: GapCrash})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"seconds":53`) {
		t.Errorf("got %s, want a seconds field of 53", b)
	}
}
