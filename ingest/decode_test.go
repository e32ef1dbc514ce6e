package ingest_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
)

// requestErrorOf fails the test unless err is a *RequestError with the
// wanted status whose message contains every wanted fragment.
func requestErrorOf(t *testing.T, err error, status int, fragments ...string) {
	t.Helper()
	var re *ingest.RequestError
	if !errors.As(err, &re) {
		t.Fatalf("error: got %v (%T), want a *ingest.RequestError with status %d", err, err, status)
	}
	if re.Status != status {
		t.Errorf("status: got %d, want %d (error %q)", re.Status, status, re.Msg)
	}
	for _, frag := range fragments {
		if !strings.Contains(re.Msg, frag) {
			t.Errorf("error: got %q, want it to contain %q", re.Msg, frag)
		}
	}
}

func gzipped(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestFormatOf(t *testing.T) {
	for _, tc := range []struct {
		contentType string
		want        ingest.Format
		wantErr     string // "" when the type is accepted
	}{
		{"", ingest.FormatJSON, ""},
		{"application/json", ingest.FormatJSON, ""},
		{"application/json; charset=utf-8", ingest.FormatJSON, ""},
		{"Application/JSON", ingest.FormatJSON, ""},
		{"application/x-ndjson", ingest.FormatNDJSON, ""},
		{"application/ndjson", ingest.FormatNDJSON, ""},
		{"application/jsonl", ingest.FormatNDJSON, ""},
		{"text/plain", 0, "Content-Type: text/plain is not supported"},
		{"application/x-www-form-urlencoded", 0, "Content-Type: application/x-www-form-urlencoded is not supported"},
		{"multipart/form-data; boundary=x", 0, "Content-Type: multipart/form-data is not supported"},
		{"application/json; =", 0, "Content-Type: cannot parse"},
		{"/", 0, "Content-Type: cannot parse"},
	} {
		t.Run(tc.contentType, func(t *testing.T) {
			got, err := ingest.FormatOf(tc.contentType)
			if tc.wantErr != "" {
				requestErrorOf(t, err, http.StatusUnsupportedMediaType, tc.wantErr)
				return
			}
			if err != nil {
				t.Fatalf("FormatOf(%q): got error %v, want none", tc.contentType, err)
			}
			if got != tc.want {
				t.Errorf("FormatOf(%q): got %v, want %v", tc.contentType, got, tc.want)
			}
		})
	}
}

func TestReadBody(t *testing.T) {
	const limit = 1 << 10
	payload := []byte(`{"type":"execution","execution_id":"exec_1"}`)
	atLimit := bytes.Repeat([]byte("a"), limit)
	overLimit := bytes.Repeat([]byte("a"), limit+1)
	// A bomb: 1 MiB of zeros squeezes into about a kilobyte, under the
	// limit on the wire but a thousand times over it once inflated.
	bomb := gzipped(t, make([]byte, 1<<20))
	if len(bomb) > 4*limit {
		t.Fatalf("bomb: %d compressed bytes, want a small one", len(bomb))
	}
	truncated := gzipped(t, payload)
	truncated = truncated[:len(truncated)-6]

	for _, tc := range []struct {
		name       string
		body       []byte
		encoding   string
		want       []byte
		wantStatus int // 0 when the body is accepted
		wantErr    []string
	}{
		{name: "no encoding", body: payload, want: payload},
		{name: "identity", body: payload, encoding: "identity", want: payload},
		{name: "gzip round trip", body: gzipped(t, payload), encoding: "gzip", want: payload},
		{name: "x-gzip", body: gzipped(t, payload), encoding: "x-gzip", want: payload},
		{name: "gzip in capitals", body: gzipped(t, payload), encoding: " GZIP ", want: payload},
		{name: "exactly the limit", body: atLimit, want: atLimit},
		{name: "gzip exactly the limit", body: gzipped(t, atLimit), encoding: "gzip", want: atLimit},
		{name: "one byte over", body: overLimit, wantStatus: http.StatusRequestEntityTooLarge,
			wantErr: []string{"body:", fmt.Sprint(limit)}},
		{name: "gzip one byte over", body: gzipped(t, overLimit), encoding: "gzip", wantStatus: http.StatusRequestEntityTooLarge,
			wantErr: []string{"body:", fmt.Sprint(limit)}},
		{name: "gzip bomb", body: bomb, encoding: "gzip", wantStatus: http.StatusRequestEntityTooLarge,
			wantErr: []string{"body:", fmt.Sprint(limit)}},
		{name: "gzip header on plain bytes", body: payload, encoding: "gzip", wantStatus: http.StatusBadRequest,
			wantErr: []string{"body:", "gzip"}},
		{name: "truncated gzip", body: truncated, encoding: "gzip", wantStatus: http.StatusBadRequest,
			wantErr: []string{"body:", "gzip"}},
		{name: "brotli", body: payload, encoding: "br", wantStatus: http.StatusUnsupportedMediaType,
			wantErr: []string{"Content-Encoding:", "br"}},
		{name: "deflate", body: payload, encoding: "deflate", wantStatus: http.StatusUnsupportedMediaType,
			wantErr: []string{"Content-Encoding:", "deflate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ingest.ReadBody(bytes.NewReader(tc.body), tc.encoding, limit)
			if tc.wantStatus != 0 {
				requestErrorOf(t, err, tc.wantStatus, tc.wantErr...)
				return
			}
			if err != nil {
				t.Fatalf("ReadBody: got error %v, want none", err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Errorf("ReadBody: got %d bytes %.40q, want %d bytes %.40q", len(got), got, len(tc.want), tc.want)
			}
		})
	}
}

// TestReadBodyReadError: a body that breaks off is a 400 naming the body,
// and blames gzip only when the body was gzip.
func TestReadBodyReadError(t *testing.T) {
	broken := errors.New("connection reset")
	for _, tc := range []struct {
		encoding string
		body     io.Reader
		wantGzip bool
	}{
		{"", iotest.ErrReader(broken), false},
		{"identity", iotest.ErrReader(broken), false},
		{"gzip", io.MultiReader(bytes.NewReader(gzipped(t, bytes.Repeat([]byte("x"), 1<<16))[:100]), iotest.ErrReader(broken)), true},
	} {
		t.Run(tc.encoding, func(t *testing.T) {
			_, err := ingest.ReadBody(tc.body, tc.encoding, 1<<20)
			requestErrorOf(t, err, http.StatusBadRequest, "body:", "connection reset")
			if got := strings.Contains(err.Error(), "gzip"); got != tc.wantGzip {
				t.Errorf("error %q: mentions gzip %v, want %v", err, got, tc.wantGzip)
			}
		})
	}
}

// TestReadBodyMaxBytesReader covers the server's path, where the wire body
// is already capped by http.MaxBytesReader: its error must still be a 413.
func TestReadBodyMaxBytesReader(t *testing.T) {
	const limit = 100
	rec := httptest.NewRecorder()
	body := http.MaxBytesReader(rec, io.NopCloser(bytes.NewReader(make([]byte, 10*limit))), limit)
	_, err := ingest.ReadBody(body, "", limit)
	requestErrorOf(t, err, http.StatusRequestEntityTooLarge, "body:", "100")
}

// The five events of the README's history, as separate lines.
var designEvents = []string{
	`{"type":"execution","id":"evt_1","execution_id":"exec_01H8","name":"billing-agent","status":"running","started_at":"2026-06-30T14:02:11.120Z","idempotency_key":"run_7f3a","labels":{"customer":"acme"}}`,
	`{"type":"attempt","id":"evt_2","execution_id":"exec_01H8","step_id":"step-4","attempt":1,"tool":"send_invoice_email","effect":"write","provider":"mail-api","args":{"to":"jordan@acme.dev","subject":"Your June invoice"},"idempotency_key":"ik_a94a0b1d","worker":"pid-4121","started_at":"2026-06-30T14:02:11.200Z","ended_at":"2026-06-30T14:02:21.200Z","outcome":"timeout","error":"network timeout after 10s"}`,
	`{"type":"attempt","execution_id":"exec_01H8","step_id":"step-4","attempt":2,"tool":"send_invoice_email","effect":"write","idempotency_key":"ik_a94a0b1d","started_at":"2026-06-30T14:02:21.300Z","ended_at":"2026-06-30T14:02:21.410Z","outcome":"ok","deduplicated":true,"result":{"status":"sent","message_id":"msg_41bcc7"}}`,
	`{"type":"effect","provider":"mail-api","effect_id":"msg_41bcc7","idempotency_key":"ik_a94a0b1d","execution_id":"exec_01H8","step_id":"step-4","target":"jordan@acme.dev","at":"2026-06-30T14:02:11.350Z"}`,
	`{"type":"execution","execution_id":"exec_01H8","status":"completed","ended_at":"2026-06-30T14:03:04.000Z"}`,
}

var designTypes = []trace.EventType{trace.EventExecution, trace.EventAttempt, trace.EventAttempt, trace.EventEffect, trace.EventExecution}

func TestDecodeForms(t *testing.T) {
	all := strings.Join(designEvents, ",")
	for _, tc := range []struct {
		name         string
		body         string
		format       ingest.Format
		wantTypes    []trace.EventType
		wantRejected []int
	}{
		{"single object", designEvents[0], ingest.FormatJSON, designTypes[:1], nil},
		{"single object with surrounding whitespace", "\n\t " + designEvents[3] + " \r\n", ingest.FormatJSON, designTypes[3:4], nil},
		{"envelope", `{"events":[` + all + `]}`, ingest.FormatJSON, designTypes, nil},
		{"envelope with whitespace", "{ \"events\" :\n[\n" + strings.Join(designEvents, ",\n") + "\n] }", ingest.FormatJSON, designTypes, nil},
		{"array", `[` + all + `]`, ingest.FormatJSON, designTypes, nil},
		{"NDJSON", strings.Join(designEvents, "\n"), ingest.FormatNDJSON, designTypes, nil},
		{"NDJSON with blank lines and CRLF", "\n\n" + strings.Join(designEvents, "\r\n\n   \n") + "\n\n", ingest.FormatNDJSON, designTypes, nil},
		{"NDJSON with a bad line", designEvents[0] + "\n\n" + `{"type":"attempt"}` + "\n" + designEvents[3], ingest.FormatNDJSON,
			[]trace.EventType{trace.EventExecution, trace.EventEffect}, []int{1}},
		{"array with bad elements", `[` + designEvents[0] + `,5,{"type":"span"},` + designEvents[4] + `,null]`, ingest.FormatJSON,
			[]trace.EventType{trace.EventExecution, trace.EventExecution}, []int{1, 2, 4}},
		// Keys match exactly, as everywhere else in an event.
		{"envelope key in capitals is one bad event", `{"Events":[` + all + `]}`, ingest.FormatJSON, nil, []int{0}},
		{"NDJSON line that is an array", designEvents[0] + "\n[" + designEvents[1] + "]", ingest.FormatNDJSON,
			designTypes[:1], []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ingest.Decode([]byte(tc.body), tc.format, ingest.DefaultLimits)
			if err != nil {
				t.Fatalf("Decode: got error %v, want none", err)
			}
			var gotTypes []trace.EventType
			for _, ev := range b.Events {
				gotTypes = append(gotTypes, ev.Type)
				if !strings.HasPrefix(ev.ID, "evt_") {
					t.Errorf("event id: got %q, want one starting with evt_", ev.ID)
				}
			}
			if fmt.Sprint(gotTypes) != fmt.Sprint(tc.wantTypes) {
				t.Errorf("event types: got %v, want %v", gotTypes, tc.wantTypes)
			}
			var gotRejected []int
			for _, r := range b.Rejected {
				gotRejected = append(gotRejected, r.Index)
				if r.Error == "" {
					t.Errorf("rejection %d: got an empty error, want one naming the problem", r.Index)
				}
			}
			if fmt.Sprint(gotRejected) != fmt.Sprint(tc.wantRejected) {
				t.Errorf("rejected indexes: got %v, want %v", gotRejected, tc.wantRejected)
			}
		})
	}
}

// TestDecodeFormsAgree: the same events give the same ids and bodies in
// every form, so a client may switch forms without creating duplicates.
func TestDecodeFormsAgree(t *testing.T) {
	all := strings.Join(designEvents, ",")
	forms := map[string]struct {
		body   string
		format ingest.Format
	}{
		"envelope": {`{"events":[` + all + `]}`, ingest.FormatJSON},
		"array":    {`[` + all + `]`, ingest.FormatJSON},
		"NDJSON":   {strings.Join(designEvents, "\n"), ingest.FormatNDJSON},
	}
	var want []string
	for _, line := range designEvents {
		b, err := ingest.Decode([]byte(line), ingest.FormatJSON, ingest.DefaultLimits)
		if err != nil || len(b.Events) != 1 {
			t.Fatalf("Decode(%s): got %d events and error %v, want 1 event", line, len(b.Events), err)
		}
		want = append(want, b.Events[0].ID+" "+string(b.Events[0].Body))
	}
	for name, form := range forms {
		b, err := ingest.Decode([]byte(form.body), form.format, ingest.DefaultLimits)
		if err != nil {
			t.Fatalf("%s: got error %v, want none", name, err)
		}
		var got []string
		for _, ev := range b.Events {
			got = append(got, ev.ID+" "+string(ev.Body))
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: got\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

func TestDecodeRequestErrors(t *testing.T) {
	lim := ingest.DefaultLimits
	lim.Events = 3
	ev := designEvents[4]
	four := strings.Repeat(ev+",", 3) + ev
	for _, tc := range []struct {
		name       string
		body       string
		format     ingest.Format
		wantStatus int
		wantErr    []string
	}{
		{"empty", "", ingest.FormatJSON, http.StatusBadRequest, []string{"body:", "empty"}},
		{"only whitespace", " \n\t ", ingest.FormatJSON, http.StatusBadRequest, []string{"body:", "empty"}},
		{"truncated", ev[:len(ev)-5], ingest.FormatJSON, http.StatusBadRequest, []string{"body: invalid JSON"}},
		{"bad JSON", `{type: execution}`, ingest.FormatJSON, http.StatusBadRequest, []string{"body: invalid JSON"}},
		{"trailing comma in array", `[` + ev + `,]`, ingest.FormatJSON, http.StatusBadRequest, []string{"body: invalid JSON"}},
		{"two objects without NDJSON", ev + "\n" + ev, ingest.FormatJSON, http.StatusBadRequest, []string{"body: invalid JSON"}},
		{"a string", `"execution"`, ingest.FormatJSON, http.StatusBadRequest, []string{"body:", "JSON object"}},
		{"a number", `42`, ingest.FormatJSON, http.StatusBadRequest, []string{"body:", "JSON object"}},
		{"null", `null`, ingest.FormatJSON, http.StatusBadRequest, []string{"body:"}},
		{"events is a number", `{"events":5}`, ingest.FormatJSON, http.StatusBadRequest, []string{"events:", "array"}},
		{"events is an object", `{"events":{}}`, ingest.FormatJSON, http.StatusBadRequest, []string{"events:", "array"}},
		{"events is empty", `{"events":[]}`, ingest.FormatJSON, http.StatusBadRequest, []string{"events:", "empty"}},
		{"events is null", `{"events":null}`, ingest.FormatJSON, http.StatusBadRequest, []string{"events:", "empty"}},
		{"empty array", `[]`, ingest.FormatJSON, http.StatusBadRequest, []string{"events:", "empty"}},
		{"too many in an array", `[` + four + `]`, ingest.FormatJSON, http.StatusRequestEntityTooLarge, []string{"events:", "limit of 3"}},
		{"too many in an envelope", `{"events":[` + four + `]}`, ingest.FormatJSON, http.StatusRequestEntityTooLarge, []string{"events:", "limit of 3"}},
		{"too many NDJSON lines", strings.Repeat(ev+"\n", 4), ingest.FormatNDJSON, http.StatusRequestEntityTooLarge, []string{"events:", "limit of 3"}},
		{"empty NDJSON", "", ingest.FormatNDJSON, http.StatusBadRequest, []string{"body:", "no events"}},
		{"NDJSON of blank lines", "\n \r\n\t\n", ingest.FormatNDJSON, http.StatusBadRequest, []string{"body:", "no events"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ingest.Decode([]byte(tc.body), tc.format, lim)
			requestErrorOf(t, err, tc.wantStatus, tc.wantErr...)
			if len(b.Events)+len(b.Rejected) != 0 {
				t.Errorf("batch: got %d events and %d rejections, want none with a request error", len(b.Events), len(b.Rejected))
			}
		})
	}
	// Exactly at the limit is fine.
	three := strings.Repeat(ev+",", 2) + ev
	if b, err := ingest.Decode([]byte(`[`+three+`]`), ingest.FormatJSON, lim); err != nil || len(b.Events) != 3 {
		t.Errorf("3 events at a limit of 3: got %d events and error %v, want 3 and none", len(b.Events), err)
	}
}

var derivedID = regexp.MustCompile(`^evt_[0-9a-f]{32}$`)

func TestParseEventDerivedID(t *testing.T) {
	// One attempt written four ways: key order, whitespace and escaping
	// differ, the event does not.
	same := []string{
		designEvents[2],
		`{"attempt":2,"step_id":"step-4","execution_id":"exec_01H8","type":"attempt","result":{"message_id":"msg_41bcc7","status":"sent"},"deduplicated":true,"outcome":"ok","ended_at":"2026-06-30T14:02:21.410Z","started_at":"2026-06-30T14:02:21.300Z","idempotency_key":"ik_a94a0b1d","effect":"write","tool":"send_invoice_email"}`,
		"{\n  \"type\": \"attempt\",\n  \"execution_id\": \"exec_01H8\",\n  \"step_id\": \"step-4\",\n  \"attempt\": 2,\n  \"tool\": \"send_invoice_email\",\n  \"effect\": \"write\",\n  \"idempotency_key\": \"ik_a94a0b1d\",\n  \"started_at\": \"2026-06-30T14:02:21.300Z\",\n  \"ended_at\": \"2026-06-30T14:02:21.410Z\",\n  \"outcome\": \"ok\",\n  \"deduplicated\": true,\n  \"result\": { \"status\": \"sent\", \"message_id\": \"msg_41bcc7\" }\n}",
		`{"type":"\u0061ttempt","execution_id":"exec_01H8","step_id":"step-4","attempt":2,"tool":"send_invoice_email","effect":"write","idempotency_key":"ik_a94a0b1d","started_at":"2026-06-30T14:02:21.300Z","ended_at":"2026-06-30T14:02:21.410Z","outcome":"ok","deduplicated":true,"result":{"status":"sent","message_id":"msg_41bcc7"}}`,
	}
	parse := func(raw string) trace.Event {
		t.Helper()
		ev, err := ingest.ParseEvent([]byte(raw), ingest.DefaultLimits)
		if err != nil {
			t.Fatalf("ParseEvent(%s): got error %v, want none", raw, err)
		}
		return ev
	}
	first := parse(same[0])
	if !derivedID.MatchString(first.ID) {
		t.Fatalf("derived id: got %q, want evt_ and 32 hex digits", first.ID)
	}
	for i, raw := range same[1:] {
		if got := parse(raw); got.ID != first.ID || !bytes.Equal(got.Body, first.Body) {
			t.Errorf("form %d: got id %s body %s, want id %s body %s", i+1, got.ID, got.Body, first.ID, first.Body)
		}
	}

	// Any change of content is a different event: a value, a number's
	// spelling, an added field.
	for _, raw := range []string{
		strings.Replace(same[0], `"attempt":2`, `"attempt":3`, 1),
		strings.Replace(same[0], `"msg_41bcc7"`, `"msg_41bcc8"`, 1),
		strings.Replace(same[0], `"deduplicated":true`, `"deduplicated":false`, 1),
		strings.Replace(same[0], `"ok"`, `"ok","worker":"pid-1"`, 1),
		strings.Replace(same[0], `"tool":"send_invoice_email",`, ``, 1),
	} {
		if got := parse(raw); got.ID == first.ID {
			t.Errorf("ParseEvent(%s): got id %s, want one different from the original's", raw, got.ID)
		}
	}

	// A sent id is kept, and the body says so.
	sent := parse(designEvents[0])
	if sent.ID != "evt_1" {
		t.Errorf("sent id: got %q, want evt_1", sent.ID)
	}
	if !bytes.Contains(sent.Body, []byte(`"id":"evt_1"`)) {
		t.Errorf("body: got %s, want it to contain \"id\":\"evt_1\"", sent.Body)
	}
	// Re-sending an event with its derived id (as an export does) keeps it.
	if again := parse(string(first.Body)); again.ID != first.ID {
		t.Errorf("re-parsed body: got id %s, want %s", again.ID, first.ID)
	}
}

func TestParseEventCanonicalBody(t *testing.T) {
	raw := `{ "type":"attempt", "execution_id":"exec_<1>", "step_id":"s&1", "attempt": 1,
		"args": {"z": [3, 2.50, 1e3], "a": {"y": null, "b": "x"}}, "outcome":"ok",
		"ended_at":"2026-06-30T14:02:21.410Z" }`
	ev, err := ingest.ParseEvent([]byte(raw), ingest.DefaultLimits)
	if err != nil {
		t.Fatalf("ParseEvent: got error %v, want none", err)
	}
	want := `{"args":{"a":{"b":"x","y":null},"z":[3,2.50,1e3]},"attempt":1,"ended_at":"2026-06-30T14:02:21.410Z",` +
		`"execution_id":"exec_<1>","id":"` + ev.ID + `","outcome":"ok","step_id":"s&1","type":"attempt"}`
	if string(ev.Body) != want {
		t.Errorf("body:\ngot  %s\nwant %s", ev.Body, want)
	}
	if got, want := string(ev.Attempt.Args), `{"a":{"b":"x","y":null},"z":[3,2.50,1e3]}`; got != want {
		t.Errorf("args: got %s, want %s", got, want)
	}
	if !json.Valid(ev.Body) {
		t.Errorf("body: got invalid JSON %s", ev.Body)
	}
}

func TestParseEventTimes(t *testing.T) {
	base := time.Date(2026, 6, 30, 14, 2, 11, 120_000_000, time.UTC)
	ms := base.UnixMilli()
	for _, tc := range []struct {
		rfc3339 string
		millis  string
		want    time.Time
	}{
		{"2026-06-30T14:02:11.120Z", fmt.Sprint(ms), base},
		{"2026-06-30T14:02:11.12Z", fmt.Sprintf("%d.0", ms), base},
		{"2026-06-30T16:02:11.120+02:00", fmt.Sprintf("%de0", ms), base},
		{"2026-06-30T14:02:11.1205Z", fmt.Sprintf("%d.5", ms), base.Add(500 * time.Microsecond)},
		{"2026-06-30T14:02:11.12025Z", fmt.Sprintf("%d.25", ms), base.Add(250 * time.Microsecond)},
		{"2026-06-30T14:02:11.120123Z", fmt.Sprintf("%d.123", ms), base.Add(123 * time.Microsecond)},
		{"2026-06-30T14:02:11.120999Z", fmt.Sprintf("%d.999", ms), base.Add(999 * time.Microsecond)},
		{"2026-06-30T14:02:11.120000001Z", fmt.Sprintf("%d.000001", ms), base.Add(time.Nanosecond)},
		{"1970-01-01T00:00:00Z", "0", time.Unix(0, 0).UTC()},
		{"1970-01-01T00:00:00.0015Z", "1.5", time.Unix(0, 1_500_000).UTC()},
	} {
		t.Run(tc.millis, func(t *testing.T) {
			var got []time.Time
			for _, v := range []string{`"` + tc.rfc3339 + `"`, tc.millis} {
				raw := `{"type":"effect","provider":"p","effect_id":"e","at":` + v + `}`
				ev, err := ingest.ParseEvent([]byte(raw), ingest.DefaultLimits)
				if err != nil {
					t.Fatalf("ParseEvent(%s): got error %v, want none", raw, err)
				}
				if ev.Effect.At.Location() != time.UTC {
					t.Errorf("at %s: got location %v, want UTC", v, ev.Effect.At.Location())
				}
				got = append(got, ev.Effect.At)
			}
			if !got[0].Equal(tc.want) || !got[1].Equal(tc.want) {
				t.Errorf("at: got %s (RFC 3339) and %s (ms), want %s for both",
					got[0].Format(time.RFC3339Nano), got[1].Format(time.RFC3339Nano), tc.want.Format(time.RFC3339Nano))
			}
		})
	}
}
