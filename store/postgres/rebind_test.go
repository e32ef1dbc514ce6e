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
		// Mangled before: rewritten inside the literal, changing the data.
		{"char(0) inside a literal is text", `SELECT a FROM t WHERE b = 'char(0)' AND c = ?`, `SELECT a FROM t WHERE b = 'char(0)' AND c = $1`},
		{"json_each inside a literal is text", `SELECT a FROM t WHERE b = 'json_each(?)' AND c = ?`, `SELECT a FROM t WHERE b = 'json_each(?)' AND c = $1`},
		{"a trailing semicolon", "SELECT a FROM t WHERE b = ?;\n", "SELECT a FROM t WHERE b = $1;\n"},
		{"ON CONFLICT DO NOTHING after a SELECT", `INSERT INTO t (a) SELECT value FROM t2 WHERE b = ? ON CONFLICT DO NOTHING`, `INSERT INTO t (a) SELECT value FROM t2 WHERE b = $1 ON CONFLICT DO NOTHING`},
		// The JSON list parameter is the engine's own SQL (ListSQL,
		// PairsSQL), which rebind only numbers.
		{"PostgreSQL's JSON functions", `SELECT a FROM t WHERE b IN (SELECT value FROM json_array_elements_text(?::json) AS json_list(value)) AND c = ?`,
			`SELECT a FROM t WHERE b IN (SELECT value FROM json_array_elements_text($1::json) AS json_list(value)) AND c = $2`},
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

// TestListParameterRebinds checks the engine's JSON list parameter
// (ListSQL, PairsSQL): one placeholder each, which rebind numbers and
// leaves the rest as the engine wrote it.
func TestListParameterRebinds(t *testing.T) {
	e := &engine{}
	for _, op := range []string{e.ListSQL(), e.PairsSQL()} {
		if n := strings.Count(op, "?"); n != 1 {
			t.Errorf("%s: %d placeholders, want 1", op, n)
		}
		got, err := rebind(op)
		if want := strings.Replace(op, "?", "$1", 1); err != nil || got != want {
			t.Errorf("rebind(%s) = %q, %v; want %q", op, got, err, want)
		}
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
		// The JSON list parameter is Engine.ListSQL or Engine.PairsSQL,
		// which each engine writes; translated here before, by patterns.
		{"json_each", `SELECT value FROM json_each(?)`, "Engine.ListSQL"},
		{"json_each with an alias", `SELECT j.value FROM json_each(?) AS j`, "Engine.ListSQL"},
		{"json_each in an IN list", `SELECT a FROM t WHERE b IN (SELECT value FROM json_each(?))`, "Engine.ListSQL"},
		{"json_extract of an array element", `SELECT json_extract(value, '$[1]') FROM t`, "Engine.PairsSQL"},
		{"json_extract of an object path", `SELECT json_extract(value, '$.name') FROM t`, "SQLite's JSON functions"},
		{"json_each over a column", `SELECT value FROM t, json_each(t.list)`, "SQLite's JSON functions"},
		{"json_array_length", `SELECT json_array_length(?)`, "SQLite's JSON functions"},
		{"json_each in lower case after a literal", `SELECT 'json_each(?)', value FROM JSON_EACH (?)`, "SQLite's JSON functions"},
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
