package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/oncetrace/oncetrace/store"
)

// TestClaimWebhookToken: a token's first use and a re-delivery of the same
// body get that body back, another body gets the first one (a replay), a
// token is per provider, an expired one is forgotten, and at the cap a new
// token is refused while the remembered ones still answer.
func TestClaimWebhookToken(t *testing.T) {
	db := openEngine(t)
	defer db.Close()
	ctx := context.Background()
	now := time.Date(2026, 6, 30, 14, 0, 0, 0, time.UTC)
	const limit = 3
	for _, tc := range []struct {
		name            string
		provider, token string
		body            string
		expires, at     time.Time
		wantFirst       string
		wantErr         error
	}{
		{"a first use", "mailgun", "tok-1", "body-a", now.Add(5 * time.Minute), now, "body-a", nil},
		{"the same delivery again", "mailgun", "tok-1", "body-a", now.Add(6 * time.Minute), now.Add(time.Second), "body-a", nil},
		{"the token on another body", "mailgun", "tok-1", "body-b", now.Add(6 * time.Minute), now.Add(2 * time.Second), "body-a", nil},
		{"the token of another provider", "crm", "tok-1", "body-b", now.Add(time.Minute), now.Add(2 * time.Second), "body-b", nil},
		{"a third token", "mailgun", "tok-2", "body-c", now.Add(time.Minute), now.Add(3 * time.Second), "body-c", nil},
		{"over the cap", "mailgun", "tok-3", "body-d", now.Add(time.Minute), now.Add(4 * time.Second), "", store.ErrWebhookTokensFull},
		{"a remembered token at the cap", "mailgun", "tok-1", "body-b", now.Add(time.Minute), now.Add(4 * time.Second), "body-a", nil},
		// crm's tok-1 and tok-2 expired: room again.
		{"after two expired", "mailgun", "tok-3", "body-d", now.Add(10 * time.Minute), now.Add(2 * time.Minute), "body-d", nil},
		{"an expired token is new again", "mailgun", "tok-2", "body-e", now.Add(10 * time.Minute), now.Add(2 * time.Minute), "body-e", nil},
	} {
		first, err := db.ClaimWebhookToken(ctx, store.WebhookToken{Provider: tc.provider, Token: tc.token, BodyHash: tc.body, Expires: tc.expires}, tc.at, limit)
		if first != tc.wantFirst || !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: got %q, %v; want %q, %v", tc.name, first, err, tc.wantFirst, tc.wantErr)
		}
	}
}
