package tap_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed/tap"
)

// hopByHop are the headers a proxy must not forward (RFC 9110 § 7.6.1),
// and Date, which each server stamps when it answers.
var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Date"}

func endToEnd(h http.Header) http.Header {
	out := h.Clone()
	for _, k := range hopByHop {
		out.Del(k)
	}
	return out
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// seenRequest is what the upstream received.
type seenRequest struct {
	Method, URI, Host string
	Header            http.Header
	BodySHA           string
	BodyLen           int
	Chunked           bool
}

// echoUpstream answers deterministically, so that a request sent twice gets
// the same bytes back, and keeps what it received.
type echoUpstream struct {
	mu   sync.Mutex
	seen []seenRequest
	// release lets /v1/stream send its last chunks.
	release chan struct{}
}

func (u *echoUpstream) requests() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenRequest(nil), u.seen...)
}

const bigResponseBytes = 3 << 20

func (u *echoUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.seen = append(u.seen, seenRequest{Method: r.Method, URI: r.URL.RequestURI(), Host: r.Host, Header: endToEnd(r.Header),
		BodySHA: sum(body), BodyLen: len(body), Chunked: len(r.TransferEncoding) > 0})
	u.mu.Unlock()
	h := w.Header()
	h.Set("X-Request-Id", "rq_"+sum(body)[:12])
	h["X-Multi"] = []string{"one", "two"}
	h.Add("Set-Cookie", "a=1; Path=/")
	h.Add("Set-Cookie", "b=2; Path=/; HttpOnly")
	switch r.URL.Path {
	case "/v1/charges":
		h.Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"ch_%s","object":"charge","amount":1240,"query":%q}`, sum(body)[:10], r.URL.RawQuery)
	case "/v1/charges/ch_1":
		h.Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"ch_1","object":"charge"}`)
	case "/v1/declined":
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusPaymentRequired)
		io.WriteString(w, `{"error":{"type":"card_error","code":"card_declined"}}`)
	case "/v1/stream":
		h.Set("Content-Type", "application/x-ndjson")
		h.Set("Trailer", "X-Checksum")
		w.WriteHeader(http.StatusOK)
		var all bytes.Buffer
		for i := range 5 {
			if i == 2 && u.release != nil {
				<-u.release
			}
			line := fmt.Sprintf(`{"chunk":%d,"of":"%s"}`+"\n", i, sum(body)[:8])
			all.WriteString(line)
			io.WriteString(w, line)
			w.(http.Flusher).Flush()
		}
		h.Set("X-Checksum", sum(all.Bytes()))
	case "/v1/big":
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", fmt.Sprint(bigResponseBytes))
		head := fmt.Sprintf(`{"id":"big_%s","pad":"`, sum(body)[:10])
		pad := strings.Repeat("x", bigResponseBytes-len(head)-2)
		io.WriteString(w, head+pad+`"}`)
	case "/v1/gzip":
		h.Set("Content-Type", "application/json")
		plain := `{"id":"gz_1","object":"message"}`
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			io.WriteString(zw, plain)
			zw.Close()
			h.Set("Content-Encoding", "gzip")
			h.Set("Vary", "Accept-Encoding")
			w.Write(b.Bytes())
			return
		}
		io.WriteString(w, plain)
	case "/v1/empty":
		w.WriteHeader(http.StatusNoContent)
	case "/v1/moved":
		http.Redirect(w, r, "/v1/charges/ch_1", http.StatusFound)
	default:
		http.NotFound(w, r)
	}
}

// exchangeResult is everything a client can see of a response.
type exchangeResult struct {
	Status        int
	Header        http.Header
	ContentLength int64
	Chunked       bool
	Body          []byte
	Trailer       http.Header
}

type testRequest struct {
	name, method, path string
	header             map[string]string
	body               []byte
	chunked            bool // send the body without a length
}

func send(t *testing.T, client *http.Client, base string, tr testRequest) exchangeResult {
	t.Helper()
	var body io.Reader
	if tr.body != nil {
		body = bytes.NewReader(tr.body)
		if tr.chunked {
			body = io.MultiReader(body) // hides the length: sent chunked
		}
	}
	req, err := http.NewRequest(tr.method, base+tr.path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range tr.header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", tr.method, base+tr.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", tr.method, base+tr.path, err)
	}
	return exchangeResult{Status: resp.StatusCode, Header: endToEnd(resp.Header), ContentLength: resp.ContentLength,
		Chunked: len(resp.TransferEncoding) > 0, Body: b, Trailer: resp.Trailer}
}

// TestTapPassesEverythingThroughUnchanged sends each request straight to
// the upstream and then through the tap: the client sees the same status,
// headers (but hop-by-hop ones and Date), body bytes and trailers, and the
// upstream sees the same request. The tap looks at 64 KiB of each body
// here, so the large ones go past its peek limit.
func TestTapPassesEverythingThroughUnchanged(t *testing.T) {
	up := &echoUpstream{}
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	rec := &memRecorder{}
	_, tapURL := startTap(t, upstream.URL, rec, func(c *tap.Config) { c.MaxPeekBytes = 64 << 10 })
	client := rawClient(20 * time.Second)

	big := bytes.Repeat([]byte(`{"to":"jordan@acme.dev","pad":"0123456789abcdef"}`), (2<<20)/48)
	requests := []testRequest{
		{name: "JSON POST with a key", method: "POST", path: "/v1/charges?expand[]=customer&x=1;y",
			header: map[string]string{"Content-Type": "application/json", "Idempotency-Key": "ik_1", "Authorization": "Bearer sk_test_1",
				"Traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "X-Forwarded-For": "10.0.0.7"},
			body: []byte(`{"amount":1240,"to":"cus_9"}`)},
		{name: "form POST", method: "POST", path: "/v1/charges",
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, body: []byte("amount=1240&customer=cus_9")},
		{name: "GET", method: "GET", path: "/v1/charges/ch_1"},
		{name: "HEAD", method: "HEAD", path: "/v1/charges/ch_1"},
		{name: "an error answer", method: "POST", path: "/v1/declined", body: []byte(`{}`)},
		{name: "a redirect, not followed", method: "POST", path: "/v1/moved", body: []byte(`{}`)},
		{name: "a not found", method: "DELETE", path: "/v1/nothing"},
		{name: "a 204", method: "DELETE", path: "/v1/empty"},
		{name: "a streamed chunked answer with a trailer", method: "POST", path: "/v1/stream", body: []byte(`{"q":1}`)},
		{name: "bodies beyond the peek limit", method: "POST", path: "/v1/big", body: big,
			header: map[string]string{"Content-Type": "application/json"}},
		{name: "a chunked request body beyond the peek limit", method: "PUT", path: "/v1/big", body: big, chunked: true},
		{name: "a gzip answer", method: "POST", path: "/v1/gzip", body: []byte(`{}`),
			header: map[string]string{"Accept-Encoding": "gzip"}},
		{name: "an identity answer", method: "POST", path: "/v1/gzip", body: []byte(`{}`)},
	}
	for _, tr := range requests {
		t.Run(tr.name, func(t *testing.T) {
			before := len(up.requests())
			direct := send(t, client, upstream.URL, tr)
			proxied := send(t, client, tapURL, tr)
			if direct.Status != proxied.Status {
				t.Errorf("status: got %d through the tap, want %d", proxied.Status, direct.Status)
			}
			if !reflect.DeepEqual(direct.Header, proxied.Header) {
				t.Errorf("headers: got %v through the tap, want %v", proxied.Header, direct.Header)
			}
			if direct.ContentLength != proxied.ContentLength || direct.Chunked != proxied.Chunked {
				t.Errorf("framing: got length %d chunked %v through the tap, want %d %v", proxied.ContentLength, proxied.Chunked,
					direct.ContentLength, direct.Chunked)
			}
			if !bytes.Equal(direct.Body, proxied.Body) {
				t.Errorf("body: got %d bytes (sha %s) through the tap, want %d bytes (sha %s)", len(proxied.Body), sum(proxied.Body)[:12],
					len(direct.Body), sum(direct.Body)[:12])
			}
			if !reflect.DeepEqual(direct.Trailer, proxied.Trailer) {
				t.Errorf("trailer: got %v through the tap, want %v", proxied.Trailer, direct.Trailer)
			}
			seen := up.requests()[before:]
			if len(seen) != 2 {
				t.Fatalf("upstream: got %d requests, want 2", len(seen))
			}
			if !reflect.DeepEqual(seen[0], seen[1]) {
				t.Errorf("what the upstream received: got %+v through the tap, want %+v", seen[1], seen[0])
			}
		})
	}
	// The chunked answer really was chunked, the big one really was big.
	named := func(name string) testRequest {
		for _, tr := range requests {
			if strings.HasPrefix(tr.name, name) {
				return tr
			}
		}
		t.Fatalf("no request named %q", name)
		return testRequest{}
	}
	if r := send(t, client, tapURL, named("a streamed chunked answer")); !r.Chunked || r.Trailer.Get("X-Checksum") == "" {
		t.Errorf("stream: got chunked %v, trailer %v; want a chunked answer with its trailer", r.Chunked, r.Trailer)
	}
	if r := send(t, client, tapURL, named("bodies beyond the peek limit")); len(r.Body) != bigResponseBytes {
		t.Errorf("big: got %d bytes, want %d", len(r.Body), bigResponseBytes)
	}
}

// TestTapStreamsAnswers has the upstream send two chunks and wait: the
// client gets them through the tap while the upstream still waits, so the
// tap passes a streamed answer on as it comes and holds nothing back.
func TestTapStreamsAnswers(t *testing.T) {
	up := &echoUpstream{release: make(chan struct{})}
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	rec := &memRecorder{}
	_, tapURL := startTap(t, upstream.URL, rec, nil)

	resp, err := rawClient(20*time.Second).Post(tapURL+"/v1/stream", "application/json", strings.NewReader(`{"q":1}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make(chan string, 1)
	go func() {
		var got []byte
		buf := make([]byte, 256)
		for bytes.Count(got, []byte("\n")) < 2 {
			n, err := resp.Body.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				break
			}
		}
		first <- string(got)
	}()
	select {
	case got := <-first:
		if strings.Count(got, "\n") < 2 {
			t.Fatalf("first chunks: got %q, want two lines", got)
		}
	case <-time.After(5 * time.Second):
		close(up.release)
		t.Fatal("the first chunks did not arrive while the upstream was still sending: the tap buffers the stream")
	}
	if n := len(rec.all()); n != 0 {
		t.Errorf("effects before the stream ended: got %d, want 0 (recorded at the end)", n)
	}
	close(up.release)
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(rest), "\n") != 3 {
		t.Errorf("rest of the stream: got %q, want three more lines", rest)
	}
	if es := rec.waitEffects(t, 1); !strings.HasPrefix(es[0].ID, "req_") {
		t.Errorf("effect of an answer with no id field: got id %q, want a req_ hash", es[0].ID)
	}
}
