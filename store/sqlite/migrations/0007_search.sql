-- Search (docs/api.md, GET /api/v1/executions): an inverted index from a
-- normalised term to the executions having it, so that a search reads a
-- few index ranges whatever the size of the database. store/search.go says
-- what the terms are; the writer adds them as it writes rows. This
-- back-fills the executions already stored, making the same terms in SQL:
-- lower() folds ASCII letters only, as the Go side does.
CREATE TABLE search_terms (
  term         TEXT NOT NULL,
  execution_id TEXT NOT NULL,
  PRIMARY KEY (term, execution_id)
) WITHOUT ROWID;
-- For a search's check that an execution has a term (a seek per row), and
-- for DB.Prune, which deletes an execution's terms with it.
CREATE INDEX search_terms_execution ON search_terms (execution_id);

WITH RECURSIVE
-- Effects belong to the executions that name them, that sent their key,
-- or whose traces they came from (store/run.go, loadRun).
effect_owners (execution_id, provider, effect_id) AS (
  SELECT execution_id, provider, effect_id FROM effects WHERE execution_id != ''
  UNION SELECT a.execution_id, e.provider, e.effect_id FROM effects e JOIN attempts a ON a.idempotency_key = e.idempotency_key
    WHERE e.idempotency_key != ''
  UNION SELECT a.execution_id, e.provider, e.effect_id FROM effects e JOIN attempts a ON a.trace_id = e.trace_id WHERE e.trace_id != ''
  UNION SELECT s.execution_id, e.provider, e.effect_id FROM effects e JOIN spans s ON s.trace_id = e.trace_id WHERE e.trace_id != ''
  UNION SELECT x.execution_id, e.provider, e.effect_id FROM effects e JOIN executions x ON x.execution_id = e.trace_id
    WHERE e.trace_id != ''
),
-- Values stored whole: ids, keys, workers, providers (store/search.go).
whole (execution_id, v) AS (
  SELECT execution_id, execution_id FROM executions
  UNION SELECT execution_id, idempotency_key FROM executions
  UNION SELECT x.execution_id, l.key || ':' || l.value FROM executions x, json_each(x.labels) l WHERE x.labels != ''
  UNION SELECT execution_id, step_id FROM attempts
  UNION SELECT execution_id, worker FROM attempts
  UNION SELECT execution_id, idempotency_key FROM attempts
  UNION SELECT o.execution_id, e.effect_id FROM effect_owners o JOIN effects e USING (provider, effect_id)
  UNION SELECT o.execution_id, e.idempotency_key FROM effect_owners o JOIN effects e USING (provider, effect_id)
  UNION SELECT o.execution_id, e.provider FROM effect_owners o JOIN effects e USING (provider, effect_id)
),
-- Free text, stored whole and from each of its tokens on: names, label
-- values, tools, effect targets.
vals (execution_id, v) AS (
  SELECT execution_id, name FROM executions
  UNION SELECT x.execution_id, l.value FROM executions x, json_each(x.labels) l WHERE x.labels != ''
  UNION SELECT execution_id, tool FROM attempts
  UNION SELECT o.execution_id, e.target FROM effect_owners o JOIN effects e USING (provider, effect_id)
),
-- Every ASCII character but a letter or digit becomes a space, where the
-- tokens split (one character for one, so positions stay); a trailing
-- space ends the last token.
spaced (execution_id, v, rest) AS (
  SELECT execution_id, lower(v),
    replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(lower(v)
      , '!', ' '), '"', ' '), '#', ' '), '$', ' '), '%', ' '), '&', ' '), '''', ' ')
      , '(', ' '), ')', ' '), '*', ' '), '+', ' '), ',', ' '), '-', ' '), '.', ' ')
      , '/', ' '), ':', ' '), ';', ' '), '<', ' '), '=', ' '), '>', ' '), '?', ' ')
      , '@', ' '), '[', ' '), '\', ' '), ']', ' '), '^', ' '), '_', ' '), '`', ' ')
      , '{', ' '), '|', ' '), '}', ' '), '~', ' '), char(9), ' '), char(10), ' '), char(13), ' ')
      || ' '
  FROM vals WHERE v != ''
),
-- Each token, and where it starts in v (1-based, in characters).
split (execution_id, v, token, start, rest, at) AS (
  SELECT execution_id, v, '', 0, rest, 1 FROM spaced
  UNION ALL
  SELECT execution_id, v, substr(rest, 1, instr(rest, ' ') - 1), at, substr(rest, instr(rest, ' ') + 1), at + instr(rest, ' ')
  FROM split WHERE rest != ''
)
INSERT OR IGNORE INTO search_terms (term, execution_id)
SELECT lower(v), execution_id FROM whole WHERE v != '' AND length(CAST(v AS BLOB)) <= 256
UNION ALL
SELECT lower(v), execution_id FROM vals WHERE v != '' AND length(CAST(v AS BLOB)) <= 256
UNION ALL
-- A value from each token on, or the token alone when that is too long.
SELECT CASE WHEN length(CAST(substr(v, start) AS BLOB)) <= 256 THEN substr(v, start) ELSE token END, execution_id
  FROM split WHERE length(CAST(token AS BLOB)) BETWEEN 2 AND 64;
