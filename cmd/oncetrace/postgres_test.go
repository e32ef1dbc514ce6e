package main

import (
	"errors"
	"sync"
	"testing"

	"github.com/oncetrace/oncetrace/store/postgres/pgtest"
)

// The PostgreSQL cluster of this package's tests is started by the first
// test that asks for a database, not by TestMain: most tests here never
// need one, and starting a cluster costs seconds.
var testPostgres struct {
	once    sync.Once
	cluster *pgtest.Cluster
	err     error
}

// postgresDatabase returns the URL of a fresh database for t (dropped when
// t ends) on the package's cluster, starting the cluster on first use. Where
// PostgreSQL is unavailable it skips t, or fails it when pgtest.Required.
func postgresDatabase(t *testing.T) string {
	t.Helper()
	testPostgres.once.Do(func() { testPostgres.cluster, testPostgres.err = pgtest.Start() })
	if testPostgres.err != nil && (pgtest.Required() || !errors.Is(testPostgres.err, pgtest.ErrUnavailable)) {
		t.Fatalf("postgres: %v", testPostgres.err)
	}
	return testPostgres.cluster.NewDatabase(t) // a nil cluster skips, or fails when required
}

// stopPostgres stops the cluster if a test started one; TestMain calls it
// after the tests.
func stopPostgres() {
	testPostgres.once.Do(func() {}) // no start after this
	testPostgres.cluster.Stop()
}
