package ingest_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/oncetrace/oncetrace/ingest"
)

// TestParseEventShape: an event nested too deep, with an array or object
// too large, too many values, or a key twice is rejected naming where and
// the limit; at each limit it is accepted.
func TestParseEventShape(t *testing.T) {
	lim := ingest.DefaultLimits
	lim.JSONDepth, lim.JSONElements, lim.JSONValues = 3, 4, 12
	attempt := func(fields string) string {
		return `{"type":"attempt","execution_id":"x","step_id":"s","attempt":1` + fields + `}`
	}
	for _, tc := range []struct {
		name, event, want string // want "" when accepted
	}{
		{"at every limit", attempt(`,"args":{"a":[[1,2,3,4]],"b":1},"result":[1,2,3,4]`), ""},
		{"args nested too deep", attempt(`,"args":{"a":[[[1]]]}`), "args.a[0][0]: nested deeper than the limit of 3 levels"},
		{"result nested too deep", attempt(`,"result":[[[[]]]]`), "result[0][0][0]: nested deeper than the limit of 3 levels"},
		{"an array too long", attempt(`,"args":{"list":[1,2,3,4,5]}`), "args.list: array longer than the limit of 4 elements"},
		{"an object too large", attempt(`,"result":{"a":1,"b":2,"c":3,"d":4,"e":5}`), "result: object with more than the limit of 4 keys"},
		{"labels too large", `{"type":"execution","execution_id":"x","labels":{"a":"1","b":"2","c":"3","d":"4","e":"5"}}`,
			"labels: object with more than the limit of 4 keys"},
		{"too many values", attempt(`,"args":[[1,2,3],[1,2,3],[1,2,3]],"result":[1]`), "result[0]: more than the limit of 12 values in one event"},
		{"a key twice in args", attempt(`,"args":{"to":"a@x","subject":"s","to":"b@x"}`), "args.to: duplicate key"},
		{"a key twice, escaped", attempt(`,"args":{"to":"a@x","\u0074o":"b@x"}`), "args.to: duplicate key"},
		{"a key twice deep in result", attempt(`,"result":[{"ok":true},{"id":{"n":1,"n":2}}]`), "result[1].id.n: duplicate key"},
		{"a key twice in labels", `{"type":"execution","execution_id":"x","labels":{"customer":"acme","customer":"evil"}}`, "labels.customer: duplicate key"},
		{"a field twice", attempt(`,"attempt":2`), "attempt: duplicate key"},
		{"type twice", `{"type":"execution","type":"attempt","execution_id":"x"}`, "type: duplicate key"},
		{"keys differing in case", attempt(`,"args":{"to":"a","To":"b"}`), ""},
		{"one key in two objects", attempt(`,"args":[{"to":"a"},{"to":"b"}]`), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ingest.ParseEvent([]byte(tc.event), lim)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("ParseEvent(%s): got %q, want %q", tc.event, got, tc.want)
			}
		})
	}
}

// The attack: one event whose args is an array of four million
// zeros. It is rejected by index, naming the limit, without decoding the
// array: a few allocations, not four million.
func TestDecodeRefusesHugeArrayCheaply(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"type":"attempt","execution_id":"x","step_id":"s","attempt":1,"args":[`)
	b.WriteString(strings.Repeat("0,", 4<<20))
	b.WriteString(`0]}`)
	body := []byte(b.String())
	for _, format := range []ingest.Format{ingest.FormatJSON, ingest.FormatNDJSON} {
		var batch ingest.Batch
		var err error
		allocs := testing.AllocsPerRun(2, func() { batch, err = ingest.Decode(body, format, ingest.DefaultLimits) })
		if err != nil || len(batch.Events) != 0 || len(batch.Rejected) != 1 ||
			batch.Rejected[0].Error != "args: array longer than the limit of 10000 elements" {
			t.Fatalf("format %d: got %+v, %v; want event 0 rejected naming the limit of 10000 elements", format, batch, err)
		}
		if allocs > 30 {
			t.Errorf("format %d: got %.0f allocations refusing it, want at most 30", format, allocs)
		}
	}
}

func TestDecodeDuplicateKeys(t *testing.T) {
	valid := `{"type":"execution","execution_id":"x"}`
	dup := `{"type":"attempt","execution_id":"x","step_id":"s","attempt":1,"args":{"to":"a@x","to":"b@x"}}`
	b, err := ingest.Decode([]byte(`[`+valid+`,`+dup+`]`), ingest.FormatJSON, ingest.DefaultLimits)
	if err != nil || len(b.Events) != 1 || len(b.Rejected) != 1 || b.Rejected[0] != (ingest.Rejection{Index: 1, Error: "args.to: duplicate key"}) {
		t.Fatalf("a batch with a key twice in event 1: got %+v, %v; want event 0 stored and event 1 rejected naming args.to", b, err)
	}
	// The envelope's own "events" twice: which array is meant?
	_, err = ingest.Decode([]byte(`{"events":[`+valid+`],"events":[`+valid+`]}`), ingest.FormatJSON, ingest.DefaultLimits)
	requestErrorOf(t, err, http.StatusBadRequest, "events: duplicate key")
	// Still one id for one event, whatever its key order and spacing.
	a, _ := ingest.ParseEvent([]byte(`{"type":"execution","execution_id":"x","labels":{"a":"1","b":"2"}}`), ingest.DefaultLimits)
	c, _ := ingest.ParseEvent([]byte(`{ "labels":{"b":"2","a":"1"}, "execution_id":"x","type":"execution" }`), ingest.DefaultLimits)
	if a.ID == "" || a.ID != c.ID {
		t.Errorf("derived ids of one event in two key orders: got %q and %q, want one", a.ID, c.ID)
	}
}

// Over the event limit, but broken JSON further on: the body is not JSON,
// a 400, whatever its length; JSON all along, a 413.
func TestDecodeEventLimitOnlyForJSON(t *testing.T) {
	lim := ingest.DefaultLimits
	lim.Events = 2
	ev := `{"type":"execution","execution_id":"x"}`
	_, err := ingest.Decode([]byte(`[`+ev+`,`+ev+`,`+ev+`,oops]`), ingest.FormatJSON, lim)
	requestErrorOf(t, err, http.StatusBadRequest, "body: invalid JSON")
	_, err = ingest.Decode([]byte(`{"events":[`+ev+`,`+ev+`,`+ev+`]}`), ingest.FormatJSON, lim)
	requestErrorOf(t, err, http.StatusRequestEntityTooLarge, "limit of 2 events")
}

// An OTLP tool call's arguments in a string are mapped as JSON only when
// they would pass as an event's JSON: a key twice, or four million
// elements, stay the string that was sent and are never decoded.
func TestMapOTLPArgumentsKeptAsSent(t *testing.T) {
	huge := "[" + strings.Repeat("0,", 1<<20) + "0]"
	for _, tc := range []struct {
		name, args string
		wantString bool   // args stored as a JSON string
		wantReject string // the span rejected, naming this
	}{
		{"plain JSON", `{"to":"a@x"}`, false, ""},
		{"a key twice", `{"to":"a@x","to":"b@x"}`, true, ""},
		{"four million elements", huge, true, "args: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			td := otlpRequest(1, func(_ int, sp ptrace.Span) {
				sp.SetEndTimestamp(sp.StartTimestamp() + 1000)
				sp.Attributes().PutStr("gen_ai.operation.name", "execute_tool")
				sp.Attributes().PutStr("gen_ai.tool.name", "send_email")
				sp.Attributes().PutStr("gen_ai.tool.call.arguments", tc.args)
			})
			sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
			sp.SetParentSpanID([8]byte{9})
			res := ingest.MapOTLP(td, ingest.OTLPConfig{Limits: ingest.DefaultLimits})
			if tc.wantReject != "" {
				if res.Rejected != 1 || len(res.Reasons) != 1 || !strings.Contains(res.Reasons[0], tc.wantReject) {
					t.Fatalf("mapped: got %d rejected %q, want the span rejected naming %q", res.Rejected, res.Reasons, tc.wantReject)
				}
				return
			}
			for _, ev := range res.Events {
				if ev.Attempt == nil {
					continue
				}
				var s string
				isString := json.Unmarshal(ev.Attempt.Args, &s) == nil
				if isString != tc.wantString {
					t.Errorf("args: got %s, want stored as a string: %v", ev.Attempt.Args, tc.wantString)
				}
				if tc.wantString && s != tc.args {
					t.Errorf("args: got %q, want the string as sent %q", s, tc.args)
				}
				return
			}
			t.Fatalf("mapped: got %d events (rejected %q), want an attempt", len(res.Events), res.Reasons)
		})
	}
}
