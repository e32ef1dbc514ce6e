// Package writer is the single writer of the store: requests from any
// number of goroutines queue up, and it commits all those waiting in one
// transaction (group commit), each in its own savepoint, then refolds the
// entities they touched and re-audits the executions they can change. It
// also re-audits after a prune (Reaudit). Events reach it already decoded
// and validated by package ingest; it must not decode wire formats, nor
// know about HTTP or HTML: it must not import web, nor the feeds that
// write through it (ingest/feed/…).
package writer
