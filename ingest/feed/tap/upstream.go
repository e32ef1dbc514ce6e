package tap

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// errUpstreamTimeout ends a request whose upstream did not answer within
// UpstreamTimeout: the client is answered 504.
var errUpstreamTimeout = errors.New("tap: the upstream did not answer in time")

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// upstreamAnswer is what the Transport returned.
type upstreamAnswer struct {
	resp *http.Response
	err  error
}

// roundTrip forwards a request without tying it to its client: the client
// waits at most UpstreamTimeout for the answer, but an upstream that acts
// later still acts, so an unsafe request whose client was answered 504, or
// left, goes on waiting for the answer (up to UpstreamGiveUp from
// forwarding, MaxLate at once) and its effect is recorded when the answer
// comes. A safe request, or one beyond MaxLate, is cancelled instead.
func (t *Tap) roundTrip(req *http.Request) (*http.Response, error) {
	ex := exchangeOf(req.Context())
	if ex == nil {
		return t.cfg.Transport.RoundTrip(req)
	}
	client := req.Context()
	upstream, cancel := context.WithTimeout(context.WithoutCancel(client), t.cfg.UpstreamGiveUp)
	stopOnClose := context.AfterFunc(t.lateCtx, cancel)
	release := func() {
		stopOnClose()
		cancel()
	}
	answer := make(chan upstreamAnswer, 1)
	go func() {
		resp, err := t.cfg.Transport.RoundTrip(req.WithContext(upstream))
		answer <- upstreamAnswer{resp, err}
	}()
	timer := time.NewTimer(t.cfg.UpstreamTimeout)
	defer timer.Stop()
	var err error
	select {
	case a := <-answer:
		if a.err != nil {
			release()
			return nil, a.err
		}
		// In time: the answer streams to the client, and the request ends
		// with it (the server ends the client's context when the handler
		// returns), as any proxied request.
		context.AfterFunc(client, release)
		return a.resp, nil
	case <-timer.C:
		err = errUpstreamTimeout
		t.mu.Lock()
		t.timeouts++
		t.mu.Unlock()
	case <-client.Done():
		err = client.Err()
	}
	if !ex.unsafe || !t.startLate() {
		ex.abandoned = ex.unsafe
		release()
		if a := <-answer; a.resp != nil {
			a.resp.Body.Close()
		}
		return nil, err
	}
	// The handler goes on with ex (handleError notes it); the late answer
	// gets a copy of its own.
	late := *ex
	late.late = "the client was answered 504 after " + t.cfg.UpstreamTimeout.String()
	if err != errUpstreamTimeout {
		late.late = fmt.Sprintf("the client left after %s", t.cfg.Now().Sub(ex.forwarded).Round(time.Millisecond))
	}
	ex.waiting = true
	go func() {
		defer t.lateWG.Done()
		defer t.endLate()
		defer release()
		t.awaitLate(&late, answer)
	}()
	return nil, err
}

// startLate takes a place among the requests waiting for a late answer,
// if one is free and the tap is not draining them (so that lateWG.Add
// never races Drain's Wait).
func (t *Tap) startLate() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.draining || t.cfg.MaxLate < 0 || t.late >= int64(t.cfg.MaxLate) {
		t.abandoned++
		return false
	}
	t.late++
	t.lateWG.Add(1)
	return true
}

func (t *Tap) endLate() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.late--
}

// awaitLate records what an upstream answered after its client had its
// answer, as modifyResponse does for an answer in time; an upstream that
// never answers is logged as one that did not answer, no effect recorded.
func (t *Tap) awaitLate(ex *exchange, answer <-chan upstreamAnswer) {
	a := <-answer
	if a.err != nil {
		reason := "the upstream did not answer: " + a.err.Error()
		if errors.Is(a.err, context.DeadlineExceeded) {
			reason = fmt.Sprintf("the upstream did not answer within %s; given up, an effect it had is not recorded", t.cfg.UpstreamGiveUp)
		} else if t.lateCtx.Err() != nil {
			reason = "the tap stopped before the upstream answered; an effect it had is not recorded"
		}
		t.cfg.Logger.Warn("tap: gave up on a late answer", "provider", t.cfg.Provider, "method", ex.method, "path", ex.path, "key", ex.key, "err", a.err)
		t.note(ex, LogEntry{Error: reason})
		t.mcpUnanswered(ex, reason)
		return
	}
	defer a.resp.Body.Close()
	resp := a.resp
	resp.Request = resp.Request.WithContext(context.WithValue(resp.Request.Context(), exchangeKey{}, ex))
	t.modifyResponse(resp)
}
