-- The outbox's search (docs/outbox.md, /outbox?q=to:jordan@acme.dev):
-- to: finds an effect by the start of its target, ASCII letters folded
-- (store/effect_search.go), and message-id: by its id whatever the
-- provider, each one index range however many effects are stored. Only
-- effects that have a target have an entry in effects_target.
CREATE INDEX effects_target ON effects (lower(target)) WHERE target != '';
CREATE INDEX effects_id ON effects (effect_id);
