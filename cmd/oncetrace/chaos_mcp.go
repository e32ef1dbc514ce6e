package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/ingest/feed/mcp"
	"github.com/oncetrace/oncetrace/ingest/feed/sandbox"
	"github.com/oncetrace/oncetrace/ingest/feed/tap"
)

// Chaos through MCP (docs/chaos.md § MCP servers): an MCP server's call
// sites are its tools/call messages of tools not annotated read-only, and
// its effects those its recording proxy (mcp.Observer) records. A stdio
// server runs in the command's own process tree, under `oncetrace
// mcp-stdio --chaos URL`, which asks the run's stdio control (below) what
// strikes each call and records through it, so that calls of every
// upstream, in every process, are numbered in one sequence.

// mcpToolsCall is the method of an MCP call site.
const mcpToolsCall = "tools/call"

// chaosSettleLimit bounds how long a run waits, after its command ended,
// for the mcp-stdio processes it started to hand over their last
// recordings.
const chaosSettleLimit = 10 * time.Second

// chaosEventRecorder counts the distinct effects among the events an MCP
// proxy records, then records them on the run's server. The count is the
// verdict's: it does not depend on the server.
type chaosEventRecorder struct {
	next     feed.EventRecorder
	provider string
	logger   *slog.Logger

	mu  sync.Mutex
	ids map[string]bool
}

func newChaosEventRecorder(u chaosUpstream, next feed.EventRecorder, logger *slog.Logger) *chaosEventRecorder {
	return &chaosEventRecorder{next: next, provider: u.provider(), logger: logger, ids: map[string]bool{}}
}

func (r *chaosEventRecorder) RecordEvents(ctx context.Context, events []json.RawMessage) error {
	r.count(events)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := r.next.RecordEvents(ctx, events); err != nil {
		r.logger.Warn("chaos: an MCP call's events could not be recorded on the run's server; its effect still counts", "provider", r.provider, "err", err)
		return err
	}
	return nil
}

// count notes the effect events' ids.
func (r *chaosEventRecorder) count(events []json.RawMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, raw := range events {
		var ev struct {
			Type     string `json:"type"`
			EffectID string `json:"effect_id"`
		}
		if json.Unmarshal(raw, &ev) == nil && ev.Type == "effect" && ev.EffectID != "" {
			r.ids[ev.EffectID] = true
		}
	}
}

func (r *chaosEventRecorder) effects() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ids)
}

// startMCPProxy starts a Streamable HTTP MCP server's recording proxy:
// the tap in MCP mode, whose observer has the striker number its calls.
// The command gets the MCP endpoint at the proxy: the upstream's URL with
// the proxy's host and port.
func (c *chaosRunner) startMCPProxy(u chaosUpstream, striker *chaosStriker, next feed.EventRecorder) (*chaosProxy, error) {
	rec := newChaosEventRecorder(u, next, c.logger)
	observer, err := mcp.New(mcp.Config{Provider: u.provider(), Recorder: rec, Logger: c.logger,
		Strike: func(call mcp.Call) []sandbox.Fault {
			return striker.call(u.name, call.Tool, mcp.ToolStepID(call.Tool, call.Args))
		}})
	if err != nil {
		return nil, fmt.Errorf("chaos: --mcp %s: %w", u.name, err)
	}
	tp, err := tap.New(tap.Config{Upstream: u.url, Provider: u.provider(), MCP: observer, HoldLimit: 2 * c.o.timeout, Logger: c.logger})
	if err != nil {
		return nil, fmt.Errorf("chaos: --upstream %s: %w", u.name, err)
	}
	base, stop, err := c.serveProxy(u, tp)
	if err != nil {
		return nil, err
	}
	endpoint := base
	if up, err := url.Parse(u.url); err == nil {
		endpoint += up.EscapedPath()
	}
	return &chaosProxy{upstream: u, value: endpoint, effects: rec.effects, stop: func(bool) {
		tp.Close() // a held answer's stream ends
		stop(tp)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		observer.Wait(ctx) // the calls' last hand-overs to rec
	}}, nil
}

// call counts a tools/call of a tool not annotated read-only as an unsafe
// request and returns the faults that strike it.
func (s *chaosStriker) call(upstream, tool, step string) []sandbox.Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, chaosRequest{upstream: upstream, method: mcpToolsCall, tool: tool, step: step})
	if len(s.requests) == s.at {
		return []sandbox.Fault{s.fault}
	}
	return nil
}

// chaosStrikeRequest is what mcp-stdio tells chaos of a call, and
// chaosStrikeAnswer what strikes it.
type chaosStrikeRequest struct {
	Tool string `json:"tool"`
	Step string `json:"step"`
}

type chaosStrikeAnswer struct {
	Faults []sandbox.Fault `json:"faults"`
}

// chaosStdioControl is the loopback endpoint a run's mcp-stdio processes
// talk to, one base URL per --mcp-stdio server (/mcp-stdio/NAME):
//
//	POST BASE/start            a process started
//	POST BASE/strike           a call: which faults strike it (chaosStrikeRequest, chaosStrikeAnswer)
//	POST BASE/api/v1/events    a call's events: counted, then recorded on the run's server
//	POST BASE/done             a process handed over its last events
//
// It is chaos's own wiring, not an API: both ends are this binary.
type chaosStdioControl struct {
	url     string
	striker *chaosStriker
	server  *http.Server
	served  chan struct{}

	mu      sync.Mutex
	servers map[string]*chaosStdioServer // by upstream name
}

// chaosStdioServer is what the control keeps of one --mcp-stdio server.
type chaosStdioServer struct {
	upstream chaosUpstream
	recorder *chaosEventRecorder
	started  int // processes that said start
	done     int // and done
}

func startChaosStdioControl(striker *chaosStriker, logger *slog.Logger) (*chaosStdioControl, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaos: mcp-stdio control: %w", err)
	}
	c := &chaosStdioControl{url: "http://" + ln.Addr().String(), striker: striker, served: make(chan struct{}), servers: map[string]*chaosStdioServer{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /mcp-stdio/{name}/start", c.handleStart)
	mux.HandleFunc("POST /mcp-stdio/{name}/strike", c.handleStrike)
	mux.HandleFunc("POST /mcp-stdio/{name}/api/v1/events", c.handleEvents)
	mux.HandleFunc("POST /mcp-stdio/{name}/done", c.handleDone)
	c.server = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	go func() {
		defer close(c.served)
		c.server.Serve(ln)
	}()
	return c, nil
}

// add makes u's proxy for the run: the command line the command finds in
// u's variable, and the effects its mcp-stdio processes record.
func (c *chaosStdioControl) add(u chaosUpstream, next feed.EventRecorder, logger *slog.Logger) (*chaosProxy, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("chaos: --mcp-stdio %s: cannot find my own binary to run mcp-stdio: %w", u.name, err)
	}
	s := &chaosStdioServer{upstream: u, recorder: newChaosEventRecorder(u, next, logger)}
	c.mu.Lock()
	c.servers[u.name] = s
	c.mu.Unlock()
	line := append([]string{exe, "mcp-stdio", "--provider", u.provider(), "--chaos", c.url + "/mcp-stdio/" + u.name, "--"}, u.command...)
	return &chaosProxy{upstream: u, value: shellJoin(line), effects: s.recorder.effects,
		stop: func(settle bool) {
			if settle {
				c.settle(u.name)
			}
		}}, nil
}

// settle waits, up to chaosSettleLimit, until every mcp-stdio process of
// the server that started has handed over its last events.
func (c *chaosStdioControl) settle(name string) {
	for deadline := time.Now().Add(chaosSettleLimit); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		c.mu.Lock()
		s := c.servers[name]
		settled := s.done >= s.started
		c.mu.Unlock()
		if settled {
			return
		}
	}
}

func (c *chaosStdioControl) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c.server.Shutdown(ctx) != nil {
		c.server.Close()
	}
	<-c.served
}

// lookup is the server the request's path names; nil, answered 404, when
// none.
func (c *chaosStdioControl) lookup(w http.ResponseWriter, r *http.Request) *chaosStdioServer {
	c.mu.Lock()
	s := c.servers[r.PathValue("name")]
	c.mu.Unlock()
	if s == nil {
		http.Error(w, "chaos: no --mcp-stdio server "+r.PathValue("name"), http.StatusNotFound)
	}
	return s
}

func (c *chaosStdioControl) handleStart(w http.ResponseWriter, r *http.Request) {
	if s := c.lookup(w, r); s != nil {
		c.mu.Lock()
		s.started++
		c.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}
}

func (c *chaosStdioControl) handleDone(w http.ResponseWriter, r *http.Request) {
	if s := c.lookup(w, r); s != nil {
		c.mu.Lock()
		s.done++
		c.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}
}

func (c *chaosStdioControl) handleStrike(w http.ResponseWriter, r *http.Request) {
	s := c.lookup(w, r)
	if s == nil {
		return
	}
	var call chaosStrikeRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&call); err != nil || call.Tool == "" {
		http.Error(w, "chaos: want {\"tool\":..., \"step\":...}", http.StatusBadRequest)
		return
	}
	answer := chaosStrikeAnswer{Faults: c.striker.call(s.upstream.name, call.Tool, call.Step)}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(answer)
}

func (c *chaosStdioControl) handleEvents(w http.ResponseWriter, r *http.Request) {
	s := c.lookup(w, r)
	if s == nil {
		return
	}
	var events []json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&events); err != nil {
		http.Error(w, "chaos: want a JSON array of events: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := s.recorder.RecordEvents(r.Context(), events); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// chaosLink is mcp-stdio's side of the control, with --chaos BASE: chaos
// decides the faults of each call and receives the recordings.
type chaosLink struct {
	base   string
	client *http.Client
	logger *slog.Logger
}

func newChaosLink(base string, logger *slog.Logger) *chaosLink {
	return &chaosLink{base: strings.TrimRight(base, "/"), client: &http.Client{Timeout: 5 * time.Second}, logger: logger}
}

// recorder records the observer's events through chaos.
func (l *chaosLink) recorder() feed.HTTPRecorder {
	return feed.HTTPRecorder{Server: l.base, Feed: mcp.Feed, Client: l.client}
}

// strike asks chaos which faults strike the call (mcp.Config.Strike).
// The observer holds its lock meanwhile: a loopback round trip, bounded
// by the client's timeout; without an answer no fault strikes.
func (l *chaosLink) strike(c mcp.Call) []sandbox.Fault {
	var answer chaosStrikeAnswer
	if err := l.post("/strike", chaosStrikeRequest{Tool: c.Tool, Step: mcp.ToolStepID(c.Tool, c.Args)}, &answer); err != nil {
		l.logger.Warn("mcp-stdio: chaos did not say what strikes a call; none does", "tool", c.Tool, "err", err)
		return nil
	}
	return answer.Faults
}

// start and done tell chaos the process began, and handed over its last
// recordings.
func (l *chaosLink) start() { l.say("/start") }
func (l *chaosLink) done()  { l.say("/done") }

func (l *chaosLink) say(path string) {
	if err := l.post(path, struct{}{}, nil); err != nil {
		l.logger.Warn("mcp-stdio: telling chaos failed", "what", strings.TrimPrefix(path, "/"), "err", err)
	}
}

func (l *chaosLink) post(path string, body, answer any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	resp, err := l.client.Post(l.base+path, "application/json", strings.NewReader(string(b)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, strings.TrimSpace(string(msg)))
	}
	if answer == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(answer)
}

// shellWords splits a command line into words as a POSIX shell does for
// a simple command: blanks separate words; single quotes keep everything
// up to the next one; double quotes keep everything but \" and \\;
// a backslash outside quotes keeps the next character. Nothing is
// expanded.
func shellWords(line string) ([]string, error) {
	var words []string
	var word strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		case ch == '\'':
			end := strings.IndexByte(line[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("a single quote is not closed")
			}
			word.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case ch == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && (line[i+1] == '"' || line[i+1] == '\\') {
					i++
				}
				word.WriteByte(line[i])
			}
			if i >= len(line) {
				return nil, errors.New("a double quote is not closed")
			}
			inWord = true
		case ch == '\\':
			if i+1 >= len(line) {
				return nil, errors.New("a backslash ends the line")
			}
			i++
			word.WriteByte(line[i])
			inWord = true
		default:
			word.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}

// shellJoin is words as one command line that shellWords (and a POSIX
// shell, and Python's shlex.split) reads back: a word with anything but
// letters, digits and -_./:=@,+% is single-quoted.
func shellJoin(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = shellQuote(w)
	}
	return strings.Join(quoted, " ")
}

func shellQuote(w string) string {
	if w == "" {
		return "''"
	}
	if strings.IndexFunc(w, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+%", r))
	}) < 0 {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
