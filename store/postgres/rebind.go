package postgres

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The store's queries are written in the SQL the two engines share, with
// SQLite's ? placeholders; what differs is the engines' named operations
// (store.Engine), which each writes in its own SQL. rebind numbers the
// placeholders and refuses, by name, any SQLite form, rather than pass on
// a query that means something else or fails only when it runs. It
// translates nothing else. Its table tests (rebind_test.go) list both.
//
// It works on the query with its string literals masked and its comments
// removed (mask), so that nothing inside a literal or a comment is
// refused or numbered.

// refused are SQLite forms that PostgreSQL lacks or reads otherwise; the
// store writes the shared form instead (coalesce for ifnull, ...), or the
// engine's operation.
var refused = []struct {
	form *regexp.Regexp
	why  string
}{
	{regexp.MustCompile(`(?i)\b(ifnull|iif|glob|group_concat|datetime|julianday|strftime|printf|instr|randomblob|total|likelihood|unixepoch)\s*\(`), "a function only SQLite has"},
	{regexp.MustCompile(`(?i)\bjson_(each|extract|tree|group_array|group_object|object|array|array_length|type|valid|set|insert|replace|remove|patch|quote)\s*\(`), "one of SQLite's JSON functions (a list bound as one parameter is the engine's Engine.ListSQL or Engine.PairsSQL, which the store writes listParam and pairsParam)"},
	{regexp.MustCompile(`(?i)\b(GLOB|REGEXP)\b`), "an operator only SQLite has"},
	{regexp.MustCompile(`(?i)\bINSERT\s+OR\s+(IGNORE|REPLACE|ABORT|FAIL|ROLLBACK)\b|\bREPLACE\s+INTO\b`), "a conflict clause only SQLite has (write ON CONFLICT DO NOTHING, which both have)"},
	{regexp.MustCompile(`(?i)\bchar\s*\(`), "SQLite's char(N) (an entity key is Engine.EntityKeySQL)"},
	{regexp.MustCompile(`==`), "SQLite's == (write =)"},
	{regexp.MustCompile(`\?\d|(^|[^:]):[A-Za-z_]|@[A-Za-z_]|\$[A-Za-z_0-9]`), "a numbered or named parameter (write ?)"},
	{regexp.MustCompile("[`\"]"), "a quoted identifier"},
	{regexp.MustCompile(`;\s*\S`), "more than one statement"},
}

// rebind turns a query of the store into PostgreSQL's dialect, or says
// why it cannot.
func rebind(query string) (string, error) {
	q, literals, err := mask(query)
	if err != nil {
		return "", err
	}
	for _, r := range refused {
		if m := r.form.FindString(q); m != "" {
			return "", fmt.Errorf("postgres: rebind: %q is %s", strings.TrimSpace(m), r.why)
		}
	}
	return unmask(positional(q), literals), nil
}

// positional numbers the ? placeholders $1, $2, … of a masked query.
func positional(q string) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// mask replaces each string literal of query by '<its index>' in literals
// and each comment by a space, so that rebind sees only SQL.
func mask(query string) (string, []string, error) {
	var b strings.Builder
	var literals []string
	for i := 0; i < len(query); {
		switch {
		case query[i] == '\'':
			j := i + 1
			for {
				k := strings.IndexByte(query[j:], '\'')
				if k < 0 {
					return "", nil, errors.New("postgres: rebind: unterminated string literal")
				}
				j += k + 1
				if j < len(query) && query[j] == '\'' { // '' is a quote inside
					j++
					continue
				}
				break
			}
			b.WriteString("'" + strconv.Itoa(len(literals)) + "'")
			literals = append(literals, query[i:j])
			i = j
		case strings.HasPrefix(query[i:], "--"):
			k := strings.IndexByte(query[i:], '\n')
			if k < 0 {
				k = len(query) - i
			}
			b.WriteByte(' ')
			i += k
		case strings.HasPrefix(query[i:], "/*"):
			k := strings.Index(query[i+2:], "*/")
			if k < 0 {
				return "", nil, errors.New("postgres: rebind: unterminated comment")
			}
			b.WriteByte(' ')
			i += 2 + k + 2
		default:
			b.WriteByte(query[i])
			i++
		}
	}
	return b.String(), literals, nil
}

// unmask puts the literals mask took out back.
var maskedLiteral = regexp.MustCompile(`'(\d+)'`)

func unmask(q string, literals []string) string {
	return maskedLiteral.ReplaceAllStringFunc(q, func(m string) string {
		i, _ := strconv.Atoi(m[1 : len(m)-1])
		return literals[i]
	})
}
