// Package writer is the single writer of the store: requests from any
// number of goroutines queue up, and it commits all those waiting in one
// transaction (group commit), each in its own savepoint, retrying a commit
// that met a passing cause; inside each commit it has ingest/derive refold
// the entities they touched and re-audit the executions they can change.
// Events reach it already decoded and validated by package ingest; it must
// not decode wire formats, nor know about HTTP or HTML: it must not import
// web, nor the feeds that write through it (ingest/feed/…).
package writer
