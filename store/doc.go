// Package store keeps oncetrace's data in an embedded SQLite database
// (modernc.org/sqlite, no cgo): the raw event log, the materialised
// executions, steps, attempts and effects, and the audit's findings.
//
// It speaks trace types and hand-written SQL. It does not validate wire
// formats or decide merge and audit rules; ingest and trace do. It must
// not import ingest or web: they use the store, never the other way round.
package store
