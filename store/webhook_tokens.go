package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// WebhookToken is a one-time token a webhook's signature signed (Mailgun's
// signature.token), as first used.
type WebhookToken struct {
	// Provider is the provider of the effects the delivery records: every
	// mapping of one provider shares its tokens.
	Provider string
	// Token identifies the token: a hash of what its signature signed.
	Token string
	// BodyHash identifies the body of the delivery that first used it.
	BodyHash string
	// Expires is when the token's signature is too old to be accepted,
	// after which the token need not be remembered.
	Expires time.Time
}

// ErrWebhookTokensFull is a new token refused because the database holds
// as many unexpired tokens as it may. Forgetting one before it expires
// would let its delivery be replayed, so the new one waits instead.
var ErrWebhookTokensFull = errors.New("store: webhook tokens: full")

// ClaimWebhookToken records the first use of a token and returns the body
// hash of the delivery that first used it: tok.BodyHash itself on a first
// use or a re-delivery of the same body, another one when the token was
// used on another body first (a replay). Tokens expired at now are
// forgotten first; with limit > 0, a new token that would make more than limit
// is refused with ErrWebhookTokensFull.
//
// It runs under the write lock, so that of two instances sharing a
// PostgreSQL database, one claims a token and the other sees the claim.
func (db *DB) ClaimWebhookToken(ctx context.Context, tok WebhookToken, now time.Time, limit int) (firstBody string, err error) {
	err = db.Update(ctx, func(t *Tx) error {
		if err := t.exec(`DELETE FROM webhook_tokens WHERE expires_at < ?`, now.UnixNano()); err != nil {
			return err
		}
		err := t.QueryRowContext(ctx, `SELECT body_hash FROM webhook_tokens WHERE provider = ? AND token = ?`, tok.Provider, tok.Token).Scan(&firstBody)
		if err == nil || !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if limit > 0 {
			var n int
			if err := t.QueryRowContext(ctx, `SELECT count(*) FROM webhook_tokens`).Scan(&n); err != nil {
				return err
			}
			if n >= limit {
				return ErrWebhookTokensFull
			}
		}
		firstBody = tok.BodyHash
		return t.exec(`INSERT INTO webhook_tokens (provider, token, body_hash, expires_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (provider, token) DO NOTHING`, tok.Provider, tok.Token, tok.BodyHash, tok.Expires.UnixNano())
	})
	if errors.Is(err, ErrWebhookTokensFull) {
		return "", err
	}
	if err != nil {
		return "", fmt.Errorf("store: claim webhook token of %s: %w", tok.Provider, err)
	}
	return firstBody, nil
}
