package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/oncetrace/oncetrace/ingest/feed"
)

// A mapping's "fingerprint" names the payload fields that say what was
// asked (a message's recipients and subject); "summary" says it in a line,
// a template in which {path} stands for a field's value. Fields the
// payload does not carry never make a fingerprint up: an effect whose
// payload lacks one of them has none (feed.WebhookFingerprint).

// summaryValueBytes bounds one field's value in a summary.
const summaryValueBytes = 80

// summaryTemplate is a parsed "summary": literal text and paths in turn.
type summaryTemplate struct {
	literals []string // one more than paths: the text around them
	paths    []path
}

// parseSummary reads "email to {event-data.recipient}, subject
// '{event-data.message.headers.subject}'". A '{' always opens a path,
// which a '}' closes.
func parseSummary(s string) (*summaryTemplate, error) {
	if s == "" {
		return nil, nil
	}
	t := &summaryTemplate{}
	rest := s
	for {
		before, after, found := strings.Cut(rest, "{")
		t.literals = append(t.literals, before)
		if !found {
			break
		}
		inside, next, closed := strings.Cut(after, "}")
		if !closed {
			return nil, fmt.Errorf("%q: a '{' without its '}'", s)
		}
		p, err := parsePath(inside)
		if err != nil {
			return nil, fmt.Errorf("{%s}: %w", inside, err)
		}
		t.paths = append(t.paths, p)
		rest = next
	}
	if len(t.paths) == 0 {
		return nil, errors.New("name at least one field as {path}, e.g. \"email to {recipient}\"")
	}
	return t, nil
}

// render fills the template from one event; a field it lacks reads "?".
func (t *summaryTemplate) render(it item) string {
	var b strings.Builder
	for i, lit := range t.literals {
		b.WriteString(lit)
		if i < len(t.paths) {
			b.WriteString(summaryValue(t.paths[i].lookup(it.v)))
		}
	}
	return feed.ClipSummary(b.String())
}

// summaryValue is a field's value in a summary: text as it is, anything
// else as compact JSON, clipped.
func summaryValue(v any, present bool) string {
	if !present {
		return "?"
	}
	s, ok := scalar(v)
	if !ok {
		raw, _ := json.Marshal(v)
		s = string(raw)
	}
	return feed.OneLine(s, summaryValueBytes)
}

// readFingerprint reads an event's fingerprint and summary: the fingerprint of
// the values at every path of f.fingerprint, when the event carries them
// all; the summary from f.summary, or else path=value for each of them.
func (f *fields) readFingerprint(it item) (fingerprint, summary string) {
	values := map[string]any{}
	var parts []string
	for _, p := range f.fingerprint {
		v, ok := p.lookup(it.v)
		if !ok {
			values = nil
			break
		}
		values[p.text] = v
		parts = append(parts, p.text+"="+summaryValue(v, true))
	}
	if len(values) > 0 {
		fingerprint, _ = feed.WebhookFingerprint(values) // none when nested too deep
	}
	switch {
	case f.summary != nil:
		summary = f.summary.render(it)
	case fingerprint != "":
		summary = feed.ClipSummary(strings.Join(parts, " "))
	}
	return fingerprint, summary
}
