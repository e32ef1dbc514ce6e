// Package smtpsink is the SMTP outbox feed: an SMTP server
// (github.com/emersion/go-smtp) that accepts every message an agent sends
// and records it as one effect of provider smtp — effect id its
// Message-ID, target its envelope recipients, key its Idempotency-Key
// header, trace context its traceparent header, fingerprint its
// recipients, subject and decoded content (feed.Mail) — committed before the
// server answers 250, so a message is never acknowledged and lost. It
// keeps the raw message for the UI, and reads one for showing
// (ReadMessage).
//
// A connection holds one of its slots only while it delivers mail: go-smtp's
// per-command timeout is brought forward to deadlines that commands making
// no progress (NOOP, RSET, ...) do not move (deadline.go).
//
// It relays nothing: no message leaves the machine. It does not render
// HTML or serve HTTP; the web package shows messages.
//
// It is a feed (package feed): it must not import the store or web. It keeps
// messages through a MessageStore, which cmd/oncetrace adapts to the
// database.
package smtpsink
