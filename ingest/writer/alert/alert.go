package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncetrace/oncetrace/trace"
)

// Defaults of Config's zero values.
const (
	DefaultQueue      = 256
	DefaultAttempts   = 6
	DefaultBackoff    = time.Second
	DefaultMaxBackoff = time.Minute
	DefaultTimeout    = 10 * time.Second
)

// Config says where alerts go and how hard to try.
type Config struct {
	URL string // the webhook; required
	// ExecutionURL, when set, turns an execution id into an absolute link
	// to its page, included in the message.
	ExecutionURL func(executionID string) string
	Queue        int           // findings that may wait for delivery
	Attempts     int           // tries per finding, the first included
	Backoff      time.Duration // wait before the first retry; doubles after each
	MaxBackoff   time.Duration // longest wait between tries
	Timeout      time.Duration // one try, from dial to the answer's status
	Client       *http.Client  // http.Client{} when nil (Timeout applies per try)
	Logger       *slog.Logger
}

// Message is the JSON body posted: Slack's `text` (mrkdwn, escaped as Slack
// asks), and the finding itself for receivers that want structure.
type Message struct {
	Text         string        `json:"text"`
	Finding      trace.Finding `json:"finding"`
	ExecutionURL string        `json:"execution_url,omitempty"`
}

// Counts are the notifier's totals since it started.
type Counts struct {
	Sent    int64 // delivered (a 2xx answer)
	Failed  int64 // given up on after every try, or refused with a 4xx
	Dropped int64 // not queued: the queue was full, or the notifier closed
	Retries int64 // tries after the first
	Queued  int   // waiting right now
}

// Notifier delivers alerts. Notify never blocks; Close drains.
type Notifier struct {
	cfg    Config
	queue  chan trace.Finding
	ctx    context.Context // cancelled by Close once its deadline passes
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.RWMutex // guards closed against sends on a closed queue
	closed bool

	sent, failed, dropped, retries atomic.Int64
}

// New starts the delivery goroutine; Close stops it.
func New(cfg Config) *Notifier {
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Notifier{cfg: cfg, queue: make(chan trace.Finding, cfg.Queue), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go n.run()
	return n
}

// Notify queues each critical finding for delivery and returns at once: it
// runs on the writer's goroutine (WriterConfig.OnCommit), so a slow or
// dead webhook must cost ingest nothing. A finding that finds the queue
// full is dropped and counted.
func (n *Notifier) Notify(findings []trace.Finding) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	for _, f := range findings {
		if f.Severity != trace.SeverityCritical {
			continue
		}
		if n.closed {
			n.dropped.Add(1)
			continue
		}
		select {
		case n.queue <- f:
		default:
			// Logged at the first drop and every 100th after: a log line
			// per drop would put stderr on the writer's path.
			if d := n.dropped.Add(1); d%100 == 1 {
				n.cfg.Logger.Warn("alert dropped: the webhook queue is full", "rule", f.Rule, "execution", f.ExecutionID, "dropped_so_far", d)
			}
		}
	}
}

// Counts returns the totals so far.
func (n *Notifier) Counts() Counts {
	return Counts{Sent: n.sent.Load(), Failed: n.failed.Load(), Dropped: n.dropped.Load(),
		Retries: n.retries.Load(), Queued: len(n.queue)}
}

// Close stops taking findings and delivers those queued until ctx is done;
// then it abandons the rest (counted as failed) and returns once the
// delivery goroutine has.
func (n *Notifier) Close(ctx context.Context) {
	n.mu.Lock()
	if !n.closed {
		n.closed = true
		close(n.queue)
	}
	n.mu.Unlock()
	select {
	case <-n.done:
	case <-ctx.Done():
		n.cancel()
		<-n.done
	}
	n.cancel()
}

func (n *Notifier) run() {
	defer close(n.done)
	for f := range n.queue {
		if n.ctx.Err() != nil {
			n.failed.Add(1)
			continue
		}
		n.deliver(f)
	}
}

// deliver tries one finding up to Attempts times. A 2xx is success; a 4xx
// other than 408 and 429 is the receiver refusing this message, which a
// retry would not change; anything else (a network error, a timeout, 408,
// 429, 5xx) is retried after a backoff that doubles, or after the
// receiver's Retry-After when it says so and asks for no longer than
// MaxBackoff.
func (n *Notifier) deliver(f trace.Finding) {
	body, err := json.Marshal(n.message(f))
	if err != nil {
		n.failed.Add(1)
		n.cfg.Logger.Error("alert: cannot encode the finding", "err", err)
		return
	}
	wait := n.cfg.Backoff
	for try := 1; ; try++ {
		retryAfter, err := n.post(body)
		if err == nil {
			n.sent.Add(1)
			return
		}
		var perm permanentError
		if errors.As(err, &perm) || try >= n.cfg.Attempts || n.ctx.Err() != nil {
			n.failed.Add(1)
			n.cfg.Logger.Error("alert not delivered", "rule", f.Rule, "execution", f.ExecutionID, "tries", try, "err", err)
			return
		}
		d := wait
		if retryAfter > 0 && retryAfter <= n.cfg.MaxBackoff {
			d = retryAfter
		}
		n.cfg.Logger.Warn("alert: webhook failed; retrying", "try", try, "in", d, "err", err)
		select {
		case <-time.After(d):
		case <-n.ctx.Done():
			n.failed.Add(1)
			return
		}
		n.retries.Add(1)
		wait = min(2*wait, n.cfg.MaxBackoff)
	}
}

// permanentError is a failure a retry would not change.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }

// post makes one try; it returns the Retry-After the receiver asked for.
func (n *Notifier) post(body []byte) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return 0, permanentError{err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "oncetrace-alert")
	resp, err := n.cfg.Client.Do(req)
	if err != nil {
		return 0, err
	}
	// Drained (a little) so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return 0, nil
	case resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		var after time.Duration
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 {
			after = time.Duration(secs) * time.Second
		}
		return after, fmt.Errorf("webhook answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	default:
		return 0, permanentError{fmt.Errorf("the webhook refused the message: %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))}
	}
}

// message is the JSON posted for one finding. Slack reads `text` as mrkdwn,
// in which &, < and > must be escaped; its links are <url|label>.
func (n *Notifier) message(f trace.Finding) Message {
	m := Message{Finding: f}
	if n.cfg.ExecutionURL != nil && f.ExecutionID != "" {
		m.ExecutionURL = n.cfg.ExecutionURL(f.ExecutionID)
	}
	var b strings.Builder
	b.WriteString(":rotating_light: *oncetrace: critical finding `")
	b.WriteString(slackEscape(string(f.Rule)))
	b.WriteString("`*")
	if f.ExecutionID != "" {
		b.WriteString(" in execution ")
		if m.ExecutionURL != "" {
			b.WriteString("<" + slackEscape(m.ExecutionURL) + "|" + slackEscape(f.ExecutionID) + ">")
		} else {
			b.WriteString("`" + slackEscape(f.ExecutionID) + "`")
		}
	}
	if f.StepID != "" {
		b.WriteString(", step `" + slackEscape(f.StepID) + "`")
	}
	b.WriteString("\n")
	b.WriteString(slackEscape(f.Message))
	m.Text = b.String()
	return m
}

var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func slackEscape(s string) string { return slackEscaper.Replace(s) }
