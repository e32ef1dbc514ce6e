-- As SQLite's 0015 (store/indexes_test.go, issue 23): effects_fingerprint
-- led by the fingerprint, which the identical-effects lookup
-- (Tx.orphanCandidates) now compares first, the provider compared as an
-- expression so that SQLite does not take the primary key's range instead.
DROP INDEX effects_fingerprint;
CREATE INDEX effects_fingerprint ON effects (fingerprint, provider) WHERE fingerprint != '';
