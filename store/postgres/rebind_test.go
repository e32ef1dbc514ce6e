package postgres

import (
	"strings"
	"testing"
)

// TestRebind pins what rebind does to each shape of query the store may
// write. The store's suite prepares the real queries on PostgreSQL
// (store/queries_test.go); this one holds the shapes it does not use yet,
// several of which the regex rewriter this replaced mangled (noted).
func TestRebind(t *testing.T) {
	tests := []struct {
		name, query, want string
	}{
		{"placeholders numbered in order", `SELECT a FROM t WHERE b = ? AND c = ?`, `SELECT a FROM t WHERE b = $1 AND c = $2`},
		{"? inside a literal is text", `SELECT a FROM t WHERE a = 'what?' AND b = ?`, `SELECT a FROM t WHERE a = 'what?' AND b = $1`},
		{"doubled quote inside a literal", `SELECT a FROM t WHERE b = 'it''s ?' AND c = ?`, `SELECT a FROM t WHERE b = 'it''s ?' AND c = $1`},
		// Mangled before: the apostrophe opened a literal, and ? stayed.
		{"line comment with an apostrophe", "SELECT a FROM t -- don't\nWHERE b = ?", "SELECT a FROM t  \nWHERE b = $1"},
		// Mangled before: the comment's ? took $1.
		{"block comment with a ?", `SELECT a FROM t /* why? */ WHERE b = ?`, `SELECT a FROM t   WHERE b = $1`},
		{"cast after a placeholder", `SELECT ?::json`, `SELECT $1::json`},
		// Mangled before: varchar(0) became varchr(31).
		{"varchar is no char", `SELECT CAST(a AS varchar(0)) FROM t`, `SELECT CAST(a AS varchar(0)) FROM t`},
		{"json_each without alias", `SELECT value FROM json_each(?)`, `SELECT value FROM json_array_elements_text($1::json) AS json_each(value)`},
		{"json_each AS alias", `SELECT ref.value FROM json_each(?) AS ref`, `SELECT ref.value FROM json_array_elements_text($1::json) AS ref(value)`},
		// Mangled before: AS j(value)2.
		{"json_each alias with a digit", `SELECT j2.value FROM json_each(?) j2`, `SELECT j2.value FROM json_array_elements_text($1::json) AS j2(value)`},
		// Mangled before: AS where(value), the WHERE gone.
		{"json_each then a lowercase keyword", `SELECT value FROM json_each(?) where value = ?`, `SELECT value FROM json_array_elements_text($1::json) AS json_each(value) where value = $2`},
		{"json_extract of an array element", `SELECT json_extract(j.value, '$[1]') FROM json_each(?) j`, `SELECT (j.value::json->>1) FROM json_array_elements_text($1::json) AS j(value)`},
		// Mangled before: rewritten inside the literal, changing the data.
		{"char(0) inside a literal is text", `SELECT a FROM t WHERE b = 'char(0)' AND c = ?`, `SELECT a FROM t WHERE b = 'char(0)' AND c = $1`},
		{"a trailing semicolon", "SELECT a FROM t WHERE b = ?;\n", "SELECT a FROM t WHERE b = $1;\n"},
		{"ON CONFLICT DO NOTHING after a SELECT", `INSERT INTO t (a) SELECT value FROM json_each(?) WHERE true ON CONFLICT DO NOTHING`, `INSERT INTO t (a) SELECT value FROM json_array_elements_text($1::json) AS json_each(value) WHERE true ON CONFLICT DO NOTHING`},
		{"ON CONFLICT is the shared upsert", `INSERT INTO t (a) VALUES (?) ON CONFLICT (a) DO NOTHING`, `INSERT INTO t (a) VALUES ($1) ON CONFLICT (a) DO NOTHING`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rebind(tt.query)
			if err != nil {
				t.Fatalf("got error %v, want %q", err, tt.want)
			}
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestRebindRefuses pins what rebind refuses, with the reason it gives:
// each would have reached PostgreSQL as a query that fails, or worse,
// means something else.
func TestRebindRefuses(t *testing.T) {
	tests := []struct {
		name, query, reason string
	}{
		{"ifnull", `SELECT ifnull(a, 0) FROM t`, "only SQLite has"},
		{"GLOB", `SELECT a FROM t WHERE b GLOB ?`, "only SQLite has"},
		{"group_concat", `SELECT group_concat(a) FROM t`, "only SQLite has"},
		{"datetime", `SELECT datetime('now')`, "only SQLite has"},
		// The store writes ON CONFLICT DO NOTHING, which both engines have.
		// Mangled before: ON CONFLICT after a RETURNING, not rewritten in
		// lower case or after a WITH.
		{"INSERT OR IGNORE", `INSERT OR IGNORE INTO t (a) VALUES (?)`, "conflict clause"},
		{"INSERT OR IGNORE RETURNING", `INSERT OR IGNORE INTO t (a) VALUES (?) RETURNING id`, "conflict clause"},
		{"insert or ignore in lower case", `insert or ignore into t (a) values (?)`, "conflict clause"},
		{"INSERT OR IGNORE after WITH", `WITH x AS (SELECT 1) INSERT OR IGNORE INTO t (a) SELECT ? FROM x`, "conflict clause"},
		{"INSERT OR REPLACE", `INSERT OR REPLACE INTO t (a) VALUES (?)`, "conflict clause"},
		{"REPLACE INTO", `REPLACE INTO t (a) VALUES (?)`, "conflict clause"},
		// Mangled before: ?1 became $11.
		{"numbered parameter", `SELECT a FROM t WHERE b = ?1`, "numbered or named parameter"},
		{"named parameter", `SELECT a FROM t WHERE b = :b`, "numbered or named parameter"},
		{"PostgreSQL's own parameter", `SELECT a FROM t WHERE b = $1`, "numbered or named parameter"},
		{"==", `SELECT a FROM t WHERE b == ?`, "=="},
		{"double-quoted identifier", `SELECT "a?" FROM t`, "quoted identifier"},
		{"backquoted identifier", "SELECT `a` FROM t", "quoted identifier"},
		{"two statements", `DELETE FROM t; DELETE FROM u`, "more than one statement"},
		// Passed on before, to fail when it ran.
		{"json_extract of an object path", `SELECT json_extract(value, '$.name') FROM json_each(?)`, "not an array element"},
		{"json_each over a column", `SELECT value FROM t, json_each(t.list)`, "JSON function"},
		{"json_array_length", `SELECT json_array_length(?)`, "JSON function"},
		// An entity key is the engine's EntityKeySQL. Mangled before:
		// char(0) inside a literal rewritten, varchar(0) became varchr(31).
		{"char(0)", `SELECT 'e' || char(0) || ? FROM t`, "char(N)"},
		{"char(N)", `SELECT CAST(a AS varchar(10)), char(10) FROM t`, "char(N)"},
		{"unterminated literal", `SELECT 'a FROM t`, "unterminated string"},
		{"unterminated comment", `SELECT a /* FROM t`, "unterminated comment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rebind(tt.query)
			if err == nil {
				t.Fatalf("got %q, want an error naming %q", got, tt.reason)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("got error %q, want one naming %q", err, tt.reason)
			}
		})
	}
}
