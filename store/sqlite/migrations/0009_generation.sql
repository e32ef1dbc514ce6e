-- What a writer's cache of derived state must notice besides new events
-- (ingest/writer/runcache.go): every prune batch and every re-derivation
-- outside a writer's commit bumps the generation, in its transaction, so
-- that the writer of any instance sharing the database empties its cache.
CREATE TABLE derived_generation (
  id         INTEGER PRIMARY KEY CHECK (id = 1),
  generation INTEGER NOT NULL
);
INSERT INTO derived_generation (id, generation) VALUES (1, 0);
