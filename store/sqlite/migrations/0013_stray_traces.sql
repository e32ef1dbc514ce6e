-- Stray traces (issue 21, item 4): an effect whose request's HTTP span left
-- the agent's trace joins, inferred, the execution whose tool attempt was
-- in flight with arguments naming its target. Derived by the writer
-- (store/stray.go), rebuilt from the log like every derived row.
ALTER TABLE effects ADD COLUMN joined_execution_id TEXT NOT NULL DEFAULT '';
ALTER TABLE effects ADD COLUMN stray INTEGER NOT NULL DEFAULT 0;
CREATE INDEX effects_joined ON effects (joined_execution_id) WHERE joined_execution_id != '';
-- An attempt that arrives after a stray effect finds it by its time.
CREATE INDEX effects_stray_at ON effects (sort_at) WHERE stray = 1;
-- A stray effect finds the attempts in flight when it happened.
CREATE INDEX attempts_started ON attempts (started_at);
-- Identical effects (one provider, one fingerprint) are judged together
-- (repeated_effect).
CREATE INDEX effects_fingerprint ON effects (provider, fingerprint) WHERE fingerprint != '';
