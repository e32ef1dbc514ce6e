-- The raw, deduplicated event log: every event ever accepted, once, in
-- commit order. seq is the monotonic sequence number live readers resume from.
CREATE TABLE events (
  seq          INTEGER PRIMARY KEY,
  id           TEXT NOT NULL UNIQUE,
  type         TEXT NOT NULL,
  entity       TEXT NOT NULL,
  execution_id TEXT NOT NULL,
  body         TEXT NOT NULL,
  received_at  INTEGER NOT NULL
);
CREATE INDEX events_entity ON events (entity);

-- Materialised state, folded from the event log by the merge rules.
-- Times are Unix nanoseconds, NULL when unknown.
CREATE TABLE executions (
  execution_id      TEXT PRIMARY KEY,
  name              TEXT NOT NULL DEFAULT '',
  status            TEXT NOT NULL DEFAULT 'running',
  started_at        INTEGER,
  ended_at          INTEGER,
  sort_at           INTEGER NOT NULL DEFAULT 0,
  idempotency_key   TEXT NOT NULL DEFAULT '',
  labels            TEXT NOT NULL DEFAULT '',
  conflicts         TEXT NOT NULL DEFAULT '',
  steps             INTEGER NOT NULL DEFAULT 0,
  attempts          INTEGER NOT NULL DEFAULT 0,
  retries           INTEGER NOT NULL DEFAULT 0,
  dedupes           INTEGER NOT NULL DEFAULT 0,
  replays           INTEGER NOT NULL DEFAULT 0,
  effects           INTEGER NOT NULL DEFAULT 0,
  findings          INTEGER NOT NULL DEFAULT 0,
  critical_findings INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX executions_newest ON executions (sort_at DESC, execution_id DESC);

CREATE TABLE steps (
  execution_id TEXT NOT NULL,
  step_id      TEXT NOT NULL,
  tool         TEXT NOT NULL DEFAULT '',
  effect       TEXT NOT NULL DEFAULT '',
  provider     TEXT NOT NULL DEFAULT '',
  attempts     INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (execution_id, step_id)
) WITHOUT ROWID;

CREATE TABLE attempts (
  execution_id    TEXT NOT NULL,
  step_id         TEXT NOT NULL,
  attempt         INTEGER NOT NULL,
  tool            TEXT NOT NULL DEFAULT '',
  effect          TEXT NOT NULL DEFAULT '',
  provider        TEXT NOT NULL DEFAULT '',
  outcome         TEXT NOT NULL DEFAULT '',
  deduplicated    INTEGER NOT NULL DEFAULT 0,
  idempotency_key TEXT NOT NULL DEFAULT '',
  worker          TEXT NOT NULL DEFAULT '',
  started_at      INTEGER,
  ended_at        INTEGER,
  args            TEXT NOT NULL DEFAULT '',
  result          TEXT NOT NULL DEFAULT '',
  error           TEXT NOT NULL DEFAULT '',
  conflicts       TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (execution_id, step_id, attempt)
) WITHOUT ROWID;
CREATE INDEX attempts_key ON attempts (idempotency_key) WHERE idempotency_key != '';

CREATE TABLE effects (
  provider        TEXT NOT NULL,
  effect_id       TEXT NOT NULL,
  idempotency_key TEXT NOT NULL DEFAULT '',
  execution_id    TEXT NOT NULL DEFAULT '',
  step_id         TEXT NOT NULL DEFAULT '',
  target          TEXT NOT NULL DEFAULT '',
  at              INTEGER,
  conflicts       TEXT NOT NULL DEFAULT '',
  state           TEXT NOT NULL DEFAULT 'orphan',
  PRIMARY KEY (provider, effect_id)
) WITHOUT ROWID;
CREATE INDEX effects_key ON effects (idempotency_key) WHERE idempotency_key != '';
CREATE INDEX effects_execution ON effects (execution_id, step_id) WHERE execution_id != '';

-- Findings of the audit. source 'run' rows are replaced whenever their
-- execution is re-analysed; source 'effect' rows (orphan_effect) whenever
-- their effect is re-checked. execution_id is '' for an orphan naming none.
CREATE TABLE findings (
  execution_id    TEXT NOT NULL,
  source          TEXT NOT NULL,
  rule            TEXT NOT NULL,
  severity        TEXT NOT NULL,
  step_id         TEXT NOT NULL DEFAULT '',
  idempotency_key TEXT NOT NULL DEFAULT '',
  effect_provider TEXT NOT NULL DEFAULT '',
  effect_id       TEXT NOT NULL DEFAULT '',
  body            TEXT NOT NULL
);
CREATE INDEX findings_execution ON findings (execution_id, source);
CREATE INDEX findings_effect ON findings (effect_provider, effect_id) WHERE source = 'effect';
