-- One-time tokens of signed webhooks (issue 22, item 3): a signature that
-- signs a token rather than the whole body (Mailgun's) could be pasted onto
-- invented event data. Each token is kept, with a hash of the body it came
-- with, until its signature is too old to be accepted anyway; the same
-- token on another body is a replay. In the database, not in memory, so
-- that instances sharing one database refuse a replay sent to another.
-- Times are Unix nanoseconds.
CREATE TABLE webhook_tokens (
  provider   TEXT COLLATE "C" NOT NULL,
  token      TEXT COLLATE "C" NOT NULL,
  body_hash  TEXT COLLATE "C" NOT NULL,
  expires_at BIGINT NOT NULL,
  PRIMARY KEY (provider, token)
);
CREATE INDEX webhook_tokens_expiry ON webhook_tokens (expires_at);
