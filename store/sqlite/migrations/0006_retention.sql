-- Retention (docs/security.md, "Retention"): DB.Prune deletes an
-- execution with every raw event naming it, so the event log needs an
-- index by execution (it also serves DropTracePlaceholder, which scanned).
CREATE INDEX events_execution ON events (execution_id);

-- What a prune still has to re-derive: survivors that shared an
-- idempotency key or a trace with a pruned execution, and the keys whose
-- effects may have lost their only matching attempt. Rows are written in
-- the same transaction as the deletions that cause them and removed in the
-- transaction that re-derives them, so a prune cut short resumes here.
-- kind is 'key', 'trace' or 'execution'.
CREATE TABLE prune_pending (
  kind  TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (kind, value)
) WITHOUT ROWID;
