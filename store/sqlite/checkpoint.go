package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
)

// Checkpoints of the write-ahead log run on a connection of their own.
// SQLite's automatic checkpoint ran inside the COMMIT of the writer that
// crossed its threshold, a tenth of the writer's time under OTLP ingest; a
// checkpointer goroutine now does that work beside the writer. Checkpoints
// sync what they copy as the writer's setting says, as the automatic ones
// did.
const (
	// checkpointPages is how many pages the writer writes to the log
	// between two of the checkpointer's checkpoints: SQLite's own
	// automatic threshold.
	checkpointPages = 1000
	// backstopPages is the writer's own automatic checkpoint, which runs
	// only once the log has grown this long without restarting: under
	// sustained writes only a checkpoint on the writer's connection, or
	// one holding its lock, empties the log at a moment the writer can
	// start it again. By then the checkpointer has copied all but the last
	// frames, which are all the writer's checkpoint copies.
	backstopPages = 4 * checkpointPages
	// checkpointIdle is how long the writer must not have committed before
	// the log is truncated to nothing.
	checkpointIdle = time.Second
)

// checkpointer runs the writer's checkpoints: PASSIVE, which waits for
// no one, once the writer has written checkpointPages pages since the last
// one; one try at a RESTART, without waiting, when the log has grown to
// twice that; TRUNCATE when the writer is idle.
type checkpointer struct {
	db      *sql.DB // its own one connection
	pages   int64   // checkpointPages, smaller in tests
	restart int64   // the log's frames past which it tries a RESTART
	idle    time.Duration

	written atomic.Int64 // pages the writer has written to the log, in all
	commits atomic.Int64 // the writer's commits, in all
	wake    chan struct{}

	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu    sync.Mutex
	stats checkpointStats
}

// checkpointStats counts the checkpointer's checkpoints; tests read it.
type checkpointStats struct {
	passive, restart, truncate int
	failed                     int
	lastLog                    int // the log's frames at the last checkpoint
}

func newCheckpointer(dsn string, pages int64, idle time.Duration) (*checkpointer, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	ctx, cancel := context.WithCancel(context.Background())
	c := &checkpointer{db: db, pages: pages, restart: 2 * pages, idle: idle, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go c.run()
	return c, nil
}

// committing is the writer connection's commit hook: it runs before the
// commit writes its own pages, so the count lags by one transaction, which
// the idle truncation makes up for.
func (c *checkpointer) committing(status sqlite.DBStatus) {
	if n, _, err := status.Status(sqlite.DBStatusCacheWrite, true); err == nil {
		c.written.Add(int64(n))
	}
	c.commits.Add(1)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	tick := time.NewTicker(c.idle)
	defer tick.Stop()
	var (
		checkpointedAt int64 // written at the last checkpoint
		seenCommits    int64 // commits at the last tick
		truncatedAt    int64 = -1
	)
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.wake:
			at := c.written.Load()
			if at-checkpointedAt < c.pages {
				continue
			}
			log, ok := c.checkpoint("PASSIVE")
			if !ok {
				continue
			}
			checkpointedAt = at
			// Under sustained writes a PASSIVE checkpoint never has every
			// frame copied at the moment the writer begins, which is when
			// the writer would restart the log; a RESTART, which holds
			// the writer's lock, can. The connection's busy_timeout is 0:
			// a RESTART that finds the writer in a transaction or readers
			// on the old log gives up at once rather than hold the writer
			// off, and the writer's own checkpoint (backstopPages) is what
			// bounds the log then. (Trying at every commit instead lands
			// no more often: the writer is mid-commit when its hook wakes
			// the checkpointer.)
			if int64(log) >= c.restart {
				c.checkpoint("RESTART")
			}
		case <-tick.C:
			commits := c.commits.Load()
			if commits != seenCommits {
				seenCommits = commits
				continue
			}
			if commits == truncatedAt {
				continue
			}
			if _, ok := c.checkpoint("TRUNCATE"); ok {
				truncatedAt = commits
				checkpointedAt = c.written.Load()
			}
		}
	}
}

// checkpoint runs one checkpoint in mode; ok is false when it failed or
// could not finish (busy), in which case the next trigger tries again.
func (c *checkpointer) checkpoint(mode string) (log int, ok bool) {
	conn, err := c.db.Conn(c.ctx)
	if err != nil {
		c.count(mode, false, 0)
		return 0, false
	}
	defer conn.Close()
	var busy, done int
	if err := conn.QueryRowContext(c.ctx, `PRAGMA wal_checkpoint(`+mode+`)`).Scan(&busy, &log, &done); err != nil {
		c.count(mode, false, 0)
		return 0, false
	}
	// A busy RESTART or TRUNCATE still copied what it could; a log is
	// restarted only when the checkpoint finished.
	if busy != 0 && mode != "PASSIVE" {
		c.count(mode, false, log)
		return log, false
	}
	if mode != "PASSIVE" {
		log = 0 // the next write starts the log again
	}
	c.count(mode, true, log)
	return log, true
}

func (c *checkpointer) count(mode string, ok bool, log int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.lastLog = log
	if !ok {
		c.stats.failed++
		return
	}
	switch mode {
	case "PASSIVE":
		c.stats.passive++
	case "RESTART":
		c.stats.restart++
	case "TRUNCATE":
		c.stats.truncate++
	}
}

func (c *checkpointer) statsNow() checkpointStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// close stops the checkpointer, interrupting a checkpoint under way, and
// closes its connection, which as the file's last one checkpoints and
// removes the log (as closing the writer's did before).
func (c *checkpointer) close() error {
	var err error
	c.once.Do(func() {
		c.cancel()
		<-c.done
		// The writer's connections are closed: a last checkpoint copies the
		// whole log and cuts the database file to its size, which a
		// prune's vacuum shrank.
		_, _ = c.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
		err = c.db.Close()
	})
	return err
}

// writerConnector opens the writer's connections with the checkpointer's
// commit hook; sql.DB.Close calls its Close, which stops the checkpointer
// once the writer's connections are closed.
type writerConnector struct {
	driver.Connector
	cp *checkpointer
}

func (w writerConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := w.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	hooks, ok1 := conn.(sqlite.HookRegisterer)
	status, ok2 := conn.(sqlite.DBStatus)
	if ok1 && ok2 {
		hooks.RegisterCommitHook(func() int32 {
			w.cp.committing(status)
			return 0 // let the commit go ahead
		})
	}
	return conn, nil
}

func (w writerConnector) Close() error { return w.cp.close() }
