-- What each effect asked of its provider (issue 21): a fingerprint without
-- what differs between two sends of one intent, and its summary for
-- humans; and which span-dialect rule made a span an attempt when it was
-- not a known framework's ("generic").
ALTER TABLE effects ADD COLUMN fingerprint TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE effects ADD COLUMN summary TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN recognised_by TEXT COLLATE "C" NOT NULL DEFAULT '';
