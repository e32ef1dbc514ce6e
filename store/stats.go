package store

import (
	"context"
	"fmt"
)

// FindingCount is how many stored findings one rule has at one severity.
type FindingCount struct {
	Rule     string
	Severity string
	Count    int64
}

// FindingCounts counts the stored findings by rule and severity: what the
// audit concludes right now, whichever commit or prune changed it last.
func (db *DB) FindingCounts(ctx context.Context) ([]FindingCount, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT rule, severity, count(*) FROM findings GROUP BY rule, severity ORDER BY rule, severity`)
	if err != nil {
		return nil, fmt.Errorf("store: count findings: %w", err)
	}
	defer rows.Close()
	var out []FindingCount
	for rows.Next() {
		var fc FindingCount
		if err := rows.Scan(&fc.Rule, &fc.Severity, &fc.Count); err != nil {
			return nil, fmt.Errorf("store: count findings: %w", err)
		}
		out = append(out, fc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: count findings: %w", err)
	}
	return out, nil
}

// FileSizes are the bytes the database holds on disk: the main file and
// its write-ahead log (which a checkpoint folds back into the main file).
type FileSizes struct {
	Main int64
	WAL  int64
}

// FileSizes is what the database holds on disk, as its engine measures it.
func (db *DB) FileSizes() (FileSizes, error) {
	return db.engine.Sizes(context.Background(), db.read.DB)
}
