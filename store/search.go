package store

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/oncetrace/oncetrace/trace"
)

// Search finds executions by what on-call knows: an execution id, step id
// or idempotency key, an effect's target (the recipient) or id (the
// provider's message id), a label value, a tool or a worker. The words are
// looked up in search_terms, an inverted index from a term to the
// executions having it, which the writer fills as it writes rows.
//
// Terms are normalised the same way when stored and when searched: ASCII
// letters lowercased (as SQLite's lower() and LIKE do, so that the
// migration's back-fill, written in SQL, makes the same terms). A value is
// stored whole, and free text also from the start of each of its tokens, a
// token being a run of characters other than ASCII punctuation and spaces:
// jordan@acme.dev gives jordan@acme.dev, acme.dev and dev. A word is looked
// up as a prefix, so "acme", "acme.dev" and "jordan@acme" all find it, each
// with one index range. A label is also stored as key:value.

const (
	// maxTerm is the longest term stored, the longest id ingest takes: a
	// value's tail longer than this (a URL with a query, say) is stored as
	// the token it starts with.
	maxTerm = 256
	// minToken and maxToken bound the tokens a tail starts at: one
	// character is no word anybody searches for.
	minToken, maxToken = 2, 64
	// minPrefix is the shortest word matched as a prefix; a one-character
	// word must equal a term, so that "a" does not read a 26th of the index.
	minPrefix = 2
	// maxSearchWords bounds a search's words, each a lookup in the index;
	// a longer search is looked up as one phrase.
	maxSearchWords = 8
)

// foldASCII lowercases ASCII letters only, as SQLite's lower() does.
func foldASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// isTokenByte reports whether b belongs inside a token: an ASCII letter or
// digit, or any byte of a non-ASCII character.
func isTokenByte(b byte) bool {
	return b >= 0x80 || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
}

// tokenStarts returns the byte offset and length of each token of v.
func tokenStarts(v string) (starts, lengths []int) {
	for i := 0; i < len(v); {
		if !isTokenByte(v[i]) {
			i++
			continue
		}
		j := i
		for j < len(v) && isTokenByte(v[j]) {
			j++
		}
		starts, lengths = append(starts, i), append(lengths, j-i)
		i = j
	}
	return starts, lengths
}

// termSet collects an execution's terms.
type termSet map[string]bool

// addValue adds a value whole and from each of its tokens on.
func (ts termSet) addValue(v string) {
	if v == "" {
		return
	}
	v = foldASCII(v)
	ts.addWhole(v)
	starts, lengths := tokenStarts(v)
	for i, start := range starts {
		if lengths[i] < minToken || lengths[i] > maxToken {
			continue
		}
		if tail := v[start:]; len(tail) <= maxTerm {
			ts[tail] = true
		} else {
			ts[v[start:start+lengths[i]]] = true
		}
	}
}

// addWhole adds a value whole only.
func (ts termSet) addWhole(v string) {
	if v = foldASCII(v); v != "" && len(v) <= maxTerm {
		ts[v] = true
	}
}

// list returns the terms as one JSON array, for listParam.
func (ts termSet) list() string {
	out := make([]string, 0, len(ts))
	for t := range ts {
		out = append(out, t)
	}
	sort.Strings(out) // a fixed order keeps the index's write pattern stable
	return jsonList(out)
}

// Each entity's terms are recorded where its row is written, so that a
// commit probes only the terms of what it changed: an execution's when its
// row is put, an attempt's when its row is put, and effects' when the
// analysis saves them, the one moment an effect's executions are known
// whichever order their events arrived in (an effect joins its execution
// through a key or a trace, not only by naming it). A term stays when a
// later event changes the value (a stale hit, never a missed one) until the
// execution is pruned.

// Ids, keys, workers and providers are stored whole, found by their start
// (msg_6a0799); free text is stored from each token on too, found by any
// part (acme, acme.dev): effect targets, label values, tools and names.

func executionTerms(x trace.Execution) termSet {
	ts := termSet{}
	ts.addWhole(x.ID)
	ts.addValue(x.Name)
	ts.addWhole(x.IdempotencyKey)
	for k, v := range x.Labels {
		ts.addWhole(k + ":" + v)
		ts.addValue(v)
	}
	return ts
}

func attemptTerms(a trace.Attempt) termSet {
	ts := termSet{}
	ts.addWhole(a.StepID)
	ts.addValue(a.Tool)
	ts.addWhole(a.Worker)
	ts.addWhole(a.IdempotencyKey)
	return ts
}

func effectTerms(effects []trace.Effect) termSet {
	ts := termSet{}
	for _, f := range effects {
		ts.addValue(f.Target)
		ts.addWhole(f.ID)
		ts.addWhole(f.IdempotencyKey)
		ts.addWhole(f.Provider)
	}
	return ts
}

// indexTerms records terms of an execution in one statement. A term
// already there costs a primary-key probe and no write.
func (t *Tx) indexTerms(executionID string, ts termSet) error {
	if len(ts) == 0 {
		return nil
	}
	err := t.exec(`INSERT INTO search_terms (term, execution_id) SELECT value, ? FROM `+listParam+` AS list WHERE true ON CONFLICT DO NOTHING`, executionID, ts.list())
	if err != nil {
		return fmt.Errorf("store: index search terms of %s: %w", executionID, err)
	}
	return nil
}

// broadWord is how many index rows make a word broad: past it, reading
// every execution the word names and sorting them costs more than walking
// the executions newest first until a page of them matches. A variable so
// that tests can take both plans on a small database.
var broadWord = 2000

// searchClause returns the condition on executions.execution_id that q's
// words ask for: every word must begin a term of the execution, unless the
// whole text, spaces and all, begins one (an id may hold spaces), when it
// is looked up as one phrase. It counts each word's index rows (up to
// broadWord) first, to choose the plan: SQLite has no statistics to tell a
// rare word from a common one, and at a million events the wrong choice
// costs up to a hundred times the right one.
func searchClause(ctx context.Context, q querier, text string) (string, []any, error) {
	phrase := strings.TrimSpace(text)
	words := []string{phrase}
	if fields := strings.Fields(phrase); len(fields) > 1 && len(fields) <= maxSearchWords {
		words = append(words, fields...)
	}
	var counts []string
	var countArgs []any
	for _, w := range words {
		match, matchArgs := termMatch(foldASCII(w))
		counts = append(counts, `(SELECT count(*) FROM (SELECT 1 FROM search_terms WHERE `+match+` LIMIT `+strconv.Itoa(broadWord)+`) AS broad)`)
		countArgs = append(countArgs, matchArgs...)
	}
	n := make([]int, len(words))
	dest := make([]any, len(words))
	for i := range n {
		dest[i] = &n[i]
	}
	if err := q.QueryRowContext(ctx, `SELECT `+strings.Join(counts, ", "), countArgs...).Scan(dest...); err != nil {
		return "", nil, fmt.Errorf("store: search: %w", err)
	}
	if len(words) > 1 {
		if n[0] > 0 {
			words, n = words[:1], n[:1] // the phrase
		} else {
			words, n = words[1:], n[1:]
		}
	}
	rarest, fewest := 0, broadWord
	for i, c := range n {
		if c < fewest {
			rarest, fewest = i, c
		}
	}
	var conds []string
	var args []any
	for i, w := range words {
		match, matchArgs := termMatch(foldASCII(w))
		args = append(args, matchArgs...)
		if i == rarest && fewest < broadWord {
			// The rarest word drives: its executions, then sorted.
			conds = append(conds, `execution_id IN (SELECT execution_id FROM search_terms WHERE `+match+`)`)
			continue
		}
		// Any other is one seek in search_terms_execution for each
		// execution read, which walk newest first when every word is broad.
		conds = append(conds, `EXISTS (SELECT 1 FROM search_terms WHERE search_terms.execution_id = executions.execution_id AND `+match+`)`)
	}
	return strings.Join(conds, " AND "), args, nil
}

// termMatch matches term against a folded word. The prefix range's upper
// bound appends U+10FFFF, the last code point, so under byte order
// (SQLite's BINARY, PostgreSQL's "C") every term that begins with the word
// sorts below it but one that continues with U+10FFFF itself. Unlike a
// 0xff byte, the bound is valid UTF-8, which PostgreSQL requires.
func termMatch(word string) (string, []any) {
	if len(word) < minPrefix {
		return `term = ?`, []any{word}
	}
	return `term >= ? AND term < ?`, []any{word, word + "\U0010FFFF"}
}
