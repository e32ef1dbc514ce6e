package web

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/labstack/echo/v4"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/trace"
)

// effectQuery is what GET /api/v1/effects and the outbox page accept.
type effectQuery struct {
	Q           string `query:"q"`
	Provider    string `query:"provider"`
	State       string `query:"state"`
	ExecutionID string `query:"execution_id"`
	Key         string `query:"idempotency_key"`
	Cursor      string `query:"cursor"`
	Limit       string `query:"limit"`
	// Sort names the outbox's one order, severity: duplicates, then
	// orphans, then matched (effects_outbox). It is accepted so that a
	// link saying ?sort=severity, as the executions list takes, works here.
	Sort string `query:"sort"`
}

// effectListParams and findingListParams are the parameters the outbox
// (page and JSON) and the findings list take.
var (
	effectListParams  = queryParamNames(effectQuery{})
	findingListParams = queryParamNames(findingQuery{})
)

func (s *Server) effectFilter(c echo.Context) (store.EffectFilter, error) {
	if unknown := unknownParams(c, effectListParams); len(unknown) > 0 {
		msg := unknownFilterMessage("the outbox", unknown, effectListParams)
		if slices.Contains(unknown, "target") || slices.Contains(unknown, "to") {
			msg += "; search by recipient with q=to:ADDRESS"
		}
		return store.EffectFilter{}, badQuery(msg)
	}
	var q effectQuery
	if err := bindQuery(c, &q); err != nil {
		return store.EffectFilter{}, err
	}
	return q.filter()
}

func (q effectQuery) filter() (store.EffectFilter, error) {
	f := store.EffectFilter{Provider: q.Provider, ExecutionID: q.ExecutionID, Key: q.Key, Cursor: q.Cursor}
	if q.Sort != "" && q.Sort != "severity" {
		return f, badQuery("sort: the outbox has one order, severity (duplicates, orphans, then matched)")
	}
	switch st := trace.MatchState(q.State); st {
	case "", trace.MatchMatched, trace.MatchOrphan, trace.MatchDuplicate:
		f.State = st
	default:
		return f, badQuery("state: must be matched, orphan or duplicate")
	}
	search, key, err := parseOutboxSearch(q.Q)
	if err != nil {
		return f, err
	}
	if key != "" && f.Key != "" && key != f.Key {
		return f, badQuery("q: key: and idempotency_key name two different keys")
	}
	if key != "" {
		f.Key = key
	}
	f.Search = search
	f.Limit, err = parseLimit(q.Limit)
	return f, err
}

// The outbox's search (docs/outbox.md) is Mailpit's: words, each a
// field:value or a plain word, a value in double quotes when it holds
// spaces.
const (
	maxOutboxSearch      = 512 // bytes of q
	maxOutboxSearchTerms = 8
)

// parseOutboxSearch parses q into the search and the key it names.
func parseOutboxSearch(q string) (store.EffectSearch, string, error) {
	var s store.EffectSearch
	if len(q) > maxOutboxSearch {
		return s, "", badQuery("q: must be at most " + strconv.Itoa(maxOutboxSearch) + " bytes")
	}
	terms, err := searchTerms(q)
	if err != nil {
		return s, "", err
	}
	if len(terms) > maxOutboxSearchTerms {
		return s, "", badQuery("q: must have at most " + strconv.Itoa(maxOutboxSearchTerms) + " terms")
	}
	var key string
	set := map[string]*string{"to": &s.To, "from": &s.From, "subject": &s.Subject, "message-id": &s.MessageID, "key": &key}
	for _, t := range terms {
		field, value, ok := strings.Cut(t, ":")
		dest := set[strings.ToLower(field)]
		if !ok || dest == nil {
			s.Words = append(s.Words, t) // Mailpit's: an unknown field: is a word
			continue
		}
		field = strings.ToLower(field)
		switch {
		case value == "":
			return s, "", badQuery("q: " + field + ": needs a value, as in " + field + ":jordan@acme.dev")
		case *dest != "":
			return s, "", badQuery("q: " + field + ": may be given once")
		}
		*dest = value
	}
	return s, key, nil
}

// searchTerms splits q at spaces outside double quotes and drops the
// quotes: subject:"June invoice" is one term.
func searchTerms(q string) ([]string, error) {
	var terms []string
	var b strings.Builder
	quoted, started := false, false
	for _, r := range q {
		switch {
		case r == '"':
			quoted, started = !quoted, true
		case !quoted && unicode.IsSpace(r):
			if started {
				terms = append(terms, b.String())
			}
			b.Reset()
			started = false
		default:
			b.WriteRune(r)
			started = true
		}
	}
	if quoted {
		return nil, badQuery("q: a double quote is not closed")
	}
	if started {
		terms = append(terms, b.String())
	}
	var out []string
	for _, t := range terms {
		if t != "" {
			out = append(out, t)
		}
	}
	return out, nil
}

type effectListResponse struct {
	Effects []store.EffectRow `json:"effects"`
	Next    string            `json:"next"`
}

// handleEffectList is GET /api/v1/effects: the outbox, duplicates first.
func (s *Server) handleEffectList(c echo.Context) error {
	f, err := s.effectFilter(c)
	if err != nil {
		return err
	}
	rows, next, err := s.cfg.DB.Effects(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, effectListResponse{Effects: rows, Next: next})
}

type findingQuery struct {
	ExecutionID string `query:"execution_id"`
	Rule        string `query:"rule"`
	Severity    string `query:"severity"`
	Limit       string `query:"limit"`
	Cursor      string `query:"cursor"`
}

func (q findingQuery) filter() (store.FindingFilter, error) {
	f := store.FindingFilter{ExecutionID: q.ExecutionID, Rule: trace.Rule(q.Rule), Severity: trace.Severity(q.Severity), Cursor: q.Cursor}
	if _, known := trace.Severities[f.Rule]; q.Rule != "" && !known {
		return f, badQuery("rule: unknown rule " + q.Rule)
	}
	if q.Severity != "" && f.Severity != trace.SeverityCritical && f.Severity != trace.SeverityWarning {
		return f, badQuery("severity: must be critical or warning")
	}
	var err error
	f.Limit, err = parseLimit(q.Limit)
	return f, err
}

// findingListResponse is a page of findings: Critical counts the critical
// ones in it (they come first), Next is the cursor of the next page.
type findingListResponse struct {
	Findings []trace.Finding `json:"findings"`
	Critical int             `json:"critical"`
	Next     string          `json:"next,omitempty"`
}

// handleFindingList is GET /api/v1/findings: the audit across executions.
func (s *Server) handleFindingList(c echo.Context) error {
	if err := rejectUnknownParams(c, "the findings list", findingListParams); err != nil {
		return err
	}
	var q findingQuery
	if err := bindQuery(c, &q); err != nil {
		return err
	}
	f, err := q.filter()
	if err != nil {
		return err
	}
	findings, next, err := s.cfg.DB.FindingsPage(c.Request().Context(), f)
	if err != nil {
		return err // a bad cursor is a 400 (server.go)
	}
	return c.JSON(http.StatusOK, findingListResponse{Findings: findings, Critical: trace.CriticalCount(findings), Next: next})
}
