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
// (store.Engine). rebind numbers the placeholders, translates the one
// SQLite form the store still writes, its JSON list parameter (json_each(?)
// and json_extract(x, '$[N]')), and refuses, by name, any other SQLite
// form, rather than pass on a query that means something else or fails
// only when it runs. Its table tests (rebind_test.go) list both.
//
// It works on the query with its string literals masked and its comments
// removed (mask), so that nothing inside a literal or a comment is
// rewritten or numbered.

// refused are SQLite forms PostgreSQL has no translation for here; the
// store writes the shared form instead (coalesce for ifnull, ...).
var refused = []struct {
	form *regexp.Regexp
	why  string
}{
	{regexp.MustCompile(`(?i)\b(ifnull|iif|glob|group_concat|datetime|julianday|strftime|printf|instr|randomblob|total|likelihood|unixepoch)\s*\(`), "a function only SQLite has"},
	{regexp.MustCompile(`(?i)\b(GLOB|REGEXP)\b`), "an operator only SQLite has"},
	{regexp.MustCompile(`(?i)\bINSERT\s+OR\s+(IGNORE|REPLACE|ABORT|FAIL|ROLLBACK)\b|\bREPLACE\s+INTO\b`), "a conflict clause only SQLite has (write ON CONFLICT DO NOTHING, which both have)"},
	{regexp.MustCompile(`(?i)\bchar\s*\(`), "SQLite's char(N) (an entity key is Engine.EntityKeySQL)"},
	{regexp.MustCompile(`==`), "SQLite's == (write =)"},
	{regexp.MustCompile(`\?\d|(^|[^:]):[A-Za-z_]|@[A-Za-z_]|\$[A-Za-z_0-9]`), "a numbered or named parameter (write ?)"},
	{regexp.MustCompile("[`\"]"), "a quoted identifier"},
	{regexp.MustCompile(`;\s*\S`), "more than one statement"},
}

var (
	// json_each(?) over a JSON array the store binds as one parameter
	// (store/run.go, inList): its elements as text, in a column "value".
	// Its alias is optional; a keyword after it is no alias.
	jsonEach = regexp.MustCompile(`(?i)\bjson_each\(\?\)(\s+AS\s+[A-Za-z_][A-Za-z0-9_]*|\s+[A-Za-z_][A-Za-z0-9_]*)?`)
	// json_extract(x.value, '$[N]'): element N of a JSON array held as
	// text. The path is a masked literal (mask).
	jsonExtract = regexp.MustCompile(`(?i)\bjson_extract\(\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)\s*,\s*'(\d+)'\s*\)`)
	arrayPath   = regexp.MustCompile(`^'\$\[(\d+)\]'$`)
	// What is left of SQLite's JSON functions after those two.
	otherJSON = regexp.MustCompile(`(?i)\bjson_(each|extract|tree|group_array|group_object|object|array|array_length|type|valid|set|insert|replace|remove|patch|quote)\s*\(`)

	keywords = map[string]bool{"WHERE": true, "JOIN": true, "LEFT": true, "INNER": true, "CROSS": true, "ON": true, "UNION": true,
		"ORDER": true, "GROUP": true, "LIMIT": true, "EXCEPT": true, "INTERSECT": true, "HAVING": true, "USING": true, "NATURAL": true, "FULL": true, "RIGHT": true, "WINDOW": true, "OFFSET": true}
)

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
	if m := otherJSON.FindString(jsonExtract.ReplaceAllString(jsonEach.ReplaceAllString(q, ""), "")); m != "" {
		return "", fmt.Errorf("postgres: rebind: %q is a JSON function with no translation (json_each(?) and json_extract(x, '$[N]') have one)", m)
	}
	q = jsonEach.ReplaceAllStringFunc(q, func(m string) string {
		alias, rest := "json_each", ""
		if word := strings.Fields(jsonEach.FindStringSubmatch(m)[1]); len(word) > 0 {
			last := word[len(word)-1]
			if len(word) == 1 && keywords[strings.ToUpper(last)] {
				rest = " " + last // the clause after an unaliased json_each
			} else {
				alias = last
			}
		}
		return "json_array_elements_text(?::json) AS " + alias + "(value)" + rest
	})
	var extractErr error
	q = jsonExtract.ReplaceAllStringFunc(q, func(m string) string {
		sub := jsonExtract.FindStringSubmatch(m)
		i, _ := strconv.Atoi(sub[2])
		path := arrayPath.FindStringSubmatch(literals[i])
		if path == nil {
			extractErr = fmt.Errorf("postgres: rebind: json_extract path %s is not an array element '$[N]'", literals[i])
			return m
		}
		return "(" + sub[1] + "::json->>" + path[1] + ")"
	})
	if extractErr != nil {
		return "", extractErr
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
// and each comment by a space, so that the rewrites see only SQL.
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
