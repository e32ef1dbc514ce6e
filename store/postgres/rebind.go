package postgres

import (
	"regexp"
	"strconv"
	"strings"
)

// The store's queries are written in SQLite's dialect, within what the two
// engines share; these are the few places they differ.
var (
	// json_each(?) over a JSON array the store binds as one parameter
	// (store/run.go, inList): its elements as text, in a column "value".
	jsonEach = regexp.MustCompile(`json_each\(\?\)(?:\s+(?:AS\s+)?([a-z_]+))?`)
	// json_extract(x.value, '$[N]'): element N of a JSON array held as text.
	jsonExtract    = regexp.MustCompile(`json_extract\(([a-z_]+(?:\.[a-z_]+)?), '\$\[(\d+)\]'\)`)
	insertOrIgnore = regexp.MustCompile(`(?s)^(\s*)INSERT OR IGNORE INTO(.*?)(;?\s*)$`)
)

// Rebind turns a query of the store into PostgreSQL's dialect.
func rebind(query string) string {
	q := jsonEach.ReplaceAllStringFunc(query, func(m string) string {
		alias := jsonEach.FindStringSubmatch(m)[1]
		if alias == "" {
			alias = "json_each"
		}
		return "json_array_elements_text(?::json) AS " + alias + "(value)"
	})
	q = jsonExtract.ReplaceAllString(q, "($1::json->>$2)")
	q = insertOrIgnore.ReplaceAllString(q, "${1}INSERT INTO${2} ON CONFLICT DO NOTHING${3}")
	// Entities separate their parts with NUL, which PostgreSQL's text
	// cannot hold: EntityKey stores the unit separator instead.
	q = strings.ReplaceAll(q, "char(0)", "chr(31)")
	return positional(q)
}

// positional numbers the ? placeholders $1, $2, … outside quoted text.
func positional(q string) string {
	var b strings.Builder
	n := 0
	quoted := false
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'':
			quoted = !quoted
		case c == '?' && !quoted:
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
