package ingest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
)

// fuzzSeeds are added with f.Add besides the corpus in testdata/fuzz: every
// event type, the edges of each field, and the README's history.
var fuzzSeeds = append([]string{
	`{"type":"execution","execution_id":"x"}`,
	`{"type":"execution","execution_id":"x","labels":{"a":"1","b":""},"status":"failed","started_at":0,"ended_at":1.5}`,
	`{"type":"attempt","execution_id":"x","step_id":"s","attempt":1000000,"args":[1,{"b":null,"a":"\u2028<&>"}],"result":"\ud800"}`,
	`{"type":"attempt","execution_id":"x","step_id":"s","attempt":1,"started_at":"2026-06-30T14:02:11+02:00","ended_at":1782828131120.123,"outcome":"replayed"}`,
	`{"type":"effect","provider":"p","effect_id":"e","at":"2261-12-31T23:59:59.999999999Z","target":"\u0000"}`,
	`{"type":"effect","id":null,"provider":"p","effect_id":"e","execution_id":null}`,
	`{"type":"attempt","execution_id":"x","step_id":"s","attempt":1.0}`,
	`{"type":"attempt","execution_id":"x","step_id":"s","attempt":"1"}`,
	`{"type":"execution","execution_id":"x","ended_at":"2026-06-30T14:02:11Z","started_at":"2026-06-30T14:02:12Z"}`,
	`{"type":"execution","execution_id":"x","started_at":1e3}`,
	`{"type":"execution","execution_id":"x","started_at":-0}`,
	`{"type":"execution","execution_id":"x"} {}`,
	`{"type":"span"}`,
	`{"type":"span","execution_id":"x","trace_id":"t","span_id":"s","parent_span_id":"p","role":"model","model":"gpt-4o","input_tokens":120,"output_tokens":18,"started_at":0,"ended_at":1}`,
	`{"type":"span","execution_id":"x","trace_id":"t","span_id":"s","role":"http","http_method":"POST","http_url":"http://h/","http_status":200,"idempotency_key":"k","error":"e"}`,
	`{"type":"span","execution_id":"x","trace_id":"t","span_id":"s","role":"tool","input_tokens":-1}`,
	`{"type":"attempt","execution_id":"x","step_id":"s","trace_id":"t","span_id":"s1","effect":"unknown","started_at":0}`,
	`{"type":"effect","provider":"p","effect_id":"e","trace_id":"t","span_id":"s"}`,
	`{"type":"execution","execution_id":"x","name":"n","name_source":"traceloop.entity.name"}`,
	`{"type":"execution","execution_id":"x","labels":{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8}}`,
	`[]`,
	`"x"`,
	"{\"type\":\"execution\",\"execution_id\":\"\xff\"}",
}, designEvents...)

// FuzzParseEvent: ParseEvent never panics, and an event it accepts has a
// body that is a fixed point: parsing the stored body gives the same event.
func FuzzParseEvent(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := ingest.ParseEvent(raw, ingest.DefaultLimits)
		if err != nil {
			// Errors read "field: problem", the same problem every time:
			// a client retrying a request must see the same answer.
			if msg := err.Error(); !strings.Contains(msg, ": ") {
				t.Errorf("error: got %q, want \"field: problem\"", msg)
			}
			if _, again := ingest.ParseEvent(raw, ingest.DefaultLimits); again == nil || again.Error() != err.Error() {
				t.Errorf("error of a second parse: got %v, want %q", again, err)
			}
			return
		}
		if ev.ID == "" {
			t.Fatalf("id: got none for %q", raw)
		}
		if !payloadMatches(ev) {
			t.Fatalf("payload: type %s with execution %v, attempt %v, effect %v, span %v; want exactly the one of its type",
				ev.Type, ev.Execution != nil, ev.Attempt != nil, ev.Effect != nil, ev.Span != nil)
		}
		again, err := ingest.ParseEvent(ev.Body, ingest.DefaultLimits)
		if err != nil {
			t.Fatalf("re-parsing the body %s of %q: got error %v, want none", ev.Body, raw, err)
		}
		if again.ID != ev.ID || again.Type != ev.Type || !bytes.Equal(again.Body, ev.Body) {
			t.Fatalf("re-parsed: got id %s type %s body %s, want id %s type %s body %s",
				again.ID, again.Type, again.Body, ev.ID, ev.Type, ev.Body)
		}
		if !reflect.DeepEqual(again, ev) {
			t.Fatalf("re-parsed: got %+v, want %+v", again, ev)
		}
	})
}

func payloadMatches(ev trace.Event) bool {
	set := map[trace.EventType]bool{trace.EventExecution: ev.Execution != nil, trace.EventAttempt: ev.Attempt != nil,
		trace.EventEffect: ev.Effect != nil, trace.EventSpan: ev.Span != nil}
	n := 0
	for _, ok := range set {
		if ok {
			n++
		}
	}
	return n == 1 && set[ev.Type]
}

// fuzzLimits keep the event limit small so that the fuzzer reaches it.
var fuzzLimits = func() ingest.Limits {
	lim := ingest.DefaultLimits
	lim.Events = 8
	return lim
}()

// FuzzDecode: Decode never panics; without a request error every event of
// the request is either decoded or rejected, once, by its index; with one,
// the error agrees with what the body is.
func FuzzDecode(f *testing.F) {
	all := strings.Join(designEvents, ",")
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), false)
	}
	for _, s := range []string{
		`{"events":[` + all + `]}`,
		`[` + all + `]`,
		`{"events":[]}`,
		`{"events":5}`,
		`{"events":null}`,
		`{"events":[1,2],"type":"execution"}`,
		`[` + strings.Repeat(designEvents[4]+",", 8) + designEvents[4] + `]`,
		" \t\n",
		"",
	} {
		f.Add([]byte(s), false)
	}
	for _, s := range []string{
		strings.Join(designEvents, "\n"),
		"\r\n" + strings.Join(designEvents, "\r\n\r\n") + "\n",
		designEvents[0] + "\n{\n" + designEvents[1],
		strings.Repeat(designEvents[4]+"\n", 9),
		"\n \n",
		"[1]\n2\n\"3\"\nnull",
	} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, ndjson bool) {
		format := ingest.FormatJSON
		if ndjson {
			format = ingest.FormatNDJSON
		}
		b, err := ingest.Decode(data, format, fuzzLimits)
		raws, parseable := eventsIn(data, ndjson)
		want := len(raws)
		if err != nil {
			var re *ingest.RequestError
			if !errors.As(err, &re) {
				t.Fatalf("error: got %v (%T), want a *ingest.RequestError", err, err)
			}
			switch {
			case re.Status == http.StatusRequestEntityTooLarge:
				if !parseable || want <= fuzzLimits.Events {
					t.Fatalf("413 %q: got it for %d events (parseable %v), want it only over %d", re.Msg, want, parseable, fuzzLimits.Events)
				}
			case re.Status == http.StatusBadRequest:
				if parseable && want > 0 {
					t.Fatalf("400 %q: got it for %d parseable events, want them decoded or rejected", re.Msg, want)
				}
			default:
				t.Fatalf("status: got %d (%q), want 400 or 413", re.Status, re.Msg)
			}
			return
		}
		if !parseable {
			t.Fatalf("Decode: got %d events and %d rejections for a body that is not a request, want a 400", len(b.Events), len(b.Rejected))
		}
		if got := len(b.Events) + len(b.Rejected); got != want {
			t.Fatalf("events + rejected: got %d + %d = %d, want %d", len(b.Events), len(b.Rejected), got, want)
		}
		if want > fuzzLimits.Events {
			t.Fatalf("Decode: got %d events over the limit of %d, want a 413", want, fuzzLimits.Events)
		}
		// Each event fares in the batch exactly as it does alone, in order.
		events, rejected := b.Events, b.Rejected
		for i, raw := range raws {
			ev, err := ingest.ParseEvent(raw, fuzzLimits)
			if err != nil {
				if len(rejected) == 0 || rejected[0] != (ingest.Rejection{Index: i, Error: err.Error()}) {
					t.Fatalf("event %d %q: got rejections %+v, want {%d %s} next", i, raw, rejected, i, err)
				}
				rejected = rejected[1:]
				continue
			}
			if len(events) == 0 || events[0].ID != ev.ID || !bytes.Equal(events[0].Body, ev.Body) {
				t.Fatalf("event %d %q: got %d events left, want %s next", i, raw, len(events), ev.Body)
			}
			events = events[1:]
		}
	})
}

// eventsIn splits a request body without Decode: for NDJSON the non-blank
// lines; for JSON an array's elements, the array under "events" when the
// object has that key and no "type", else the object itself. parseable is
// false when the body is not one of those forms.
func eventsIn(data []byte, ndjson bool) (raws [][]byte, parseable bool) {
	if ndjson {
		for line := range strings.SplitSeq(string(data), "\n") {
			if line := bytes.TrimSpace([]byte(line)); len(line) > 0 {
				raws = append(raws, line)
			}
		}
		return raws, true
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, true
	}
	if !json.Valid(data) {
		return nil, false
	}
	var list []json.RawMessage
	switch data[0] {
	case '[':
		if json.Unmarshal(data, &list) != nil {
			return nil, false
		}
	case '{':
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) != nil {
			return nil, false
		}
		events, hasEvents := obj["events"]
		if _, hasType := obj["type"]; hasType || !hasEvents {
			return [][]byte{data}, true
		}
		if topLevelKeys(data, "events") > 1 {
			return nil, false // which array is meant? a 400
		}
		if json.Unmarshal(events, &list) != nil {
			return nil, false
		}
	default:
		return nil, false
	}
	for _, raw := range list {
		raws = append(raws, raw)
	}
	return raws, true
}

// topLevelKeys counts the keys of a JSON object equal to name, which a
// map keeps only once.
func topLevelKeys(object []byte, name string) int {
	dec := json.NewDecoder(bytes.NewReader(object))
	if _, err := dec.Token(); err != nil {
		return 0
	}
	n := 0
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return n
		}
		if key == name {
			n++
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return n
		}
	}
	return n
}
