package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// request is one line of requests.jsonl, as run.mjs writes it for the
// other frameworks (gen/README.md § Output).
type request struct {
	Seq             int               `json:"seq"`
	Kind            string            `json:"kind"` // otlp or mail
	AtMS            int64             `json:"at_ms"`
	ContentType     string            `json:"content_type,omitempty"`
	ContentEncoding string            `json:"content_encoding,omitempty"`
	BodyFile        string            `json:"body_file,omitempty"`
	Method          string            `json:"method,omitempty"`
	Path            string            `json:"path,omitempty"`
	Headers         map[string]string `json:"headers,omitempty"`
	Body            string            `json:"body,omitempty"`
	Status          any               `json:"status,omitempty"` // a number, or "aborted"
	EndMS           int64             `json:"end_ms,omitempty"`
	ResponseBody    *string           `json:"response_body,omitempty"`
}

// recorder answers the workers' OTLP exports (kept, answered 200) and
// forwards their mail requests to serve's sandbox (kept with the answer,
// or "aborted" when the worker gave up first).
type recorder struct {
	url      string
	upstream string
	srv      *http.Server

	mu   sync.Mutex
	dir  string
	seq  int
	otlp int
	reqs []request
	busy sync.WaitGroup // requests in flight
}

func startRecorder(upstream string) (*recorder, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &recorder{url: "http://" + l.Addr().String(), upstream: upstream}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.handleOTLP)
	mux.HandleFunc("/sandbox/", r.handleMail)
	r.srv = &http.Server{Handler: mux}
	go r.srv.Serve(l)
	return r, nil
}

func (r *recorder) close() { r.srv.Close() }

// reset starts recording a run into dir.
func (r *recorder) reset(dir string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dir, r.seq, r.otlp, r.reqs = dir, 0, 0, nil
}

// finish waits for the requests in flight and writes requests.jsonl, in
// arrival order.
func (r *recorder) finish() ([]request, error) {
	r.busy.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	reqs, dir := r.reqs, r.dir
	slices.SortFunc(reqs, func(a, b request) int { return a.Seq - b.Seq })
	var b bytes.Buffer
	for _, q := range reqs {
		line, _ := json.Marshal(q)
		b.Write(append(line, '\n'))
	}
	r.dir, r.reqs = "", nil
	return reqs, os.WriteFile(filepath.Join(dir, "requests.jsonl"), b.Bytes(), 0o644)
}

func (r *recorder) next() (int, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	return r.seq, r.dir
}

func (r *recorder) add(q request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, q)
}

// readRequest reads a request's body and the time it came, answering
// 400 when it cannot.
func readRequest(w http.ResponseWriter, req *http.Request) (atMS int64, body []byte, ok bool) {
	atMS = time.Now().UnixMilli()
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return atMS, nil, false
	}
	return atMS, body, true
}

func (r *recorder) handleOTLP(w http.ResponseWriter, req *http.Request) {
	r.busy.Add(1)
	defer r.busy.Done()
	at, body, ok := readRequest(w, req)
	if !ok {
		return
	}
	seq, dir := r.next()
	if dir == "" {
		http.Error(w, "not recording", http.StatusServiceUnavailable)
		return
	}
	r.mu.Lock()
	r.otlp++
	name := fmt.Sprintf("otlp-%03d.pb", r.otlp)
	r.mu.Unlock()
	if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	r.add(request{Seq: seq, Kind: "otlp", AtMS: at, ContentType: req.Header.Get("Content-Type"),
		ContentEncoding: req.Header.Get("Content-Encoding"), BodyFile: name})
	// An empty ExportTraceServiceResponse: full success.
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

func (r *recorder) handleMail(w http.ResponseWriter, req *http.Request) {
	r.busy.Add(1)
	defer r.busy.Done()
	at, body, ok := readRequest(w, req)
	if !ok {
		return
	}
	seq, _ := r.next()
	q := request{Seq: seq, Kind: "mail", AtMS: at, Method: req.Method, Path: req.URL.RequestURI(),
		Headers: map[string]string{"host": req.Host}, Body: string(body)}
	for k, v := range req.Header {
		q.Headers[strings.ToLower(k)] = strings.Join(v, ", ")
	}
	up, err := http.NewRequestWithContext(req.Context(), req.Method, r.upstream+req.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	up.Header = req.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(up)
	var respBody []byte
	if err == nil {
		respBody, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	q.EndMS = time.Now().UnixMilli()
	empty := ""
	q.ResponseBody = &empty
	if err != nil {
		// The worker gave up first (a lost response): the sandbox
		// delivered and held the answer.
		q.Status = "aborted"
		r.add(q)
		if req.Context().Err() == nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
		}
		return
	}
	q.Status = resp.StatusCode
	s := string(respBody)
	q.ResponseBody = &s
	r.add(q)
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(respBody)
}
