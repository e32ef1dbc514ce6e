-- A full disk or a read-only file system (docs/security.md): once writes
-- fail, DB.ProbeWrite commits a blob here now and then to find out when
-- they can succeed again, and empties it at once. One row at most; nothing
-- reads it.
CREATE TABLE write_probe (
  id  INTEGER PRIMARY KEY CHECK (id = 1),
  at  INTEGER NOT NULL,
  pad BLOB NOT NULL
);
