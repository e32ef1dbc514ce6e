-- The partial indexes of 0001 (WHERE idempotency_key != '' ...) are not
-- used by queries that compare with a bound parameter, which is every
-- query the store makes, so lookups by key or by execution scanned whole
-- tables. Plain indexes are used always.
DROP INDEX attempts_key;
DROP INDEX effects_key;
DROP INDEX effects_execution;
CREATE INDEX attempts_key ON attempts (idempotency_key);
CREATE INDEX effects_key ON effects (idempotency_key);
CREATE INDEX effects_execution ON effects (execution_id, step_id);
