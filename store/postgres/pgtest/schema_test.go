package pgtest_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSchemaMatchesSQLite applies store/postgres/migrations to a fresh
// PostgreSQL database and SQLite's migrations to a fresh file, and compares
// what they make: the same tables, with the same columns in the same order
// (so that SELECT * reads alike), types that carry the same values, the
// same primary keys and the same indexes; every PostgreSQL text column
// collates as C.
func TestSchemaMatchesSQLite(t *testing.T) {
	ctx := context.Background()
	pg, err := sql.Open("pgx", cluster.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	applyAll(t, pg, "../migrations")

	lite, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "schema.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	lite.SetMaxOpenConns(1)
	applyAll(t, lite, "../../sqlite/migrations")

	liteSchema, pgSchema := sqliteSchema(t, lite), postgresSchema(t, pg)
	var liteTables, pgTables []string
	for name := range liteSchema {
		liteTables = append(liteTables, name)
	}
	for name := range pgSchema {
		pgTables = append(pgTables, name)
	}
	slices.Sort(liteTables)
	slices.Sort(pgTables)
	if !slices.Equal(liteTables, pgTables) {
		t.Fatalf("tables:\nsqlite   %v\npostgres %v", liteTables, pgTables)
	}
	for _, name := range liteTables {
		want, got := liteSchema[name], pgSchema[name]
		if !slices.Equal(want, got) {
			t.Errorf("table %s:\nsqlite\n  %s\npostgres\n  %s", name, strings.Join(want, "\n  "), strings.Join(got, "\n  "))
		}
	}

	var notC []string
	rows, err := pg.QueryContext(ctx, `SELECT table_name || '.' || column_name FROM information_schema.columns
		WHERE table_schema = 'public' AND data_type = 'text' AND collation_name IS DISTINCT FROM 'C' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		notC = append(notC, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(notC) > 0 {
		t.Errorf("text columns without COLLATE \"C\": %v", notC)
	}

	// The single-row tables refuse a second row, as in SQLite.
	if _, err := pg.ExecContext(ctx, `INSERT INTO derivation (id, version) VALUES (2, 1)`); err == nil {
		t.Error("derivation took a row with id 2")
	}
	// seq numbers itself.
	var seq int64
	if err := pg.QueryRowContext(ctx, `INSERT INTO events (id, type, entity, execution_id, body, received_at)
		VALUES ('e1', 'run', 'run:x', 'x', '{}', 1) RETURNING seq`).Scan(&seq); err != nil || seq != 1 {
		t.Errorf("first event: seq %d, %v; want 1", seq, err)
	}
}

// applyAll runs every .sql file in dir, in name order.
func applyAll(t *testing.T, db *sql.DB, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations in %s (%v)", dir, err)
	}
	slices.Sort(files)
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(string(body)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
}

// The schema of each table, as lines comparable across the engines:
// "col <name> <type> [not null] [default <v>]" in column order, then
// "primary key (<cols>)", then "index <name> [unique] (<col> [desc], ...)
// [partial]" in name order; an index a constraint made is named "-".
type schema map[string][]string

// liteType is what each SQLite column type is in PostgreSQL.
var liteType = map[string]string{"INTEGER": "bigint", "TEXT": "text", "BLOB": "bytea"}

func sqliteSchema(t *testing.T, db *sql.DB) schema {
	t.Helper()
	s := schema{}
	for _, table := range queryStrings(t, db, `SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`) {
		var lines []string
		pk := map[int]string{}
		rows, err := db.Query(`SELECT name, type, "notnull", coalesce(dflt_value, ''), pk FROM pragma_table_info(?) ORDER BY cid`, table)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var name, typ, dflt string
			var notNull bool
			var pkAt int
			if err := rows.Scan(&name, &typ, &notNull, &dflt, &pkAt); err != nil {
				t.Fatal(err)
			}
			if pkAt > 0 {
				pk[pkAt] = name
				notNull = true // a primary key column is never NULL in PostgreSQL
				if typ == "INTEGER" && table == "events" {
					dflt = "identity" // events.seq is SQLite's rowid
				}
			}
			lines = append(lines, column(name, liteType[typ], notNull, dflt))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		var pkCols []string
		for i := 1; i <= len(pk); i++ {
			pkCols = append(pkCols, pk[i])
		}
		lines = append(lines, "primary key ("+strings.Join(pkCols, ", ")+")")

		var indexes []string
		rows, err = db.Query(`SELECT name, "unique", origin, partial FROM pragma_index_list(?) WHERE origin != 'pk' ORDER BY name`, table)
		if err != nil {
			t.Fatal(err)
		}
		type index struct {
			name, origin    string
			unique, partial bool
		}
		var list []index
		for rows.Next() {
			var i index
			if err := rows.Scan(&i.name, &i.unique, &i.origin, &i.partial); err != nil {
				t.Fatal(err)
			}
			list = append(list, i)
		}
		rows.Close()
		for _, i := range list {
			rows, err := db.Query(`SELECT coalesce(name, 'expression'), desc FROM pragma_index_xinfo(?) WHERE key ORDER BY seqno`, i.name)
			if err != nil {
				t.Fatal(err)
			}
			var cols []string
			for rows.Next() {
				var name string
				var desc bool
				if err := rows.Scan(&name, &desc); err != nil {
					t.Fatal(err)
				}
				cols = append(cols, indexColumn(name, desc))
			}
			rows.Close()
			name := i.name
			if i.origin != "c" {
				name = "-"
			}
			indexes = append(indexes, indexLine(name, i.unique, cols, i.partial))
		}
		slices.Sort(indexes)
		s[table] = append(lines, indexes...)
	}
	return s
}

func postgresSchema(t *testing.T, db *sql.DB) schema {
	t.Helper()
	s := schema{}
	tables := queryStrings(t, db, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`)
	for _, table := range tables {
		var lines []string
		rows, err := db.Query(`SELECT column_name, data_type, is_nullable = 'NO', coalesce(column_default, ''), is_identity = 'YES'
			FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position`, table)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var name, typ, dflt string
			var notNull, identity bool
			if err := rows.Scan(&name, &typ, &notNull, &dflt, &identity); err != nil {
				t.Fatal(err)
			}
			if identity {
				dflt = "identity"
			}
			if name == "rowid" {
				continue // SQLite's implicit rowid, made explicit (findings)
			}
			lines = append(lines, column(name, typ, notNull, strings.TrimSuffix(dflt, "::text")))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()

		const indexes = `SELECT i.relname, ix.indisprimary, ix.indisunique, ix.indpred IS NOT NULL,
			EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = ix.indexrelid),
			string_agg(coalesce(a.attname, 'expression') || CASE WHEN ix.indoption[k.n - 1] & 1 = 1 THEN ' desc' ELSE '' END, ', ' ORDER BY k.n)
			FROM pg_index ix
			JOIN pg_class i ON i.oid = ix.indexrelid
			JOIN pg_class r ON r.oid = ix.indrelid
			JOIN pg_namespace ns ON ns.oid = r.relnamespace AND ns.nspname = 'public'
			CROSS JOIN LATERAL unnest(ix.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
			LEFT JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum = k.attnum -- none for an expression (attnum 0)
			WHERE r.relname = $1
			GROUP BY i.relname, ix.indisprimary, ix.indisunique, ix.indpred, ix.indexrelid`
		rows, err = db.Query(indexes, table)
		if err != nil {
			t.Fatal(err)
		}
		var pk string
		var idx []string
		for rows.Next() {
			var name, cols string
			var primary, unique, partial, constraint bool
			if err := rows.Scan(&name, &primary, &unique, &partial, &constraint, &cols); err != nil {
				t.Fatal(err)
			}
			switch {
			case primary:
				pk = cols
			case constraint:
				idx = append(idx, indexLine("-", unique, strings.Split(cols, ", "), partial))
			default:
				idx = append(idx, indexLine(name, unique, strings.Split(cols, ", "), partial))
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		slices.Sort(idx)
		lines = append(lines, "primary key ("+pk+")")
		s[table] = append(lines, idx...)
	}
	return s
}

func column(name, typ string, notNull bool, dflt string) string {
	line := "col " + name + " " + typ
	if notNull {
		line += " not null"
	}
	if dflt != "" {
		line += " default " + dflt
	}
	return line
}

func indexColumn(name string, desc bool) string {
	if desc {
		return name + " desc"
	}
	return name
}

func indexLine(name string, unique bool, cols []string, partial bool) string {
	line := "index " + name
	if unique {
		line += " unique"
	}
	line += " (" + strings.Join(cols, ", ") + ")"
	if partial {
		line += " partial"
	}
	return line
}

func queryStrings(t *testing.T, db *sql.DB, query string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(query, args...)
	if err != nil {
		t.Fatal(fmt.Errorf("%s: %w", query, err))
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
