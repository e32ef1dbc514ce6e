-- Mail messages the SMTP sink received (docs/outbox.md), kept so that the
-- UI can show them. A message is not an event: the effect it caused
-- (provider, effect_id) is in the event log, and this row is that effect's
-- content. A message received again under the same effect id is counted
-- (received, last_received_at), not stored again: the first copy is kept.
-- Times are Unix nanoseconds.
CREATE TABLE messages (
  provider         TEXT NOT NULL,
  effect_id        TEXT NOT NULL,
  mail_from        TEXT NOT NULL DEFAULT '',
  recipients       TEXT NOT NULL DEFAULT '',
  received_at      INTEGER NOT NULL,
  last_received_at INTEGER NOT NULL,
  received         INTEGER NOT NULL DEFAULT 1,
  raw              BLOB NOT NULL
);
CREATE UNIQUE INDEX messages_effect ON messages (provider, effect_id);
