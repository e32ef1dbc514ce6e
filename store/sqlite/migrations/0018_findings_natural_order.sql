-- The findings list (GET /api/v1/findings, oncetrace audit) in natural
-- order (issue 24): step-2 before step-14 before step-123. natural_place
-- is trace.NaturalKey of each part of a finding's place (execution, step,
-- rule, key, effect), joined by \x01; the list orders by severity, it,
-- then the parts themselves (ties such as step-7 and step-007). The writer
-- fills it; rows stored before it are refilled by the re-derivation that
-- trace.DerivationVersion 6 asks for.
ALTER TABLE findings ADD COLUMN natural_place TEXT NOT NULL DEFAULT '';
DROP INDEX findings_order;
CREATE INDEX findings_order ON findings (severity, natural_place, execution_id, step_id, rule, idempotency_key, effect_provider, effect_id);
