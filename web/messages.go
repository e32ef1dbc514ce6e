package web

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/ingest/feed/smtpsink"
	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
	"github.com/oncetrace/oncetrace/views"
)

// messagePagePolicy is the page's usual policy, which also lets it frame
// its own origin: the message's HTML part, served on its own URL.
const messagePagePolicy = contentSecurityPolicy + "; frame-src 'self'"

// messageHTMLPolicy is the policy of a message's HTML part. A mail's HTML
// is written by whoever sent it, so it gets a sandbox (an opaque origin:
// no script, no form, no navigation of the page around it, no popup),
// inline styles and data: images only (nothing fetched from the network,
// no tracking pixel), and it may be framed by oncetrace's pages only. The
// frame's sandbox attribute says the same; each holds without the other.
const messageHTMLPolicy = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; " +
	"form-action 'none'; base-uri 'none'; frame-ancestors 'self'"

// messageRawPolicy is the policy of a message served as text: nothing at all.
const messageRawPolicy = "sandbox; default-src 'none'; frame-ancestors 'none'"

type messageQuery struct {
	Provider string `query:"provider"`
	ID       string `query:"id"`
}

// loadMessage reads the message named by the query's provider and id.
func (s *Server) loadMessage(c echo.Context) (store.Message, error) {
	var q messageQuery
	if err := bindQuery(c, &q); err != nil {
		return store.Message{}, err
	}
	if q.Provider == "" || q.ID == "" {
		return store.Message{}, badQuery("provider and id: both are required")
	}
	m, err := s.cfg.DB.Message(c.Request().Context(), q.Provider, q.ID)
	if errors.Is(err, store.ErrNotFound) {
		return m, echo.NewHTTPError(http.StatusNotFound, "message: none is kept for "+q.Provider+" "+q.ID)
	}
	return m, err
}

// handleMessagePage is GET /outbox/messages?provider=P&id=E: the message
// kept for an effect, its HTML part in a sandboxed frame.
func (s *Server) handleMessagePage(c echo.Context) error {
	m, err := s.loadMessage(c)
	if err != nil {
		return err
	}
	read := smtpsink.ReadMessage(m.Raw)
	v := views.MessageView{
		Provider: m.Provider, EffectID: m.EffectID, From: m.From, Recipients: m.Recipients,
		ReceivedAt: m.ReceivedAt, LastReceivedAt: m.LastReceivedAt, Received: m.Received, Size: len(m.Raw),
		Text: read.Text, HasText: read.HasText, RawURL: views.MessageRawURL(m.Provider, m.EffectID),
		Problems: read.Problems, Effect: m.Effect, State: m.State, EffectURL: views.OutboxURL(m.Provider),
		PartsShown: smtpsink.MaxParts, PartsNotShown: read.PartsNotShown,
	}
	if m.Effect.ExecutionID != "" {
		v.EffectURL = views.EffectURL(m.Effect.ExecutionID, m.Provider, m.EffectID)
	}
	if read.HasHTML {
		v.HTMLURL = views.MessageHTMLURL(m.Provider, m.EffectID)
	}
	for _, name := range []string{"From", "To", "Cc", "Subject", "Date"} {
		if value := read.Get(name); value != "" {
			v.Summary = append(v.Summary, views.HeaderField{Name: name, Value: value})
		}
	}
	for _, f := range read.Header {
		v.Header = append(v.Header, views.HeaderField{Name: f.Name, Value: f.Value})
	}
	for _, a := range read.Attachments {
		v.Attachments = append(v.Attachments, views.MessageAttachment{Name: a.Name, ContentType: a.ContentType, Size: a.Size})
	}
	c.Response().Header().Set("Content-Security-Policy", messagePagePolicy)
	return render(c, http.StatusOK, views.MessagePage(v))
}

// handleMessageHTML is GET /outbox/messages/html?provider=P&id=E: the
// message's HTML part, as the sender wrote it (decoded to UTF-8), under
// messageHTMLPolicy. It is only ever shown in the message page's frame.
func (s *Server) handleMessageHTML(c echo.Context) error {
	m, err := s.loadMessage(c)
	if err != nil {
		return err
	}
	read := smtpsink.ReadMessage(m.Raw)
	if !read.HasHTML {
		return echo.NewHTTPError(http.StatusNotFound, "message: it has no HTML part")
	}
	h := c.Response().Header()
	h.Set("Content-Security-Policy", messageHTMLPolicy)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	return c.HTMLBlob(http.StatusOK, []byte(read.HTML))
}

// handleMessageRaw is GET /outbox/messages/raw?provider=P&id=E: the
// message as received, as plain text.
func (s *Server) handleMessageRaw(c echo.Context) error {
	m, err := s.loadMessage(c)
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("Content-Security-Policy", messageRawPolicy)
	h.Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, "text/plain; charset=utf-8", m.Raw)
}

type messageHeaderField struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type messageAttachment struct {
	Name        string `json:"name,omitempty"`
	ContentType string `json:"content_type"`
	Size        int    `json:"size"`
}

// messageResponse is the message page's JSON twin. Text and HTML are null
// when the message has no such part; the raw message is at
// /outbox/messages/raw.
type messageResponse struct {
	Provider       string               `json:"provider"`
	EffectID       string               `json:"effect_id"`
	MailFrom       string               `json:"mail_from"`
	Recipients     []string             `json:"recipients"`
	ReceivedAt     time.Time            `json:"received_at"`
	LastReceivedAt time.Time            `json:"last_received_at"`
	Received       int                  `json:"received"`
	Size           int                  `json:"size"`
	Header         []messageHeaderField `json:"header"`
	Text           *string              `json:"text"`
	HTML           *string              `json:"html"`
	Attachments    []messageAttachment  `json:"attachments"`
	Problems       []string             `json:"problems,omitempty"`
	// PartsNotShown counts the parts past the first smtpsink.MaxParts,
	// which are not read: the raw message has them.
	PartsNotShown int              `json:"parts_not_shown,omitempty"`
	Effect        *trace.Effect    `json:"effect,omitempty"`
	State         trace.MatchState `json:"state,omitempty"`
}

// handleMessageShow is GET /api/v1/messages?provider=P&id=E, the message
// page's JSON twin.
func (s *Server) handleMessageShow(c echo.Context) error {
	m, err := s.loadMessage(c)
	if err != nil {
		return err
	}
	read := smtpsink.ReadMessage(m.Raw)
	r := messageResponse{Provider: m.Provider, EffectID: m.EffectID, MailFrom: m.From, Recipients: m.Recipients,
		ReceivedAt: m.ReceivedAt, LastReceivedAt: m.LastReceivedAt, Received: m.Received, Size: len(m.Raw),
		Header: []messageHeaderField{}, Attachments: []messageAttachment{}, Problems: read.Problems, PartsNotShown: read.PartsNotShown, State: m.State}
	if r.Recipients == nil {
		r.Recipients = []string{}
	}
	if m.Effect.Provider != "" {
		r.Effect = &m.Effect
	}
	if read.HasText {
		r.Text = &read.Text
	}
	if read.HasHTML {
		r.HTML = &read.HTML
	}
	for _, f := range read.Header {
		r.Header = append(r.Header, messageHeaderField{Name: f.Name, Value: f.Value})
	}
	for _, a := range read.Attachments {
		r.Attachments = append(r.Attachments, messageAttachment{Name: a.Name, ContentType: a.ContentType, Size: a.Size})
	}
	return c.JSON(http.StatusOK, r)
}

// messageURLs links each effect that has a message kept to its page: one
// query for all of them.
func (s *Server) messageURLs(ctx context.Context, refs []trace.EffectRef) (map[trace.EffectRef]string, error) {
	kept, err := s.cfg.DB.MessagesKept(ctx, refs)
	if err != nil {
		return nil, err
	}
	urls := make(map[trace.EffectRef]string, len(kept))
	for r := range kept {
		urls[r] = views.MessageURL(r.Provider, r.ID)
	}
	return urls, nil
}
