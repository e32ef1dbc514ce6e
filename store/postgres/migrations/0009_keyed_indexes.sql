-- As SQLite's 0016 (issue 23): attempts_key holds only the attempts that
-- carry a key, every query by key stating the index's condition
-- (idempotency_key != '', store.keyed) so that the planner can prove it
-- for a parameter; findings_key serves the key page's findings
-- (DB.ReadKey) instead of a scan of every finding.
DROP INDEX attempts_key;
CREATE INDEX attempts_key ON attempts (idempotency_key) WHERE idempotency_key != '';
CREATE INDEX findings_key ON findings (idempotency_key) WHERE idempotency_key != '';
