package feed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/trace"
)

// ErrRejected marks an effect or a batch of events that the server (or
// the check before it) refused as invalid: sending it again would be
// refused again, so it is never retried.
var ErrRejected = errors.New("rejected")

// HTTPRecorder records effects (RecordEffect) or events of any type
// (RecordEvents) by posting them to an oncetrace server's POST
// /api/v1/events, as a feed that runs outside the server does (the
// standalone recording proxy). Re-sending is harmless: an event's id is
// the same each time, so the server counts it as a duplicate.
type HTTPRecorder struct {
	// Server is the server's base URL, such as http://127.0.0.1:8080.
	Server string
	// Token, when set, is sent as Authorization: Bearer.
	Token string
	// Feed names the feed in effect event ids: tap, webhook, smtp. Events
	// given to RecordEvents carry their own.
	Feed string
	// Client sends the requests; http.DefaultClient when nil. The context
	// given to RecordEffect or RecordEvents bounds each request.
	Client *http.Client
	// Limits check events before RecordEvents sends them, so a batch the
	// server would refuse is refused without a request;
	// ingest.DefaultLimits when zero.
	Limits ingest.Limits
}

// RecordEffect posts the effect and returns once the server has committed
// it. An error wrapping ErrRejected means the server refused the effect
// itself (400, 207, 413, 415, 422); any other error (the server down, 401,
// 429, 5xx) may pass when tried again.
func (r HTTPRecorder) RecordEffect(ctx context.Context, e trace.Effect) error {
	body, err := json.Marshal(Event(e, EventID(r.Feed, e)))
	if err != nil {
		return fmt.Errorf("feed: %w: %v", ErrRejected, err)
	}
	return r.post(ctx, body, "effect "+e.Provider+"/"+e.ID)
}

// RecordEvents validates the events and posts them in one request, a JSON
// array, returning once the server has committed them. Errors are as
// RecordEffect's; a 207 (the server took some of the events and refused
// others, under stricter limits than r.Limits) is ErrRejected too, since
// sending the batch again would store nothing more.
func (r HTTPRecorder) RecordEvents(ctx context.Context, events []json.RawMessage) error {
	lim := r.Limits
	if lim == (ingest.Limits{}) {
		lim = ingest.DefaultLimits
	}
	parsed, err := checkEvents(events, lim)
	if err != nil {
		return err
	}
	var body bytes.Buffer
	body.WriteByte('[')
	for i, ev := range parsed {
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(ev.Body)
	}
	body.WriteByte(']')
	return r.post(ctx, body.Bytes(), fmt.Sprintf("%d events (the first %s)", len(parsed), parsed[0].ID))
}

// post sends body to POST /api/v1/events; what names it in errors.
func (r HTTPRecorder) post(ctx context.Context, body []byte, what string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(r.Server, "/")+"/api/v1/events", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("feed: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	client := r.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("feed: post %s: %w", what, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch resp.StatusCode {
	case http.StatusOK:
		return nil
	case http.StatusMultiStatus, http.StatusBadRequest, http.StatusRequestEntityTooLarge,
		http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		return fmt.Errorf("feed: post %s: %w: %s: %s", what, ErrRejected, resp.Status, strings.TrimSpace(string(msg)))
	}
	return fmt.Errorf("feed: post %s: %s: %s", what, resp.Status, strings.TrimSpace(string(msg)))
}
