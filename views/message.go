package views

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/oncetrace/oncetrace/trace"
)

// MessageView is the page of one mail message an outbox feed kept (the
// SMTP sink): the envelope, the header, the text part, the HTML part in a
// sandboxed frame, and the attachments by name and size.
type MessageView struct {
	Provider, EffectID string
	From               string   // envelope sender
	Recipients         []string // envelope recipients
	ReceivedAt         time.Time
	LastReceivedAt     time.Time
	Received           int // copies received under this effect id
	Size               int // bytes of the kept copy

	Summary []HeaderField // From, To, Cc, Subject, Date, when present
	Header  []HeaderField // every field, in order
	Text    string
	HasText bool
	// HTMLURL serves the HTML part on its own, under a policy that runs
	// nothing; "" when the message has none.
	HTMLURL     string
	RawURL      string
	Attachments []MessageAttachment
	// PartsShown and PartsNotShown: a message of more parts than are read
	// for showing (smtpsink.MaxParts) lists the first PartsShown; the raw
	// message has the PartsNotShown others.
	PartsShown, PartsNotShown int
	// Problems are what could not be read faithfully.
	Problems []string

	// The effect the message is.
	Effect    trace.Effect
	State     trace.MatchState
	EffectURL string // its detail, or the outbox when it belongs to no execution
}

// HeaderField is one header field of a message, decoded for reading.
type HeaderField struct {
	Name, Value string
}

// MessageAttachment is a part of a message shown by name and size only.
type MessageAttachment struct {
	Name, ContentType string
	Size              int
}

// MessageURL is the page of the message kept for an effect.
func MessageURL(provider, id string) string { return "/outbox/messages?" + messageQuery(provider, id) }

// MessageHTMLURL serves the HTML part of a message, for its frame.
func MessageHTMLURL(provider, id string) string {
	return "/outbox/messages/html?" + messageQuery(provider, id)
}

// MessageRawURL serves a message as it was received.
func MessageRawURL(provider, id string) string {
	return "/outbox/messages/raw?" + messageQuery(provider, id)
}

func messageQuery(provider, id string) string {
	return url.Values{"provider": {provider}, "id": {id}}.Encode()
}

// Bytes is a size as people read it: 512 B, 12.3 KiB, 10 MiB.
func Bytes(n int) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<10))) + " KiB"
	}
	return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<20))) + " MiB"
}

// subject is the message's subject, or says it has none.
func (v MessageView) subject() string {
	for _, f := range v.Summary {
		if f.Name == "Subject" && strings.TrimSpace(f.Value) != "" {
			return f.Value
		}
	}
	return "(no subject)"
}

func joinComma(ss []string) string {
	if len(ss) == 0 {
		return "—"
	}
	return strings.Join(ss, ", ")
}
