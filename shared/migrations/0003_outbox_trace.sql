-- The trace context (W3C `traceparent`, `tracestate`) of the code that enqueued the event, when it was
-- traced: the relay publishes the event inside that trace, so its consumers continue it. NULL otherwise.
ALTER TABLE outbox ADD COLUMN trace_headers jsonb;
