// Package store is oncetrace's database on either engine: store/sqlite
// (one embedded file, the default) and store/postgres (shared by several
// instances) implement Engine, which gives connections, migrations and the
// dialect; the SQL here is hand-written once, in the subset both engines
// share, and what differs is a named operation each engine writes for
// itself (a list bound as one parameter, an entity key, a vacuum ...).
//
// It holds the raw event log, which is the truth (export and import carry
// it), and the rows derived from it as a cache: executions, steps,
// attempts, spans, effects and their match states, findings, audit states,
// counts and search terms, stamped with the trace.DerivationVersion that
// derived them. Beside them it keeps what is not derived: the messages
// the SMTP sink received and the webhook tokens already used.
//
// A DB has one writer connection and a pool of readers. Writes go through
// Update, one transaction (a Tx), or, for the group commits of
// ingest/writer, UpdateKeys: on PostgreSQL those of different executions
// store their events in parallel across instances and derive one after
// the other, and readers of the log stop at a tail bound no open commit
// can undercut (Engine.TailBound). Reads (the list, an execution, the
// outbox, findings, search) each see one snapshot. A write the database refuses for a cause outside the
// request (a full disk, a read-only file, a lost connection) comes back as
// ErrUnwritable, which the server answers as retryable. Prune deletes by
// age; on PostgreSQL, a commit's Notice tells the other instances.
//
// It speaks trace types. It does not validate wire formats or decide the
// merge and audit rules, nor the order of states: ingest and trace do. It
// must not import ingest or web: they use the store, never the other way
// round.
package store
