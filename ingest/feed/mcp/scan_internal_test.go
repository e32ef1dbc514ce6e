package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// randomMessage is a JSON-RPC message in some member order and spacing,
// with strings that need escapes, and the outline a scan should keep.
func randomMessage(r *rand.Rand) (string, outline) {
	str := func() string {
		parts := []string{"a", "é", `"`, `\`, "\n", "\u2028", "x/y", "😀", "\t", "<>&", "id", "}{]["}
		var b strings.Builder
		for n := r.IntN(6); n >= 0; n-- {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		return b.String()
	}
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	ws := func() string { return []string{"", " ", "\n  ", "\t"}[r.IntN(4)] }
	var want outline
	var members []string
	member := func(k, v string) { members = append(members, ws()+enc(k)+ws()+":"+ws()+v+ws()) }
	switch r.IntN(3) {
	case 0:
		want.id = json.RawMessage(fmt.Sprint(r.IntN(1000) - 10))
	case 1:
		want.id = json.RawMessage(enc(str()))
	}
	if want.id != nil {
		member("id", string(want.id))
	}
	member("jsonrpc", `"2.0"`)
	filler := enc(map[string]any{"id": str(), "isError": true, "list": []any{1, "two", nil, 3.5e3, map[string]any{"id": "no"}}})
	switch r.IntN(4) {
	case 0:
		want.method = true
		member("method", `"notifications/progress"`)
		member("params", filler)
	case 1:
		want.hasError = true
		want.errCode, want.errMessage = -32000-r.IntN(100), str()
		member("error", fmt.Sprintf(`{"message":%s,"data":%s,"code":%d}`, enc(want.errMessage), filler, want.errCode))
	default:
		want.hasResult = true
		want.isError = r.IntN(2) == 0
		var sc string
		switch r.IntN(3) {
		case 0:
			id := str() + "x"
			want.effectID, want.effectArrays = id, []bool{false, false}
			sc = enc(id)
		case 1:
			want.effectID, want.effectArrays = json.Number("-12.5e3"), []bool{false, false}
			sc = "-12.5e3"
		default:
			sc = `{"nested":1}` // not a scalar: no effect id
		}
		result := []string{`"content":[{"type":"text","text":` + enc(str()) + `},` + filler + `]`, `"isError":` + fmt.Sprint(want.isError),
			`"structuredContent":{"before":` + filler + `,"id":` + sc + `,"after":[[],{}]}`, `"_meta":` + filler}
		r.Shuffle(len(result), func(i, j int) { result[i], result[j] = result[j], result[i] })
		member("result", "{"+strings.Join(result, ",")+"}")
	}
	r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	return "{" + strings.Join(members, ",") + "}", want
}

// TestLexerOutlinesMatchEncodingJSON: fed in chunks of any size, the scan
// keeps what a full parse reads of each message, in any member order
// (the TypeScript SDK writes result before id), single or in a batch.
func TestLexerOutlinesMatchEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		n := 1
		if i%4 == 0 {
			n = 1 + r.IntN(4)
		}
		var docs []string
		var want []outline
		for range n {
			d, o := randomMessage(r)
			docs, want = append(docs, d), append(want, o)
		}
		doc := docs[0]
		if i%4 == 0 {
			doc = "[" + strings.Join(docs, ",") + "]"
		}
		if !json.Valid([]byte(doc)) {
			t.Fatalf("the test made invalid JSON: %s", doc)
		}
		lx := jsonLexer{targets: make([]path, numTargets)}
		lx.targets[tID], lx.targets[tErrCode], lx.targets[tErrMessage], lx.targets[tIsError] = pathID, pathErrCode, pathErrMessage, pathIsError
		lx.targets[tEffectID] = path{{key: "result", index: -1}, {key: "structuredContent", index: -1}, {key: "id", index: -1}}
		b := []byte(doc + "\n")
		for len(b) > 0 {
			k := min(len(b), 1+r.IntN(8))
			lx.write(b[:k])
			b = b[k:]
		}
		if lx.st != stAfter || len(lx.frames) != 0 {
			t.Fatalf("%s: ended in state %d at depth %d, want after the root value", doc, lx.st, len(lx.frames))
		}
		for k := range want {
			if want[k].id != nil {
				var buf bytes.Buffer
				json.Compact(&buf, want[k].id)
				want[k].id = buf.Bytes()
			}
		}
		if !reflect.DeepEqual(lx.outlines, want) {
			t.Fatalf("%s:\n got %+v\nwant %+v", doc, lx.outlines, want)
		}
	}
}

// TestLexerStopsOnBrokenJSON: what is not JSON leaves the scan failed or
// unfinished, never an outline of a message it did not read whole.
func TestLexerStopsOnBrokenJSON(t *testing.T) {
	for _, doc := range []string{`{"id":1,"result":{}`, `{"id":1 "result":{}}`, `{"id":1,"result":{}}}`, `{"id":1,]`, `[{"id":1,"result":{}}`, `{"id":"abc`} {
		lx := jsonLexer{targets: []path{pathID}}
		lx.write([]byte(doc))
		if lx.st == stAfter && len(lx.frames) == 0 {
			t.Errorf("%s: ended as whole JSON, want failed or unfinished", doc)
		}
	}
}
