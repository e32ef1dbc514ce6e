-- The findings list (GET /api/v1/findings) pages in this order, critical
-- first ("critical" sorts before "warning"): an index makes a page cost
-- the same however many findings are stored.
CREATE INDEX findings_order ON findings (severity, execution_id, step_id, rule, idempotency_key, effect_provider, effect_id);
