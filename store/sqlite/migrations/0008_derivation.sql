-- The derivation version (trace.DerivationVersion) the derived rows were
-- computed by: steps, counts, findings, effect states, audit states. One
-- row at most; a database from before it was recorded has none, and is
-- rebuilt once from its event log (DB.DerivationVersion returns 0).
CREATE TABLE derivation (
  id      INTEGER PRIMARY KEY CHECK (id = 1),
  version INTEGER NOT NULL
);
