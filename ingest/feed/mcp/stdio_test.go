package mcp_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed/mcp"
)

// sink reads one end of a pipe to its end, keeping what it read, or only
// its hash and length when told to (a 10 MB line must not be kept).
type sink struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	sum   hash.Hash
	n     int64
	ended bool
}

func newSink(r io.Reader, keep bool) *sink {
	s := &sink{sum: sha256.New()}
	go func() {
		b := make([]byte, 32<<10)
		for {
			n, err := r.Read(b)
			s.mu.Lock()
			s.n += int64(n)
			s.sum.Write(b[:n])
			if keep {
				s.buf.Write(b[:n])
			}
			if err != nil {
				s.ended = true
			}
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return s
}

func (s *sink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor polls until cond holds of what the sink read, or fails the test
// after 10 s.
func (s *sink) waitFor(t *testing.T, what string, cond func(got string, ended bool) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		got, ended := s.buf.String(), s.ended
		s.mu.Unlock()
		if cond(got, ended) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s; got %q (ended %v)", what, clip(got), ended)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitN waits until the sink has read n bytes.
func (s *sink) waitN(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		got := s.n
		s.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %d bytes; got %d", n, got)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (s *sink) waitEnd(t *testing.T) {
	t.Helper()
	s.waitFor(t, "the end", func(_ string, ended bool) bool { return ended })
}

func clip(s string) string {
	if len(s) > 2000 {
		return s[:1000] + "…" + s[len(s)-1000:]
	}
	return s
}

type relayResult struct {
	stats mcp.StdioStats
	err   error
}

// stdioRig runs RelayStdio between pipes the test holds: it writes what
// the client sends (client) and what the server prints (server), and reads
// what each receives (toClient, toServer).
type stdioRig struct {
	client, server     *io.PipeWriter
	toClient, toServer *sink
	done               chan relayResult
}

func startRelay(t *testing.T, s *mcp.Session, maxLine int, keep bool) *stdioRig {
	t.Helper()
	clientInR, clientInW := io.Pipe()
	clientOutR, clientOutW := io.Pipe()
	childInR, childInW := io.Pipe()
	childOutR, childOutW := io.Pipe()
	rig := &stdioRig{client: clientInW, server: childOutW, toClient: newSink(clientOutR, keep), toServer: newSink(childInR, keep),
		done: make(chan relayResult, 1)}
	go func() {
		stats, err := mcp.RelayStdio(s, mcp.StdioPipes{ClientIn: clientInR, ClientOut: clientOutW, ChildIn: childInW, ChildOut: childOutR},
			mcp.StdioConfig{MaxLine: maxLine})
		clientOutW.Close()
		rig.done <- relayResult{stats, err}
	}()
	t.Cleanup(func() {
		clientInW.Close()
		childOutW.Close()
	})
	return rig
}

// finish ends the server's output and returns what RelayStdio returned.
func (r *stdioRig) finish(t *testing.T) relayResult {
	t.Helper()
	r.server.Close()
	select {
	case res := <-r.done:
		return res
	case <-time.After(10 * time.Second):
		t.Fatal("RelayStdio still running 10 s after the server's output ended")
		return relayResult{}
	}
}

// handshake passes the handshake both ways, as a client does before its
// first call: the server's tools/list answer gives the tools' classes.
func (r *stdioRig) handshake(t *testing.T) {
	t.Helper()
	writeChunks(t, r.client, handshakeIn, 7)
	r.toServer.waitN(t, int64(len(handshakeIn)))
	writeChunks(t, r.server, handshakeOut, 5)
	r.toClient.waitN(t, int64(len(handshakeOut)))
}

// writeChunks writes s n bytes at a time, so lines arrive in pieces.
func writeChunks(t *testing.T, w io.Writer, s string, n int) {
	t.Helper()
	for len(s) > 0 {
		k := min(n, len(s))
		if _, err := io.WriteString(w, s[:k]); err != nil {
			t.Fatal(err)
		}
		s = s[k:]
	}
}

func line(b []byte) string { return string(b) + "\n" }

const handshakeIn = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"billing-agent","version":"1.0"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}
`

const handshakeOut = `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"invoices","version":"1"}}}
{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"send_invoice_email","inputSchema":{"type":"object"}},{"name":"get_invoice","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]}}
`

const emailArgs = `{"to":"jordan@acme.dev","invoice_id":"inv_7"}`

func outcomes(rec *collected) string {
	var got []string
	for _, a := range rec.ofType("attempt") {
		got = append(got, fmt.Sprint(a["tool"], ":", a["outcome"]))
	}
	return strings.Join(got, " ")
}

// TestStdioRelaysBytesExactly: what either side writes, in whatever
// pieces, the other reads byte for byte: blank lines, CRLF, lines that are
// not JSON, and a last line without its newline included; the calls in it
// are recorded; the client's end closes the server's input.
func TestStdioRelaysBytesExactly(t *testing.T) {
	rec := &collected{t: t}
	o := newObserver(t, rec, mcp.Config{})
	s := o.Session("")
	rig := startRelay(t, s, 0, true)
	rig.handshake(t)

	in := line(call(2, "send_invoice_email", emailArgs, "")) + "\n" +
		"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\r\n" +
		line(call(3, "get_invoice", `{"invoice_id":"inv_7"}`, "")) +
		`{"jsonrpc":"2.0","id":9,"method":"ping"}`
	writeChunks(t, rig.client, in, 7)
	rig.client.Close()
	rig.toServer.waitEnd(t)
	if got := rig.toServer.String(); got != handshakeIn+in {
		t.Fatalf("the server read:\n%q\nwant what the client wrote:\n%q", got, handshakeIn+in)
	}

	out := line(answer(2, `{"id":"msg_1"}`)) + "not JSON at all\n" +
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"sent"}}` + "\n" +
		line(answer(3, `{"id":"inv_7"}`)) + `{"jsonrpc":"2.0","id":9,"result":{}}`
	writeChunks(t, rig.server, out, 5)
	res := rig.finish(t)
	rig.toClient.waitEnd(t)
	if res.err != nil {
		t.Errorf("RelayStdio: %v", res.err)
	}
	if got := rig.toClient.String(); got != handshakeOut+out {
		t.Fatalf("the client read:\n%q\nwant what the server wrote:\n%q", got, handshakeOut+out)
	}
	s.Close()
	wait(t, o)
	if got := outcomes(rec); got != "send_invoice_email:ok get_invoice:ok" {
		t.Errorf("attempts: got %s, want the two calls, ok", got)
	}
	if effects := rec.ofType("effect"); len(effects) != 1 || effects[0]["effect_id"] != "msg_1" {
		t.Errorf("effects: got %v, want msg_1", effects)
	}
}

// TestStdioLoseResponseWithholdsTheStruckAnswer: the answer to the call
// lose-response strikes never reaches the client, alone or in a batch;
// every other byte does.
func TestStdioLoseResponseWithholdsTheStruckAnswer(t *testing.T) {
	rec := &collected{t: t}
	o := newObserver(t, rec, mcp.Config{})
	s := o.Session("")
	rig := startRelay(t, s, 0, true)
	rig.handshake(t)
	lose := `{"io.oncetrace/fault":"lose-response"}`
	in := line(call(2, "send_invoice_email", emailArgs, lose)) + line(call(3, "get_invoice", `{"invoice_id":"inv_7"}`, "")) +
		"[" + string(call(4, "send_invoice_email", emailArgs, lose)) + "," + string(call(5, "send_invoice_email", emailArgs, "")) + "]\n"
	writeChunks(t, rig.client, in, 1<<20)
	rig.toServer.waitFor(t, "the client's lines", func(got string, _ bool) bool { return got == handshakeIn+in })

	batch := "[" + string(answer(4, `{"id":"msg_4"}`)) + ", " + string(answer(5, `{"id":"msg_5"}`)) + "]\n"
	out := line(answer(2, `{"id":"msg_2"}`)) + line(answer(3, `{"id":"inv_7"}`)) + batch
	writeChunks(t, rig.server, out, 1<<20)
	rig.finish(t)
	rig.toClient.waitEnd(t)
	want := handshakeOut + line(answer(3, `{"id":"inv_7"}`)) + "[" + string(answer(5, `{"id":"msg_5"}`)) + "]\n"
	if got := rig.toClient.String(); got != want {
		t.Fatalf("the client read:\n%q\nwant all but the answers to 2 and 4:\n%q", got, want)
	}
	s.Close()
	wait(t, o)
	if got := outcomes(rec); got != "send_invoice_email:timeout get_invoice:ok send_invoice_email:timeout send_invoice_email:ok" {
		t.Errorf("attempts: got %s, want the struck calls timeouts", got)
	}
	var ids []string
	for _, e := range rec.ofType("effect") {
		ids = append(ids, fmt.Sprint(e["effect_id"]))
	}
	if len(ids) != 3 {
		t.Errorf("effects: got %v, want msg_2, msg_4 and msg_5: the server sent all three", ids)
	}
	if c := o.Counts(); c.Dropped != 2 {
		t.Errorf("dropped: got %d, want 2", c.Dropped)
	}
}

// TestStdioFailBeforeAnswersWithoutForwarding: the struck call never
// reaches the server, the client gets the refusal instead; in a batch,
// the rest of the batch is forwarded.
func TestStdioFailBeforeAnswersWithoutForwarding(t *testing.T) {
	rec := &collected{t: t}
	o := newObserver(t, rec, mcp.Config{})
	s := o.Session("")
	rig := startRelay(t, s, 0, true)
	rig.handshake(t)
	fail := `{"io.oncetrace/fault":"fail-before"}`
	writeChunks(t, rig.client, line(call(2, "send_invoice_email", emailArgs, fail))+line(call(3, "get_invoice", `{"invoice_id":"inv_7"}`, ""))+
		"["+string(call(4, "send_invoice_email", emailArgs, fail))+","+string(call(5, "send_invoice_email", emailArgs, ""))+"]\n", 1<<20)
	wantServer := handshakeIn + line(call(3, "get_invoice", `{"invoice_id":"inv_7"}`, "")) + "[" + string(call(5, "send_invoice_email", emailArgs, "")) + "]\n"
	rig.toServer.waitFor(t, "the lines not refused", func(got string, _ bool) bool { return len(got) >= len(wantServer) })
	if got := rig.toServer.String(); got != wantServer {
		t.Fatalf("the server read:\n%q\nwant all but the refused calls:\n%q", got, wantServer)
	}
	rig.toClient.waitFor(t, "two refusals", func(got string, _ bool) bool { return strings.Count(got, "\n") == 4 })
	refusals := strings.Split(strings.TrimSuffix(strings.TrimPrefix(rig.toClient.String(), handshakeOut), "\n"), "\n")
	if !strings.HasPrefix(refusals[0], `{"jsonrpc":"2.0","id":2,"error":`) || !strings.Contains(refusals[0], "fail-before") ||
		!strings.HasPrefix(refusals[1], `[{"jsonrpc":"2.0","id":4,"error":`) || !strings.HasSuffix(refusals[1], "}]") {
		t.Errorf("the client read %q, want an error for 2 and a batch of one error for 4", refusals)
	}
	rig.finish(t)
	s.Close()
	wait(t, o)
	if got := outcomes(rec); got != "send_invoice_email:error get_invoice:timeout send_invoice_email:error send_invoice_email:timeout" {
		t.Errorf("attempts: got %s, want the refused calls errors (the others never answered)", got)
	}
	if effects := rec.ofType("effect"); len(effects) != 0 {
		t.Errorf("effects: got %v, want none", effects)
	}
}

// TestStdioRefusalNeverSplitsAServerLine: a refusal written while a
// server's line too long to hold streams to the client waits for its end.
func TestStdioRefusalNeverSplitsAServerLine(t *testing.T) {
	rec := &collected{t: t}
	o := newObserver(t, rec, mcp.Config{})
	s := o.Session("")
	rig := startRelay(t, s, 1024, true)
	long := `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + strings.Repeat("x", 4096)
	writeChunks(t, rig.server, long, 1<<20)
	rig.toClient.waitFor(t, "the long line's first part", func(got string, _ bool) bool { return len(got) > 1024 })
	writeChunks(t, rig.client, line(call(2, "send_invoice_email", emailArgs, `{"io.oncetrace/fault":"fail-before"}`)), 1<<20)
	deadline := time.Now().Add(10 * time.Second)
	for o.Counts().Refused == 0 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // let a wrong relay write the refusal mid-line
	writeChunks(t, rig.server, `"}}`+"\n", 1<<20)
	rig.toClient.waitFor(t, "the refusal", func(got string, _ bool) bool { return strings.Count(got, "\n") == 2 })
	got := strings.Split(rig.toClient.String(), "\n")
	if got[0] != long+`"}}` || !strings.Contains(got[1], `"id":2,"error"`) {
		t.Errorf("the client read %q…, want the server's line whole, then the refusal", clip(strings.Join(got, "\n")))
	}
	rig.finish(t)
}

// TestStdioLatencyKeepsOrder: a call latency strikes reaches the server
// after the delay, and the lines after it wait behind it.
func TestStdioLatencyKeepsOrder(t *testing.T) {
	rec := &collected{t: t}
	o := newObserver(t, rec, mcp.Config{})
	s := o.Session("")
	rig := startRelay(t, s, 0, true)
	slow := line(call(2, "send_invoice_email", emailArgs, `{"io.oncetrace/fault":"latency=300ms"}`))
	next := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}` + "\n"
	sent := time.Now()
	writeChunks(t, rig.client, slow+next, 1<<20)
	rig.toServer.waitFor(t, "the first line", func(got string, _ bool) bool { return len(got) > 0 })
	if waited := time.Since(sent); waited < 300*time.Millisecond {
		t.Errorf("the delayed call reached the server after %v, want at least 300ms", waited)
	}
	rig.toServer.waitFor(t, "both lines", func(got string, _ bool) bool { return len(got) >= len(slow+next) })
	if got := rig.toServer.String(); got != slow+next {
		t.Errorf("the server read %q, want the delayed call first, then the notification", got)
	}
	rig.finish(t)
	if c := o.Counts(); c.Delayed != 1 {
		t.Errorf("delayed: got %d, want 1", c.Delayed)
	}
}

// TestStdioClientEOFClosesServerInput: when the client's output ends, so
// does the server's input, and the server's answers still come through.
func TestStdioClientEOFClosesServerInput(t *testing.T) {
	o := newObserver(t, &collected{t: t}, mcp.Config{})
	rig := startRelay(t, o.Session(""), 0, true)
	writeChunks(t, rig.client, handshakeIn, 1<<20)
	rig.client.Close()
	rig.toServer.waitEnd(t)
	writeChunks(t, rig.server, handshakeOut, 1<<20)
	rig.finish(t)
	rig.toClient.waitEnd(t)
	if got := rig.toClient.String(); got != handshakeOut {
		t.Errorf("the client read %q, want the server's answers after its input closed", got)
	}
}

// writeLong writes head, n bytes of 'A', then tail, from one buffer
// (nothing allocated per byte), to each writer.
func writeLong(t *testing.T, head string, n int, tail string, ws ...io.Writer) {
	t.Helper()
	fill := bytes.Repeat([]byte("A"), 32<<10)
	for _, w := range ws {
		if _, err := io.WriteString(w, head); err != nil {
			t.Fatal(err)
		}
		for left := n; left > 0; left -= len(fill) {
			if _, err := w.Write(fill[:min(left, len(fill))]); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := io.WriteString(w, tail); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStdioLongLinesStreamWithBoundedMemory: 10 MB lines pass both ways
// byte for byte while the relay holds a few hundred KB; an answer too long
// to hold is recorded from its id, which the relay reads as it passes,
// first or last in the line; a struck answer whose id comes first is
// withheld whole, one whose id comes last cannot be and is counted.
func TestStdioLongLinesStreamWithBoundedMemory(t *testing.T) {
	const size = 10 << 20
	rec := &collected{t: t}
	o := newObserver(t, rec, mcp.Config{})
	s := o.Session("")
	rig := startRelay(t, s, 64<<10, false)
	wantServer, wantClient := sha256.New(), sha256.New()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	rig.handshake(t)
	io.WriteString(wantServer, handshakeIn)
	io.WriteString(wantClient, handshakeOut)
	lose := `{"io.oncetrace/fault":"lose-response"}`
	small := line(call(7, "send_invoice_email", emailArgs, "")) + line(call(8, "send_invoice_email", emailArgs, lose)) +
		line(call(9, "send_invoice_email", emailArgs, lose))
	for _, w := range []io.Writer{rig.client, wantServer} {
		io.WriteString(w, small)
	}
	// A call too long to hold: relayed, unobserved.
	writeLong(t, `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"send_invoice_email","arguments":{"body":"`, size, `"}}}`+"\n",
		rig.client, wantServer)
	rig.toServer.waitN(t, int64(len(handshakeIn)+len(small)+size))

	text := `"content":[{"type":"text","text":"`
	// The Go SDK writes the id first: 7 is recorded, 8 withheld whole.
	writeLong(t, `{"jsonrpc":"2.0","id":7,"result":{`+text, size, `"}],"structuredContent":{"id":"msg_7"}}}`+"\n", rig.server, wantClient)
	writeLong(t, `{"jsonrpc":"2.0","id":8,"result":{`+text, size, `"}]}}`+"\n", rig.server)
	// The TypeScript SDK writes it last: 9 is delivered though struck.
	writeLong(t, `{"result":{`+text, size, `"}],"isError":true},"jsonrpc":"2.0","id":9}`+"\n", rig.server, wantClient)
	// A notification too long to hold: relayed, unobserved.
	writeLong(t, `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"`, size, `"}}`+"\n", rig.server, wantClient)
	res := rig.finish(t)
	rig.toClient.waitEnd(t)
	runtime.ReadMemStats(&after)

	rig.toServer.mu.Lock()
	if got := rig.toServer.sum.Sum(nil); !bytes.Equal(got, wantServer.Sum(nil)) {
		t.Errorf("the server read %d bytes unlike what the client wrote", rig.toServer.n)
	}
	rig.toServer.mu.Unlock()
	rig.toClient.mu.Lock()
	if got := rig.toClient.sum.Sum(nil); !bytes.Equal(got, wantClient.Sum(nil)) {
		t.Errorf("the client read %d bytes, unlike what the server wrote less the answer to 8", rig.toClient.n)
	}
	rig.toClient.mu.Unlock()
	// 70 MB went through; what was allocated meanwhile is what the relay
	// held, and the test's own buffers. TotalAlloc counts the whole
	// process: this test must not be made parallel.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("allocated %d bytes relaying 10 MB lines, want under 4 MB", alloc)
	}
	if res.stats.Unobserved != 2 || res.stats.Unwithheld != 1 {
		t.Errorf("stats: got %+v, want 2 unobserved (the long call and notification), 1 unwithheld (9)", res.stats)
	}
	s.Close()
	wait(t, o)
	if got := outcomes(rec); got != "send_invoice_email:ok send_invoice_email:timeout send_invoice_email:error" {
		t.Errorf("attempts: got %s, want 7 ok, 8 withheld, 9 the tool's error (the long call unobserved)", got)
	}
	attempts := rec.ofType("attempt")
	if r := fmt.Sprint(attempts[0]["result"]); !strings.Contains(r, "relayed unread") {
		t.Errorf("7's result: got %s, want a note that it was relayed unread", r)
	}
	if len(rec.ofType("effect")) != 2 {
		t.Errorf("effects: got %v, want 7's and 8's (9 answered isError)", rec.ofType("effect"))
	}
}

// TestStdioThroughARealProcess relays to /bin/cat: what the client writes
// comes back byte for byte, and the end of the client's output ends the
// process.
func TestStdioThroughARealProcess(t *testing.T) {
	cat := exec.Command("cat")
	childIn, err := cat.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	childOut, err := cat.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Start(); err != nil {
		t.Skipf("no cat here: %v", err)
	}
	o := newObserver(t, &collected{t: t}, mcp.Config{})
	in := handshakeIn + line(call(2, "get_invoice", `{"invoice_id":"inv_7"}`, "")) + `{"last":"line without newline"}`
	var got bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := mcp.RelayStdio(o.Session(""), mcp.StdioPipes{ClientIn: strings.NewReader(in), ClientOut: &got, ChildIn: childIn, ChildOut: childOut}, mcp.StdioConfig{})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cat still running 10 s after its input ended")
	}
	if err := cat.Wait(); err != nil {
		t.Fatal(err)
	}
	if got.String() != in {
		t.Errorf("got %q back through cat, want %q", got.String(), in)
	}
}
