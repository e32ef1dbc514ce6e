-- OpenTelemetry without hand instrumentation (DESIGN.md): tool-call spans
-- are attempts identified by their span, effects carry the W3C trace
-- context of the request that caused them, and the other spans (model
-- calls, HTTP client calls, context) are kept so that an effect can be
-- traced up to its tool call and model calls drawn in their own lane.
ALTER TABLE attempts ADD COLUMN trace_id TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN span_id TEXT NOT NULL DEFAULT '';
-- 1 when the attempt's number is its rank by start among its step's
-- span-identified attempts, rather than a number it was sent with.
ALTER TABLE attempts ADD COLUMN derived_number INTEGER NOT NULL DEFAULT 0;
CREATE INDEX attempts_trace ON attempts (trace_id);

ALTER TABLE effects ADD COLUMN trace_id TEXT NOT NULL DEFAULT '';
ALTER TABLE effects ADD COLUMN span_id TEXT NOT NULL DEFAULT '';
CREATE INDEX effects_trace ON effects (trace_id);

CREATE TABLE spans (
  trace_id        TEXT NOT NULL,
  span_id         TEXT NOT NULL,
  execution_id    TEXT NOT NULL,
  parent_span_id  TEXT NOT NULL DEFAULT '',
  role            TEXT NOT NULL,
  name            TEXT NOT NULL DEFAULT '',
  started_at      INTEGER,
  ended_at        INTEGER,
  error           TEXT NOT NULL DEFAULT '',
  model           TEXT NOT NULL DEFAULT '',
  input_tokens    INTEGER NOT NULL DEFAULT 0,
  output_tokens   INTEGER NOT NULL DEFAULT 0,
  http_method     TEXT NOT NULL DEFAULT '',
  http_url        TEXT NOT NULL DEFAULT '',
  http_status     INTEGER NOT NULL DEFAULT 0,
  idempotency_key TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (trace_id, span_id)
) WITHOUT ROWID;
CREATE INDEX spans_execution ON spans (execution_id);

-- The audit state of an execution (DESIGN.md, "What clean means"):
-- critical, unverified or clean; '' until it is next analysed.
ALTER TABLE executions ADD COLUMN audit_state TEXT NOT NULL DEFAULT '';
CREATE INDEX executions_state ON executions (audit_state, sort_at DESC, execution_id DESC);
CREATE INDEX effects_state_at ON effects (state, at);
