package store

import (
	"strings"

	"github.com/oncetrace/oncetrace/trace"
)

// EffectSearch is the outbox's search (docs/outbox.md), in Mailpit's
// shape: to: and message-id: are looked up in an index each
// (effects_target, effects_id), as key: is (EffectFilter.Key), so that they cost the same
// at any size; subject:, from: and plain words are read from the rows the
// page walks, at most MaxEffectScan of them a page, and the page's cursor
// continues the walk where it stopped.
type EffectSearch struct {
	To        string // the start of the target (recipient), ASCII letters folded
	MessageID string // the effect id, with or without a Message-ID's <>
	Subject   string // part of the subject the effect's summary names
	From      string // part of the envelope sender of a kept message
	Words     []string
}

// MaxEffectScan bounds the rows an outbox search reads for one page when
// it asks for what no index holds (subject:, from:, plain words).
const MaxEffectScan = 5000

// Scans reports whether the search filters rows as they are read.
func (s EffectSearch) Scans() bool {
	return s.Subject != "" || s.From != "" || len(s.Words) > 0
}

// indexed returns the conditions and arguments of the indexed parts.
func (s EffectSearch) indexed() (where []string, args []any) {
	if s.To != "" {
		// lower() folds ASCII letters only, in SQLite and under
		// PostgreSQL's "C" collation, as foldASCII does; the condition on
		// target states effects_target's, so that the partial index serves.
		to := foldASCII(s.To)
		where = append(where, "target != '' AND lower(target) >= ? AND lower(target) < ?")
		args = append(args, to, to+"\U0010FFFF")
	}
	if s.MessageID != "" {
		id := strings.TrimSuffix(strings.TrimPrefix(s.MessageID, "<"), ">")
		// A Message-ID is stored as sent, in its angle brackets; one
		// typed without them finds it too.
		where = append(where, "effect_id IN (?, ?)")
		args = append(args, id, "<"+id+">")
	}
	return where, args
}

// matches reports whether an effect read satisfies the parts no index
// holds; from is the envelope sender of its kept message, if any.
func (s EffectSearch) matches(e trace.Effect, from string) bool {
	if s.Subject != "" && !containsFolded(summarySubject(e.Summary), s.Subject) {
		return false
	}
	if s.From != "" && !containsFolded(from, s.From) {
		return false
	}
	for _, w := range s.Words {
		if !containsFolded(e.Target, w) && !containsFolded(summarySubject(e.Summary), w) && !containsFolded(e.ID, w) &&
			!containsFolded(e.IdempotencyKey, w) && !containsFolded(e.Provider, w) && !containsFolded(e.ExecutionID, w) &&
			!containsFolded(e.StepID, w) && !containsFolded(from, w) {
			return false
		}
	}
	return true
}

// summarySubject is the subject an email's summary names ("email to
// jordan@acme.dev, subject 'Your June invoice'", ingest/feed's
// mailSummary), or the whole summary of any other effect, which says what
// was asked in the same place.
func summarySubject(summary string) string {
	const mark = ", subject '"
	if i := strings.Index(summary, mark); i >= 0 {
		return strings.TrimSuffix(summary[i+len(mark):], "'")
	}
	return summary
}

func containsFolded(s, part string) bool {
	return strings.Contains(foldASCII(s), foldASCII(part))
}
