-- The outbox (/outbox, GET /api/v1/effects) pages duplicates first, then
-- orphans, then matched, each by provider, time and id. The rank and a
-- time that is never NULL are stored, written with the state and the time,
-- so that an index serves the order and a page costs the same at any size.
ALTER TABLE effects ADD COLUMN state_rank BIGINT NOT NULL DEFAULT 1;
ALTER TABLE effects ADD COLUMN sort_at BIGINT NOT NULL DEFAULT 0;
UPDATE effects SET state_rank = CASE state WHEN 'duplicate' THEN 0 WHEN 'orphan' THEN 1 ELSE 2 END, sort_at = coalesce(at, 0);
CREATE INDEX effects_outbox ON effects (state_rank, provider, sort_at, effect_id);
-- The same order within one provider (/outbox?provider=...).
CREATE INDEX effects_provider_outbox ON effects (provider, state_rank, sort_at, effect_id);
