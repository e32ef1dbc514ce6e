package ingest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// The scanner must call exactly the bytes JSON that encoding/json calls
// JSON, or a body would be refused (or let through) for the wrong reason.
var scanSyntaxCases = []string{
	``, ` `, `{`, `}`, `[`, `]`, `[,]`, `[1,]`, `{,}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a" 1}`, `{1:2}`,
	`[1 2]`, `{"a":1 "b":2}`, `nul`, `tru`, `fals`, `nulll`, `truex`, `-`, `01`, `1.`, `.1`, `1e`, `1e+`,
	`-01`, `+1`, `1.5e3`, `-0.0e-0`, `0`, `-0`, `1E9`, `"\x01"`, `"\u12"`, `"\u12g4"`, `"\q"`, `"\/"`,
	`"\ud800"`, `"\uDBFF\uDFFF"`, `"abc`, `"a\`, `"a\"`, `"a\\"`, `"é"`, "\"\xff\"", `[] []`, `{} x`,
	` [ 1 , { "a" : [ ] , "b" : { } } ] `, `[[[[]]]]`, `[[[[]]]`, `{"a":{"b":{"c":[1,2,{"d":null}]}}}`,
	`true`, `false`, `null`, `""`, "\t\n\r 1 \t\n\r", "[1]\x00", `["a",]`, `{"a":1}}`, `[1]]`,
	strings.Repeat("[", maxJSONNesting) + strings.Repeat("]", maxJSONNesting),
	strings.Repeat("[", maxJSONNesting+1) + strings.Repeat("]", maxJSONNesting+1),
}

func TestScanJSONAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range scanSyntaxCases {
		checkScanAgrees(t, []byte(in))
	}
}

func checkScanAgrees(t *testing.T, in []byte) {
	t.Helper()
	wantOK := json.Valid(in)
	stats, err := scanJSON(in, jsonShape{}, nil)
	if gotOK := err == nil; gotOK != wantOK {
		short := string(in)
		if len(short) > 80 {
			short = short[:80] + "..."
		}
		t.Fatalf("scanJSON(%q): got error %v, want valid=%v as encoding/json says", short, err, wantOK)
	}
	if err != nil && !errors.Is(err, errJSONSyntax) {
		t.Fatalf("scanJSON(%q): got %v, want errJSONSyntax (no limits set)", in, err)
	}
	if err == nil {
		if want := countValues(decodeNumbers(t, in)); stats.Values != want {
			t.Fatalf("scanJSON(%q): got %d values, want %d", in, stats.Values, want)
		}
	}
}

// decodeNumbers decodes as ParseEvent does: numbers as sent, so that 1e1000
// is a value and not an overflow.
func decodeNumbers(t *testing.T, in []byte) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(in)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", in, err)
	}
	return v
}

func countValues(v any) int {
	switch v := v.(type) {
	case []any:
		n := 1
		for _, e := range v {
			n += countValues(e)
		}
		return n
	case map[string]any:
		n := 1
		for _, e := range v {
			n += countValues(e)
		}
		return n
	}
	return 1
}

// FuzzScanJSON: the scanner accepts what json.Valid accepts, and counts
// the values it decodes (objects without duplicate keys; a duplicate
// collapses in the map).
func FuzzScanJSON(f *testing.F) {
	for _, in := range scanSyntaxCases {
		if len(in) < 1000 {
			f.Add([]byte(in))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		wantOK := json.Valid(in)
		_, err := scanJSON(in, jsonShape{}, nil)
		if gotOK := err == nil; gotOK != wantOK {
			t.Fatalf("scanJSON(%q): got error %v, want valid=%v as encoding/json says", in, err, wantOK)
		}
		// With duplicates refused, what passes decodes to as many values
		// as were scanned.
		stats, err := scanJSON(in, jsonShape{DupKeys: true}, nil)
		if err == nil {
			if want := countValues(decodeNumbers(t, in)); stats.Values != want {
				t.Fatalf("scanJSON(%q): got %d values, want %d", in, stats.Values, want)
			}
		}
		var dup *jsonShapeError
		if errors.As(err, &dup) && dup.Problem != "duplicate key" {
			t.Fatalf("scanJSON(%q): got %v, want only duplicate keys refused", in, err)
		}
	})
}

func TestScanJSONShape(t *testing.T) {
	shape := jsonShape{Depth: 4, DepthShown: 3, Elements: 3, Values: 10, DupKeys: true, Root: "event"}
	for _, tc := range []struct {
		in, want string // want "" for no error
	}{
		{`{"args":{"a":[1,2,3]}}`, ""},
		{`{"args":{"a":[1,2,3,4]}}`, "args.a: array longer than the limit of 3 elements"},
		{`{"args":{"a":1,"b":2,"c":3,"d":4}}`, "args: object with more than the limit of 3 keys"},
		{`{"a":1,"b":2,"c":3,"d":4}`, "event: object with more than the limit of 3 keys"},
		{`[1,2,3,4]`, "event: array longer than the limit of 3 elements"},
		{`{"args":[[[1]]]}`, ""},
		{`{"args":[[[[1]]]]}`, "args[0][0][0]: nested deeper than the limit of 3 levels"},
		{`{"args":{"x y":{"":{"a.b":{}}}}}`, `args["x y"][""]["a.b"]: nested deeper than the limit of 3 levels`},
		{`{"args":[[1,2,3],[1,2,3],[1,2]]}`, "args[2][1]: more than the limit of 10 values in one event"},
		{`{"args":[[1,2,3],[1,2,3],[1]],"result":[2]}`, "result[0]: more than the limit of 10 values in one event"},
		{`{"args":{"to":"a","to":"b"}}`, "args.to: duplicate key"},
		{`{"type":"a","type":"a"}`, "type: duplicate key"},
		{`{"args":{"to":"a","t\u006f":"b"}}`, "args.to: duplicate key"},
		{`{"args":{"\ud800":"a","\ufffd":"b"}}`, "args.\ufffd: duplicate key"},
		{`{"args":{"to":"a","To":"b"}}`, ""},
		{`{"args":[{"to":1},{"to":2}]}`, ""},
		{`{"args":[{"x":{"to":1,"to":2}}]}`, "args[0].x.to: duplicate key"},
		// Shape problems found before a syntax error are reported;
		// syntax errors found first are left to encoding/json.
		{`{"args":[1,2,3,4] oops`, "args: array longer than the limit of 3 elements"},
		{`{"args":[1,2 oops,3,4]`, "syntax"},
	} {
		_, err := scanJSON([]byte(tc.in), shape, nil)
		got := ""
		switch {
		case errors.Is(err, errJSONSyntax):
			got = "syntax"
		case err != nil:
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("scanJSON(%s): got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestScanJSONMembers(t *testing.T) {
	var got []string
	_, err := scanJSON([]byte(` {"a" : [1, {"b":2}] ,"c":"d", "e\n":{}, "":null} `), jsonShape{}, func(key, value []byte) error {
		got = append(got, string(key)+"="+string(value))
		return nil
	})
	want := []string{`a=[1, {"b":2}]`, `c="d"`, `e\n={}`, `=null`}
	if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("members: got %q, %v; want %q", got, err, want)
	}
	got = nil
	_, err = scanJSON([]byte(`[ 1,"x" ,[2] ,{}]`), jsonShape{}, func(key, value []byte) error {
		if key != nil {
			t.Errorf("key of an array element: got %q, want nil", key)
		}
		got = append(got, string(value))
		return nil
	})
	want = []string{`1`, `"x"`, `[2]`, `{}`}
	if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("elements: got %q, %v; want %q", got, err, want)
	}
	stop := errors.New("stop")
	n := 0
	_, err = scanJSON([]byte(`[1,2,3]`), jsonShape{}, func(_, _ []byte) error { n++; return stop })
	if err != stop || n != 1 {
		t.Fatalf("a member's error: got %v after %d members, want it returned after 1", err, n)
	}
}

// A scan allocates nothing for an array however long: the attack it
// exists for is a few megabytes of [0,0,0,...].
func TestScanJSONDoesNotAllocatePerElement(t *testing.T) {
	in := []byte(`{"type":"attempt","args":[` + strings.Repeat("0,", 1<<20) + `0]}`)
	allocs := testing.AllocsPerRun(3, func() {
		if _, err := scanJSON(in, jsonShape{Root: "event"}, nil); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 10 {
		t.Fatalf("allocations scanning a 1M-element array: got %.0f, want at most 10", allocs)
	}
	lim := DefaultLimits
	allocs = testing.AllocsPerRun(3, func() {
		if _, err := checkEventShape(in, lim); err == nil {
			t.Fatal("checkEventShape: got no error for 1M elements")
		}
	})
	if allocs > 20 {
		t.Fatalf("allocations refusing a 1M-element array: got %.0f, want at most 20", allocs)
	}
}
