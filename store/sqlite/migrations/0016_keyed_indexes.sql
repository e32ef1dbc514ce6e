-- attempts_key holds only the attempts that carry a key (issue 23): most
-- attempts carry none, and every query by key now states the index's
-- condition (idempotency_key != '', store.keyed), which is what lets
-- SQLite read a partial index for a comparison with a parameter (0002
-- made it whole when the queries did not say so).
DROP INDEX attempts_key;
CREATE INDEX attempts_key ON attempts (idempotency_key) WHERE idempotency_key != '';
-- The key page's findings (DB.ReadKey, /keys/{key} and its JSON twin)
-- read the findings of one key instead of scanning every finding in the
-- listing's order (findings_order): a key's page costs the same however
-- many findings are stored. Only findings that name a key have an entry.
CREATE INDEX findings_key ON findings (idempotency_key) WHERE idempotency_key != '';
