package pgtest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/oncetrace/oncetrace/store/postgres/pgtest"
)

var cluster *pgtest.Cluster

func TestMain(m *testing.M) {
	c, err := pgtest.Start()
	if err != nil && (pgtest.Required() || !errors.Is(err, pgtest.ErrUnavailable)) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cluster = c
	code := m.Run()
	cluster.Stop()
	os.Exit(code)
}

// TestStartTwoDatabasesStop starts a cluster of its own, so that it can
// time the start and see Stop take the server and its directory away.
func TestStartTwoDatabasesStop(t *testing.T) {
	if err := pgtest.Available(); err != nil {
		if pgtest.Required() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if os.Getenv(pgtest.EnvURL) != "" {
		t.Skipf("%s is set: Start starts nothing", pgtest.EnvURL)
	}
	began := time.Now()
	c, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster started in %v", time.Since(began).Round(time.Millisecond))
	stopped := false
	defer func() {
		if !stopped {
			c.Stop()
		}
	}()

	ctx := context.Background()
	var urls []string
	var left *pgx.Conn // open while its database is dropped
	t.Run("databases", func(t *testing.T) {
		urls = []string{c.NewDatabase(t), c.NewDatabase(t)}
		if urls[0] == urls[1] {
			t.Fatalf("two databases, one URL: %s", urls[0])
		}
		for i, u := range urls {
			conn, err := pgx.Connect(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				left = conn
			} else {
				defer conn.Close(ctx)
			}
			if _, err := conn.Exec(ctx, `CREATE TABLE t (v BIGINT)`); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, `INSERT INTO t VALUES ($1)`, i+10); err != nil {
				t.Fatal(err)
			}
		}
		// Each database has its own table t: each reads its own one row,
		// here through database/sql as the store will.
		for i, u := range urls {
			db, err := sql.Open("pgx", u)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var v, n int
			if err := db.QueryRowContext(ctx, `SELECT v, (SELECT count(*) FROM t) FROM t`).Scan(&v, &n); err != nil {
				t.Fatal(err)
			}
			if v != i+10 || n != 1 {
				t.Errorf("database %d: v = %d of %d rows, want %d of 1", i, v, n, i+10)
			}
		}
	})
	if t.Failed() {
		return
	}
	// The subtest's cleanup dropped both, the first with a connection open.
	for _, u := range urls {
		if conn, err := pgx.Connect(ctx, u); err == nil {
			conn.Close(ctx)
			t.Errorf("database %s still exists after its test", u)
		}
	}
	if left != nil && left.Ping(ctx) == nil {
		t.Error("a connection to a dropped database still answers")
	}

	cfg, err := pgx.ParseConfig(urls[0])
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "127.0.0.1" || cfg.User != "oncetrace" {
		t.Errorf("database URL %s: host %s user %s, want 127.0.0.1 and oncetrace", urls[0], cfg.Host, cfg.User)
	}
	addr := net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	dir := c.Dir()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("cluster directory: %v", err)
	}
	c.Stop()
	stopped = true
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after Stop", addr)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stop left %s (%v)", dir, err)
	}
}

// TestNilClusterSkips: a TestMain that found no PostgreSQL keeps a nil
// cluster, and a test asking it for a database skips rather than panics.
func TestNilClusterSkips(t *testing.T) {
	if pgtest.Required() {
		t.Skipf("%s=1: a nil cluster fails the test instead", pgtest.EnvRequire)
	}
	var nilCluster *pgtest.Cluster
	ran := false
	t.Run("asks", func(t *testing.T) {
		nilCluster.NewDatabase(t)
		ran = true
	})
	if ran {
		t.Error("NewDatabase on a nil cluster returned")
	}
	nilCluster.Stop() // no panic
}
