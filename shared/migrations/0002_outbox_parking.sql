-- A row the relay cannot publish (too large, an invalid subject, a payload that is not an event) is
-- parked with its error after a few tries, so the rows behind it flow; a person looks at parked rows.
ALTER TABLE outbox ADD COLUMN attempts integer NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN last_error text;
ALTER TABLE outbox ADD COLUMN parked_at timestamptz;
DROP INDEX outbox_unpublished;
CREATE INDEX outbox_unpublished ON outbox (seq) WHERE published_at IS NULL AND parked_at IS NULL;
