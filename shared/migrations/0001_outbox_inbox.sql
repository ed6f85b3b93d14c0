-- Transactional outbox: an event row commits with the change it describes; the relay publishes it.
CREATE TABLE outbox (
    seq          bigserial PRIMARY KEY,
    id           text NOT NULL UNIQUE,
    type         text NOT NULL,
    scope        text NOT NULL,
    payload      jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz
);
CREATE INDEX outbox_unpublished ON outbox (seq) WHERE published_at IS NULL;

-- Inbox: the ids of events a consumer has applied, written in the same transaction as the effect.
CREATE TABLE inbox (
    consumer     text NOT NULL,
    event_id     text NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);
