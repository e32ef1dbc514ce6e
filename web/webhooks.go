package web

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/ingest"
	"github.com/oncetrace/oncetrace/ingest/feed"
	"github.com/oncetrace/oncetrace/ingest/feed/webhook"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// DefaultWebhookTolerance is how old a signed delivery's timestamp may be:
// Stripe's own libraries allow five minutes.
const DefaultWebhookTolerance = 5 * time.Minute

// DefaultWebhookMaxTokens is how many unexpired one-time tokens of signed
// webhooks the database remembers (about 100 bytes each): a sender's
// deliveries of one tolerance window, over 300 a second at the default
// five minutes.
const DefaultWebhookMaxTokens = 100_000

// anyAgeTokenMemory is how long a token is remembered when signatures of
// any age are accepted (a tolerance of 0): it cannot be for ever, so a
// delivery captured a day ago can be replayed then (docs/security.md).
const anyAgeTokenMemory = 24 * time.Hour

// tokenClockSkew keeps a token a little past its signature's expiry, for
// instances sharing a database whose clocks differ.
const tokenClockSkew = time.Minute

// webhookFeed names webhooks in effect event ids: a re-delivered webhook
// maps to the same effect, so to the same event id, and is a duplicate.
const webhookFeed = "webhook"

// WebhookConfig configures POST /api/v1/webhooks/{provider}.
type WebhookConfig struct {
	// Mappings read each provider's deliveries, by the {provider} of the
	// path; webhook.Builtin() when nil.
	Mappings webhook.Mappings
	// Secrets verify signatures, by mapping name. A provider with a secret
	// accepts only deliveries signed with it; one without a secret accepts
	// unsigned ones (behind the ingest token, when one is set).
	Secrets map[string]string
	// Tolerance is how old a signature's timestamp may be;
	// DefaultWebhookTolerance when zero, any age when negative.
	Tolerance time.Duration
	// MaxTokens is how many unexpired one-time tokens (Mailgun's
	// signature.token, a mapping's replay_token) the database remembers;
	// DefaultWebhookMaxTokens when zero. At the limit a delivery with a
	// new token is answered 503, retryable, rather than an unexpired
	// token forgotten.
	MaxTokens int
}

var builtinWebhooks = sync.OnceValue(webhook.Builtin)

func (s *Server) webhookMappings() webhook.Mappings {
	if s.cfg.Webhooks.Mappings != nil {
		return s.cfg.Webhooks.Mappings
	}
	return builtinWebhooks()
}

type webhookResponse struct {
	Accepted   int            `json:"accepted"`
	Duplicates int            `json:"duplicates"`
	Ignored    map[string]int `json:"ignored"`
}

// requireWebhookToken lets a delivery through to its signature check when
// the provider has a secret: providers cannot send oncetrace's token, and
// the signature proves who sent it. A provider without a secret is
// guarded like every other POST: with the ingest token, when one is set,
// as a bearer token or as the password of Basic credentials, which is what
// a provider's webhook URL can carry (https://oncetrace:TOKEN@host/...).
func (s *Server) requireWebhookToken(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		name, err := pathParam(c, "provider")
		if err != nil {
			return err
		}
		if _, signed := s.cfg.Webhooks.Secrets[name]; signed || s.cfg.IngestToken == "" {
			return next(c)
		}
		req := c.Request()
		token, ok := bearerToken(req.Header.Get(echo.HeaderAuthorization))
		if !ok {
			_, token, ok = req.BasicAuth()
		}
		if !ok || subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.IngestToken)) != 1 {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Basic realm="oncetrace webhooks"`)
			return echo.NewHTTPError(http.StatusUnauthorized, "Authorization: this provider has no webhook secret, so the ingest token is required, "+
				"as \"Bearer <token>\" or as the password of Basic credentials in the webhook URL (https://oncetrace:<token>@host/api/v1/webhooks/...)")
		}
		return next(c)
	}
}

// handleWebhook is POST /api/v1/webhooks/{provider}: a provider's delivery,
// verified when the provider has a secret, read by its mapping, and
// committed as effects before the answer. A re-delivery is a duplicate.
func (s *Server) handleWebhook(c echo.Context) error {
	req := c.Request()
	name, err := pathParam(c, "provider")
	if err != nil {
		return err
	}
	mappings := s.webhookMappings()
	m, ok := mappings[name]
	if !ok {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("provider: no webhook mapping named %q; known: %s (serve --webhook-map adds more)",
			name, strings.Join(mappings.Names(), ", ")))
	}
	if mt, _, err := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType)); err != nil || mt != echo.MIMEApplicationJSON {
		return &ingest.RequestError{Status: http.StatusUnsupportedMediaType,
			Msg: fmt.Sprintf("Content-Type: %q is not supported; webhooks are application/json", req.Header.Get(echo.HeaderContentType))}
	}
	data, held, err := s.readBody(c) // within the decode budget (budget.go)
	if err != nil {
		return err
	}
	defer held.Release() // once the effects are committed
	// The mapping decodes the whole payload; the effects it yields are
	// kept until committed (at most twice the body).
	if err := held.Resize(req.Context(), int64(cap(data))+ingest.JSONDecodeEstimate(data, s.budget.Capacity())+2*int64(len(data))); err != nil {
		return err
	}
	if secret, signed := s.cfg.Webhooks.Secrets[name]; signed {
		replay, err := s.verifyWebhook(c, name, m, secret, data)
		if err != nil {
			return err
		}
		if replay.Token != "" {
			if err := s.claimWebhookToken(c, name, m, replay, data); err != nil {
				return err
			}
		}
	}
	res, err := m.Map(data)
	var fe *webhook.FieldError
	if errors.As(err, &fe) {
		return &ingest.RequestError{Status: http.StatusBadRequest, Msg: fe.Error()}
	} else if err != nil {
		return err
	}
	if len(res.Effects) > s.cfg.Limits.Events {
		return &ingest.RequestError{Status: http.StatusRequestEntityTooLarge,
			Msg: fmt.Sprintf("events: more than the limit of %d events in one request", s.cfg.Limits.Events)}
	}
	events := make([]trace.Event, 0, len(res.Effects))
	for _, e := range res.Effects {
		ev, err := feed.EffectEvent(webhookFeed, e.Effect, s.cfg.Limits)
		if err != nil {
			return &ingest.RequestError{Status: http.StatusBadRequest, Msg: payloadProblem(e, err)}
		}
		events = append(events, ev)
	}
	written, err := s.cfg.Writer.Write(req.Context(), events)
	if err != nil {
		return err
	}
	out := webhookResponse{Accepted: written.Accepted, Duplicates: written.Duplicates, Ignored: res.Ignored}
	if out.Ignored == nil {
		out.Ignored = map[string]int{}
	}
	return c.JSON(http.StatusOK, out)
}

// verifyWebhook refuses a delivery whose signature is missing, wrong or
// stale: 400 naming the header, or 401 for Basic credentials. Nothing of
// it is stored.
func (s *Server) verifyWebhook(c echo.Context, name string, m webhook.Mapping, secret string, data []byte) (webhook.Replay, error) {
	replay, err := m.Verify(webhook.Delivery{Body: data, Header: c.Request().Header}, secret, s.cfg.Now(), s.webhookTolerance())
	var se *webhook.SignatureError
	if !errors.As(err, &se) {
		return replay, err
	}
	s.cfg.Logger.Warn("webhook refused", "provider", name, "err", err)
	if se.Field == echo.HeaderAuthorization {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Basic realm="oncetrace webhooks"`)
		return replay, &ingest.RequestError{Status: http.StatusUnauthorized, Msg: se.Error()}
	}
	return replay, &ingest.RequestError{Status: http.StatusBadRequest, Msg: se.Error()}
}

// webhookTolerance is how old a signature may be; 0 for any age.
func (s *Server) webhookTolerance() time.Duration {
	switch tolerance := s.cfg.Webhooks.Tolerance; {
	case tolerance == 0:
		return DefaultWebhookTolerance
	case tolerance < 0:
		return 0
	default:
		return tolerance
	}
}

// claimWebhookToken refuses a one-time token already used on another body:
// a signature that signs only a token and a time (Mailgun's) pasted onto
// invented event data, 401 with nothing stored. The same token on the same
// body is the provider re-delivering what it already sent, maybe because
// the first answer was lost: it goes on, and the writer counts its effects
// as duplicates, so that the provider stops retrying.
func (s *Server) claimWebhookToken(c echo.Context, name string, m webhook.Mapping, replay webhook.Replay, data []byte) error {
	now := s.cfg.Now()
	// Remembered until the signature is too old to be accepted anyway.
	expires := now.Add(anyAgeTokenMemory)
	if tolerance := s.webhookTolerance(); tolerance > 0 {
		signed := replay.SignedAt
		if signed.IsZero() || signed.Before(now.Add(-tolerance)) {
			signed = now
		}
		expires = signed.Add(tolerance)
	}
	sum := sha256.Sum256(data)
	body := hex.EncodeToString(sum[:])
	limit := cmp.Or(s.cfg.Webhooks.MaxTokens, DefaultWebhookMaxTokens)
	first, err := s.cfg.DB.ClaimWebhookToken(c.Request().Context(),
		store.WebhookToken{Provider: m.Provider, Token: replay.Token, BodyHash: body, Expires: expires.Add(tokenClockSkew)}, now, limit)
	if errors.Is(err, store.ErrWebhookTokensFull) {
		s.cfg.Logger.Warn("webhook refused: the one-time tokens are full", "provider", name, "limit", limit)
		c.Response().Header().Set("Retry-After", webhookTokensRetryAfter)
		return &ingest.RequestError{Status: http.StatusServiceUnavailable, Msg: fmt.Sprintf(
			"%s: %d unexpired one-time tokens of signed webhooks are remembered, the limit of --webhook-max-tokens; "+
				"nothing was stored; retry after the Retry-After delay, when some have expired", replay.Field, limit)}
	}
	if err != nil {
		return err
	}
	if first != body {
		s.cfg.Logger.Warn("webhook refused: a one-time token used again on another body", "provider", name, "field", replay.Field)
		return &ingest.RequestError{Status: http.StatusUnauthorized, Msg: replay.Field +
			": this signed token was already used by a delivery with another body: a replayed signature; nothing was stored"}
	}
	return nil
}

// webhookTokensRetryAfter is the Retry-After of a delivery refused because
// the one-time tokens are full, in seconds: tokens expire within the
// tolerance window, so some will within a minute.
const webhookTokensRetryAfter = "60"

// payloadProblem names the payload's field in an effect's validation
// error: "effect_id: longer than ..." becomes "[2].sg_message_id
// (effect_id): longer than ...".
func payloadProblem(e webhook.Effect, err error) string {
	msg := err.Error()
	field, problem, ok := strings.Cut(msg, ": ")
	if at, known := e.Paths[field]; ok && known {
		return at + " (" + field + "): " + problem
	}
	return msg
}
