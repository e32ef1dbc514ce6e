// Package webhook reads providers' webhook deliveries as outbox effects:
// a built-in mapping for Stripe events, and a small generic JSON mapping
// (dotted field paths for the effect id, key, target, time, execution,
// trace context, and the fields whose values make the effect's
// fingerprint, with a summary template) in which the SendGrid, Postmark and Mailgun presets are
// written and users add their own. It also checks the providers'
// signatures.
//
// It is pure: a payload, its headers and a mapping give effects or an error
// naming the payload's field (or the signature's header). It serves no
// HTTP and stores nothing; web's handler does both.
//
// It is a feed (package feed): it must not import the store or web.
package webhook
