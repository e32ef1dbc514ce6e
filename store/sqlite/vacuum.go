package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/oncetrace/oncetrace/store"
)

// PageBytes is the database's page count times its page size, which is
// what the file shrinks to once a vacuum is checkpointed.
func (e *engine) PageBytes(ctx context.Context, read *sql.DB) (int64, error) {
	var pages, size int64
	if err := read.QueryRowContext(ctx, `SELECT page_count, page_size FROM pragma_page_count(), pragma_page_size()`).Scan(&pages, &size); err != nil {
		return 0, fmt.Errorf("store: database size: %w", err)
	}
	return pages * size, nil
}

// Vacuum returns free pages to the file system: incrementally, a chunk at
// a time, when the database was created with auto_vacuum=INCREMENTAL (Open
// does that for new files); by one VACUUM that also switches it, when it
// predates that and is small enough (run.ConvertMax); else not at all.
func (e *engine) Vacuum(ctx context.Context, run store.VacuumRun) (string, error) {
	var autoVacuum, free int64
	if err := run.Read.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&autoVacuum); err != nil {
		return "", fmt.Errorf("store: prune vacuum: %w", err)
	}
	switch autoVacuum {
	case 1:
		return "auto", checkpoint(ctx, run)
	case 2:
	default:
		size, err := e.PageBytes(ctx, run.Read)
		if err != nil {
			return "", err
		}
		var pages int
		if err := run.Read.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
			return "", fmt.Errorf("store: prune vacuum: %w", err)
		}
		if run.ConvertMax <= 0 || size > run.ConvertMax {
			return "none", nil
		}
		hold, err := run.WithWriter(func(c *sql.Conn) error {
			if _, err := c.ExecContext(ctx, `PRAGMA auto_vacuum = INCREMENTAL`); err != nil {
				return err
			}
			_, err := c.ExecContext(ctx, `VACUUM`)
			return err
		})
		if err != nil {
			return "", fmt.Errorf("store: prune vacuum: %w", err)
		}
		run.Account("vacuum", pages, hold)
		return "full", checkpoint(ctx, run)
	}
	// One pass over the pages free when it starts: ingest frees and reuses
	// pages all the time, so "until none is free" might never end while it
	// runs.
	const mode = "incremental"
	if err := run.Read.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
		return mode, fmt.Errorf("store: prune vacuum: %w", err)
	}
	pages := 256
	for left := free; left > 0; {
		if err := ctx.Err(); err != nil {
			return mode, err
		}
		if err := run.Read.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&free); err != nil {
			return mode, fmt.Errorf("store: prune vacuum: %w", err)
		}
		if free == 0 {
			break
		}
		n := int(min(free, left, int64(pages)))
		left -= int64(n)
		hold, err := run.WithWriter(func(c *sql.Conn) error {
			_, err := c.ExecContext(ctx, fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, n))
			return err
		})
		if err != nil {
			return mode, fmt.Errorf("store: prune vacuum: %w", err)
		}
		run.Account("vacuum", n, hold)
		pages = run.NextChunk(pages, n, hold)
	}
	return mode, checkpoint(ctx, run)
}

// checkpoint copies the write-ahead log into the database file, which
// truncates the file to the database's size: without it the pages a
// vacuum freed would stay on disk until the next automatic checkpoint.
// PASSIVE never waits for readers; what it cannot copy now, a later
// checkpoint does.
func checkpoint(ctx context.Context, run store.VacuumRun) error {
	hold, err := run.WithWriter(func(c *sql.Conn) error {
		var busy, logPages, done int64
		return c.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logPages, &done)
	})
	if err != nil {
		return fmt.Errorf("store: prune checkpoint: %w", err)
	}
	run.Account("checkpoint", 0, hold)
	return nil
}
