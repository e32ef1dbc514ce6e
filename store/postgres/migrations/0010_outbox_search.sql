-- As SQLite's 0017: the outbox's search finds an effect by the start of
-- its target, ASCII letters folded, and by its id whatever the provider,
-- each one index range.
CREATE INDEX effects_target ON effects (lower(target)) WHERE target != '';
CREATE INDEX effects_id ON effects (effect_id);
