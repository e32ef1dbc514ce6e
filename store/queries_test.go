package store_test

import (
	"context"
	"database/sql"
	"flag"
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
	"sync"
	"sync/atomic"
	"testing"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/postgres"
)

// The dialect's contract: every query of the store prepares on
// PostgreSQL. TestMain records every query text the store's tests make it
// run on PostgreSQL (store.RecordQueries sees each one as it passes
// through the dialect, which every query of the store does), and after the
// run prepares each, parse and plan only. A query that the tests never run
// there fails too: every SQL literal of the store's source must be part of
// a recorded query, or be a whole query itself, which is prepared as it
// is; so a query added later without a test that runs it, or that
// bypasses the dialect, fails the suite by name.

// queries is every query text the store ran on PostgreSQL (store.Written),
// and apart every one it ran on SQLite (indexes_test.go plans those): the
// store writes some differently for each engine (the engines' named
// operations), so those of the SQLite run are not PostgreSQL's.
var queries struct {
	sync.Mutex
	seen       map[string]bool
	seenSQLite map[string]bool
	on         atomic.Bool // from the start of the PostgreSQL run
}

// installRecorder makes the store show every query text to the recorder;
// it runs before any database opens: what it sees before recordQueries is
// the SQLite run's, from it on PostgreSQL's.
func installRecorder() {
	queries.seen = map[string]bool{}
	queries.seenSQLite = map[string]bool{}
	store.RecordQueries(func(q string) {
		queries.Lock()
		defer queries.Unlock()
		if !queries.on.Load() {
			queries.seenSQLite[q] = true
			return
		}
		queries.seen[q] = true
	})
}

func recordQueries() { queries.on.Store(true) }

func recordedQueries() []string {
	queries.Lock()
	defer queries.Unlock()
	return sortedKeys(queries.seen)
}

// recordedSQLiteQueries is every query text the SQLite run ran.
func recordedSQLiteQueries() []string {
	queries.Lock()
	defer queries.Unlock()
	return sortedKeys(queries.seenSQLite)
}

func sortedKeys(set map[string]bool) []string {
	list := make([]string, 0, len(set))
	for q := range set {
		list = append(list, q)
	}
	slices.Sort(list)
	return list
}

// preparable are the statements PostgreSQL's PREPARE takes; the others
// (transaction control, DDL) run instead, inside a transaction rolled back.
var preparable = regexp.MustCompile(`(?i)^\s*\(?\s*(SELECT|INSERT|UPDATE|DELETE|WITH|VALUES)\b`)

// checkQueriesOnPostgres prepares each query on a fresh database of the
// cluster and returns one line per query that does not.
func checkQueriesOnPostgres(list []query) []string {
	dsn, drop, err := cluster.CreateDatabase(fmt.Sprintf("t_queries_%d", os.Getpid()))
	if err != nil {
		return []string{err.Error()}
	}
	defer drop()
	ctx := context.Background()
	db, err := postgres.Open(ctx, dsn) // the schema the queries run on
	if err != nil {
		return []string{err.Error()}
	}
	defer db.Close()
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		return []string{err.Error()}
	}
	defer raw.Close()
	conn, err := raw.Conn(ctx)
	if err != nil {
		return []string{err.Error()}
	}
	defer conn.Close()
	failed := checkPostgresIndexes(ctx, conn) // indexes_test.go
	for i, q := range list {
		pq, err := rebind(db, q.text)
		if err == nil {
			err = prepareOnly(ctx, conn, i, pq)
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("query (%s) does not prepare on PostgreSQL: %v\n  as written: %s\n  as rebound: %s", q.from, err, q.text, pq))
		}
	}
	return failed
}

// rebind is store.Rebind, with the engine's refusal (a panic) as an error.
func rebind(db *store.DB, query string) (q string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("refused: %v", r)
		}
	}()
	return store.Rebind(db, query), nil
}

func prepareOnly(ctx context.Context, conn *sql.Conn, i int, query string) error {
	if !preparable.MatchString(query) {
		if _, err := conn.ExecContext(ctx, `BEGIN`); err != nil {
			return err
		}
		defer conn.ExecContext(ctx, `ROLLBACK`)
		// A savepoint for the store's RELEASE and ROLLBACK TO to name.
		if _, err := conn.ExecContext(ctx, `SAVEPOINT request`); err != nil {
			return err
		}
		_, err := conn.ExecContext(ctx, query)
		return err
	}
	name := "q" + strconv.Itoa(i)
	if _, err := conn.ExecContext(ctx, `PREPARE `+name+` AS `+query); err != nil {
		return err
	}
	_, err := conn.ExecContext(ctx, `DEALLOCATE `+name)
	return err
}

// sqlStart is how a string literal of the store's source that is (the start
// of) a query begins.
var sqlStart = regexp.MustCompile(`^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|DROP|ALTER|PRAGMA|VACUUM|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)\b`)

// fmtVerb splits a literal that is a format (fmt's %d) into its pieces.
var fmtVerb = regexp.MustCompile(`%[a-z]`)

// sourceLiteral is a string literal of the store's source that is (the
// start of) a query.
type sourceLiteral struct {
	at    string // file:line:column
	text  string
	whole bool // a query by itself: no operand of +, no format
}

// sourceLiterals returns the SQL literals of the store's source
// (store/*.go, not its tests).
func sourceLiterals() ([]sourceLiteral, error) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var out []sourceLiteral
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, err
		}
		concatenated := map[*ast.BasicLit]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			if b, ok := n.(*ast.BinaryExpr); ok && b.Op == token.ADD {
				for _, x := range []ast.Expr{b.X, b.Y} {
					if lit, ok := x.(*ast.BasicLit); ok {
						concatenated[lit] = true
					}
				}
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil || !sqlStart.MatchString(s) {
				return true
			}
			whole := !concatenated[lit] && !fmtVerb.MatchString(s)
			out = append(out, sourceLiteral{at: fset.Position(lit.Pos()).String(), text: s, whole: whole})
			return true
		})
	}
	return out, nil
}

// partOf reports whether lit is part of one of the queries.
func partOf(lit sourceLiteral, queries []string) bool {
	pieces := fmtVerb.Split(lit.text, -1)
	return slices.ContainsFunc(queries, func(q string) bool {
		for _, p := range pieces {
			if !strings.Contains(q, p) {
				return false
			}
		}
		return true
	})
}

// wholeSuite reports whether this run runs every test, so that every query
// of the store had its chance to be recorded.
func wholeSuite() bool {
	for _, name := range []string{"test.run", "test.skip"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return !testing.Short()
}

// query is a query text to prepare and where it came from.
type query struct{ text, from string }

// checkQueries prepares on PostgreSQL every query the suite ran and every
// query of the source that is one literal; after the whole suite, a query
// built of pieces no test ran fails. It prints what fails and returns
// TestMain's exit code.
func checkQueries() int {
	recorded := recordedQueries()
	var list []query
	for _, q := range recorded {
		list = append(list, query{q, "run by the tests"})
	}
	var failed []string
	literals, err := sourceLiterals()
	if err != nil {
		failed = append(failed, err.Error())
	}
	for _, lit := range literals {
		switch {
		case partOf(lit, recorded):
		case lit.whole:
			list = append(list, query{lit.text, lit.at + ", which no test ran"})
		case wholeSuite():
			failed = append(failed, fmt.Sprintf("%s: part of a query no test ran through the dialect (add a test that runs it): %s", lit.at, lit.text))
		}
	}
	failed = append(failed, checkQueriesOnPostgres(list)...)
	for _, f := range failed {
		fmt.Fprintln(os.Stderr, "store:", f)
	}
	if len(failed) > 0 {
		return 1
	}
	fmt.Fprintf(os.Stderr, "store: %d queries prepare on PostgreSQL\n", len(list))
	return 0
}
