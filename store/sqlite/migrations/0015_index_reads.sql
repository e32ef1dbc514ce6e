-- Every index is read by a query's plan or enforces a constraint
-- (store/indexes_test.go, issue 23). effects_fingerprint led with the
-- provider, so SQLite, planning without statistics, read the primary key's
-- range of every effect of the provider instead of it: led by the
-- fingerprint, the identical-effects lookup (Tx.orphanCandidates) reads
-- it, and costs the same however many effects the provider has.
DROP INDEX effects_fingerprint;
CREATE INDEX effects_fingerprint ON effects (fingerprint, provider) WHERE fingerprint != '';
