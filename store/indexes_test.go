package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/sqlite"
)

// Every index is read by a query, or enforces something. An index costs
// every insert an entry at a random place in a B-tree, and bytes; one that
// no query reads is only that cost (issue 23). After the SQLite run of the
// whole suite, TestMain (checkIndexesOf) asks SQLite how it would run each
// query the store ran, and each constant query of its source that no test
// ran (EXPLAIN QUERY PLAN), and maps every index of the schema to the
// queries whose plan reads it. An index that no plan reads fails the suite
// by name, unless it is a UNIQUE or PRIMARY KEY constraint listed in
// constraints with what it enforces. The PostgreSQL run checks that its
// schema has no index the SQLite schema does not (checkPostgresIndexes):
// the queries are the same text but for the engines' operations (a list
// parameter, an entity key), so the SQLite plans answer for both.
//
// The plans are the store's own: it never runs ANALYZE (nor PRAGMA
// optimize, which may run it), so SQLite plans without statistics, from
// the schema and the query alone (every table taken as about a million
// rows), the same on an empty database as on a full one. checkIndexes fails if the store's source starts to
// run either; the plans would then depend on the data, and this check
// would have to plan on a representative database.

// constraints are the UNIQUE and PRIMARY KEY indexes that no plan needs to
// read, and what each enforces. A WITHOUT ROWID table's primary key is the
// table itself and needs no entry.
var constraints = map[string]string{
	"sqlite_autoindex_events_1":         "an event is stored once: Tx.InsertEvents's ON CONFLICT (id) DO NOTHING",
	"messages_effect":                   "one message an effect: DB.StoreMessage's ON CONFLICT (provider, effect_id) counts a copy received again",
	"sqlite_autoindex_webhook_tokens_1": "a webhook token is accepted once: its ON CONFLICT (provider, token) refuses a replay",
}

// keyLookups are the queries by key and the partial index each must read:
// one that does not state the index's condition reads none and scans the
// table, which no test would otherwise notice.
var keyLookups = []struct {
	query *regexp.Regexp
	index string
	why   string
}{
	{regexp.MustCompile(`(?i)\bFROM\s+attempts\s+WHERE\s+idempotency_key\s*(=|IN\b)`), "attempts_key", "the query must say idempotency_key != '', store.keyed"},
	{regexp.MustCompile(`(?i)\bFROM\s+findings\s+WHERE\s+idempotency_key\s*=`), "findings_key", "the query must say idempotency_key != ''"},
}

// indexUse is how a plan line names the index it reads.
var indexUse = regexp.MustCompile(`USING (?:COVERING )?INDEX (\S+)`)

// schemaIndex is one index of the SQLite schema.
type schemaIndex struct {
	name, table string
	origin      string // pragma index_list's: c (CREATE INDEX), u (UNIQUE), pk
	unique      bool
	withoutRow  bool // the primary key of a WITHOUT ROWID table: the table itself
}

// checkIndexesOf prints what checkIndexes finds and returns TestMain's exit
// code.
func checkIndexesOf(recorded []string) int {
	failed := checkIndexes(recorded, os.Getenv("ONCETRACE_INDEX_REPORT") != "")
	for _, f := range failed {
		fmt.Fprintln(os.Stderr, "store:", f)
	}
	if len(failed) > 0 {
		return 1
	}
	fmt.Fprintf(os.Stderr, "store: every index is read by one of %d queries' plans or enforces a constraint\n", len(recorded))
	return 0
}

// checkIndexes plans every query of the SQLite run and returns what fails,
// one line each; verbose (ONCETRACE_INDEX_REPORT set) prints each index
// with the queries reading it.
func checkIndexes(recorded []string, verbose bool) []string {
	return append(staticPlans(), withSQLiteSchema(func(conn *sql.Conn, written func(string) string) []string {
		return planEvery(conn, recorded, verbose, written)
	})...)
}

// withSQLiteSchema runs fn on a connection to a fresh database of the
// store's SQLite schema, with written, which writes SQLite's operations
// into a query of the store's source (store.Written).
func withSQLiteSchema(fn func(conn *sql.Conn, written func(string) string) []string) []string {
	dir, err := os.MkdirTemp("", "oncetrace-indexes")
	if err != nil {
		return []string{err.Error()}
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "oncetrace.db"), sqlite.SyncNormal)
	if err != nil {
		return []string{err.Error()}
	}
	driver, name := rawDriver(db)
	if err := db.Close(); err != nil {
		return []string{err.Error()}
	}
	raw, err := sql.Open(driver, name)
	if err != nil {
		return []string{err.Error()}
	}
	defer raw.Close()
	conn, err := raw.Conn(ctx)
	if err != nil {
		return []string{err.Error()}
	}
	defer conn.Close()
	return fn(conn, func(q string) string { return store.Written(db, q) })
}

// planEvery maps every index of the schema to the queries whose plans read
// it and returns a line for each index that is neither read nor a
// constraint listed in constraints.
func planEvery(conn *sql.Conn, recorded []string, verbose bool, written func(string) string) []string {
	ctx := context.Background()
	var failed []string
	indexes, err := sqliteIndexes(ctx, conn)
	if err != nil {
		return append(failed, err.Error())
	}
	constant, err := constantQueries()
	if err != nil {
		return append(failed, err.Error())
	}
	for i, q := range constant {
		constant[i] = written(q) // as the dialect gives it to SQLite
	}
	readers := map[string][]string{} // index -> the queries whose plan reads it
	for i, q := range append(slices.Clone(recorded), constant...) {
		names, err := planIndexes(ctx, conn, q)
		if err != nil && i >= len(recorded) {
			continue // the constant start of a query built further
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("EXPLAIN QUERY PLAN fails (%v): %s", err, oneLine(q)))
			continue
		}
		for _, n := range names {
			readers[n] = append(readers[n], q)
		}
		for _, k := range keyLookups {
			if k.query.MatchString(q) && !slices.Contains(names, k.index) {
				failed = append(failed, fmt.Sprintf("a lookup by key does not read %s (%s): %s", k.index, k.why, oneLine(q)))
			}
		}
	}
	for _, ix := range indexes {
		switch {
		case len(readers[ix.name]) > 0:
			if verbose {
				fmt.Fprintf(os.Stderr, "store: index %s (%s) read by %d queries:\n", ix.name, ix.table, len(readers[ix.name]))
				for _, q := range readers[ix.name] {
					fmt.Fprintf(os.Stderr, "    %s\n", oneLine(q))
				}
			}
		case ix.withoutRow:
		case (ix.unique || ix.origin != "c") && constraints[ix.name] != "":
			if verbose {
				fmt.Fprintf(os.Stderr, "store: index %s (%s) read by no plan; enforces %s\n", ix.name, ix.table, constraints[ix.name])
			}
		case ix.unique || ix.origin != "c":
			failed = append(failed, fmt.Sprintf("index %s on %s: a constraint no query's plan reads; say in constraints (indexes_test.go) what it enforces, or drop it", ix.name, ix.table))
		default:
			failed = append(failed, fmt.Sprintf("index %s on %s: no query's plan reads it; drop it in a migration (an index costs every insert), or add the query that needs it", ix.name, ix.table))
		}
	}
	for n := range constraints {
		if !slices.ContainsFunc(indexes, func(ix schemaIndex) bool { return ix.name == n }) {
			failed = append(failed, fmt.Sprintf("constraints (indexes_test.go) names %s, which the schema no longer has", n))
		}
	}
	return failed
}

// constantQueries is every query of the store's source (store/*.go, not
// its tests) that is a constant: string literals and constants joined by
// +, folded. A query built with a variable part (a list, a filter) is
// planned as the tests ran it; this adds the constant ones that no test
// ran. A constant that is the start of a query built further is not a
// query and does not prepare: checkIndexes skips those.
func constantQueries() ([]string, error) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var parsed []*ast.File
	consts := map[string]ast.Expr{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, err
		}
		parsed = append(parsed, f)
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, spec := range g.Specs {
					v := spec.(*ast.ValueSpec)
					for i, n := range v.Names {
						if i < len(v.Values) {
							consts[n.Name] = v.Values[i]
						}
					}
				}
			}
		}
	}
	var fold func(ast.Expr) (string, bool)
	fold = func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind != token.STRING {
				return "", false
			}
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		case *ast.Ident:
			if v, ok := consts[e.Name]; ok {
				return fold(v)
			}
		case *ast.ParenExpr:
			return fold(e.X)
		case *ast.BinaryExpr:
			if e.Op == token.ADD {
				x, ok := fold(e.X)
				y, ok2 := fold(e.Y)
				return x + y, ok && ok2
			}
		}
		return "", false
	}
	var out []string
	for _, f := range parsed {
		inner := map[ast.Expr]bool{} // operands of a constant +
		ast.Inspect(f, func(n ast.Node) bool {
			e, ok := n.(ast.Expr)
			if !ok || inner[e] {
				return true
			}
			q, ok := fold(e)
			if !ok {
				return true
			}
			if _, isAdd := e.(*ast.BinaryExpr); isAdd {
				// Every operand, however deep: a prefix such as `...
				// IN `+listParam of `...`+listParam+` AND `+keyed may itself
				// prepare, and would be planned as if it were a query.
				ast.Inspect(e, func(n ast.Node) bool {
					if o, ok := n.(ast.Expr); ok && o != e {
						inner[o] = true
					}
					return true
				})
			}
			if queryStart.MatchString(q) && !slices.Contains(out, q) {
				out = append(out, q)
			}
			return true
		})
	}
	return out, nil
}

// queryStart is how a query that reads tables begins.
var queryStart = regexp.MustCompile(`^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b`)

// checkPostgresIndexes returns a line for each index of the PostgreSQL
// schema that is not a constraint and has no namesake in SQLite's, whose
// plans checkIndexes reads for both engines.
func checkPostgresIndexes(ctx context.Context, conn *sql.Conn) []string {
	var sqliteNames []string
	if failed := withSQLiteSchema(func(conn *sql.Conn, _ func(string) string) []string {
		indexes, err := sqliteIndexes(ctx, conn)
		if err != nil {
			return []string{err.Error()}
		}
		for _, ix := range indexes {
			sqliteNames = append(sqliteNames, ix.name)
		}
		return nil
	}); len(failed) > 0 {
		return failed
	}
	rows, err := conn.QueryContext(ctx, `SELECT i.relname FROM pg_index x
		JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_namespace n ON n.oid = i.relnamespace
		WHERE n.nspname = current_schema() AND NOT x.indisunique AND NOT x.indisprimary ORDER BY 1`)
	if err != nil {
		return []string{err.Error()}
	}
	defer rows.Close()
	var failed []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return append(failed, err.Error())
		}
		if !slices.Contains(sqliteNames, name) {
			failed = append(failed, fmt.Sprintf("PostgreSQL index %s has no namesake in the SQLite schema, so no plan checks it (indexes_test.go)", name))
		}
	}
	if err := rows.Err(); err != nil {
		failed = append(failed, err.Error())
	}
	return failed
}

// staticPlans fails if the store's source runs ANALYZE or PRAGMA optimize:
// the plans checkIndexes asks for on an empty database would then not be
// the store's.
func staticPlans() []string {
	var failed []string
	for _, glob := range []string{"*.go", "sqlite/*.go", "postgres/*.go"} {
		files, err := filepath.Glob(glob)
		if err != nil {
			return []string{err.Error()}
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return []string{err.Error()}
			}
			if regexp.MustCompile(`(?i)\bANALYZE\b|\boptimize\b`).Match(b) {
				failed = append(failed, fmt.Sprintf("%s runs ANALYZE or PRAGMA optimize: plans now depend on the data, so checkIndexes (indexes_test.go) must plan on a representative database", f))
			}
		}
	}
	return failed
}

// sqliteIndexes is every index of the schema, the constraints' included.
func sqliteIndexes(ctx context.Context, conn *sql.Conn) ([]schemaIndex, error) {
	rows, err := conn.QueryContext(ctx, `SELECT m.name, l.name, l."unique", l.origin, m.sql LIKE '%WITHOUT ROWID%'
		FROM sqlite_schema m, pragma_index_list(m.name) l
		WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' ORDER BY l.name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []schemaIndex
	for rows.Next() {
		var ix schemaIndex
		var withoutRowid bool
		if err := rows.Scan(&ix.table, &ix.name, &ix.unique, &ix.origin, &withoutRowid); err != nil {
			return nil, err
		}
		ix.withoutRow = withoutRowid && ix.origin == "pk"
		out = append(out, ix)
	}
	return out, rows.Err()
}

// planIndexes is the indexes SQLite's plan for q reads.
func planIndexes(ctx context.Context, conn *sql.Conn, q string) ([]string, error) {
	// The arguments' values do not matter to a plan without statistics,
	// but the driver wants one for each placeholder.
	args := make([]any, placeholders(q))
	if dumpPlans != nil {
		fmt.Fprintf(dumpPlans, "\nQ: %s\n", strings.Join(strings.Fields(q), " "))
	}
	rows, err := conn.QueryContext(ctx, `EXPLAIN QUERY PLAN `+q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			return nil, err
		}
		if dumpPlans != nil {
			fmt.Fprintf(dumpPlans, "  %s\n", detail)
		}
		for _, m := range indexUse.FindAllStringSubmatch(detail, -1) {
			if !slices.Contains(names, m[1]) {
				names = append(names, m[1])
			}
		}
	}
	return names, rows.Err()
}

// placeholders counts q's ? placeholders, outside string literals and
// comments: the store writes no other kind on SQLite.
func placeholders(q string) int {
	n := 0
	for i := 0; i < len(q); i++ {
		switch {
		case q[i] == '\'':
			for i++; i < len(q) && q[i] != '\''; i++ {
			}
		case strings.HasPrefix(q[i:], "--"):
			for ; i < len(q) && q[i] != '\n'; i++ {
			}
		case q[i] == '?':
			n++
		}
	}
	return n
}

func oneLine(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 200 {
		q = q[:200] + "..."
	}
	return q
}

// dumpPlans, when ONCETRACE_PLANS names a file, gets every query and its
// plan: what to read to see why an index is or is not read.
var dumpPlans = func() *os.File {
	if name := os.Getenv("ONCETRACE_PLANS"); name != "" {
		f, err := os.Create(name)
		if err == nil {
			return f
		}
	}
	return nil
}()
