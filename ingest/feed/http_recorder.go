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

	"github.com/oncetrace/oncetrace/trace"
)

// ErrRejected marks an effect that the server (or the check before it)
// refused as invalid: sending it again would be refused again, so it is
// never retried.
var ErrRejected = errors.New("effect rejected")

// HTTPRecorder records effects by posting them to an oncetrace server's
// POST /api/v1/events, as a feed that runs outside the server does (the
// standalone recording proxy). Re-sending an effect is harmless: its event
// id is the same, so the server counts it as a duplicate.
type HTTPRecorder struct {
	// Server is the server's base URL, such as http://127.0.0.1:8080.
	Server string
	// Token, when set, is sent as Authorization: Bearer.
	Token string
	// Feed names the feed in event ids: tap, webhook, smtp.
	Feed string
	// Client sends the requests; http.DefaultClient when nil. The context
	// given to RecordEffect bounds each request.
	Client *http.Client
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
		return fmt.Errorf("feed: post effect: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch resp.StatusCode {
	case http.StatusOK:
		return nil
	case http.StatusMultiStatus, http.StatusBadRequest, http.StatusRequestEntityTooLarge,
		http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
		return fmt.Errorf("feed: post effect %s/%s: %w: %s: %s", e.Provider, e.ID, ErrRejected, resp.Status, strings.TrimSpace(string(msg)))
	}
	return fmt.Errorf("feed: post effect %s/%s: %s: %s", e.Provider, e.ID, resp.Status, strings.TrimSpace(string(msg)))
}
