package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/oncetrace/oncetrace/store"
	"github.com/oncetrace/oncetrace/store/postgres"
	"github.com/oncetrace/oncetrace/store/postgres/pgtest"
	"github.com/oncetrace/oncetrace/store/sqlite"
)

// The store's whole test suite runs once per engine: TestMain runs the
// tests on SQLite, then again on PostgreSQL (a throwaway cluster, or the
// server ONCETRACE_TEST_POSTGRES names), each test on a fresh database.
var (
	engine  = "sqlite"
	cluster *pgtest.Cluster
)

func TestMain(m *testing.M) {
	installRecorder() // queries_test.go
	code := m.Run()
	if code == 0 && wholeSuite() {
		code = checkIndexesOf(recordedSQLiteQueries()) // indexes_test.go
	}
	if code != 0 {
		os.Exit(code)
	}
	c, err := pgtest.Start()
	if err != nil {
		if pgtest.Required() || !errors.Is(err, pgtest.ErrUnavailable) {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "store: PostgreSQL tests skipped: %v\n", err)
		os.Exit(code)
	}
	cluster, engine = c, "postgres"
	fmt.Fprintln(os.Stderr, "store: the same tests on PostgreSQL")
	recordQueries() // queries_test.go
	code = m.Run()
	if code == 0 {
		code = checkQueries()
	}
	cluster.Stop()
	os.Exit(code)
}

// openEngine opens a fresh, empty database of the engine under test.
func openEngine(t testing.TB) *store.DB {
	t.Helper()
	var db *store.DB
	var err error
	if engine == "postgres" {
		db, err = postgres.Open(context.Background(), cluster.NewDatabase(t))
	} else {
		db, err = sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "oncetrace.db"), sqlite.SyncNormal)
	}
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// sqliteOnly skips a test of something only the SQLite engine has (a file,
// its pragmas, its vacuum).
func sqliteOnly(t testing.TB) {
	t.Helper()
	if engine != "sqlite" {
		t.Skip("SQLite only")
	}
}

// rawDriver is the driver and name to open db with as plain SQL, to look
// at its tables.
func rawDriver(db *store.DB) (driver, name string) {
	if db.Engine() == "postgres" {
		return "pgx", db.Path // a test database has no password to redact
	}
	return "sqlite", "file:" + db.Path + "?_pragma=busy_timeout(10000)"
}

// TestEngineOperations pins what each engine answers for the operations
// the rest of oncetrace asks by name instead of by the engine's name.
func TestEngineOperations(t *testing.T) {
	db := openEngine(t)
	defer db.Close()
	want := map[string]struct {
		shared     bool
		durability string
	}{"sqlite": {false, "normal"}, "postgres": {true, "server"}}[engine]
	if got := db.Shared(); got != want.shared {
		t.Errorf("Shared: got %v, want %v", got, want.shared)
	}
	if got := db.Durability(); got != want.durability {
		t.Errorf("Durability: got %q, want %q", got, want.durability)
	}
}
