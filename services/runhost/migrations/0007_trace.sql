-- The trace context (W3C `traceparent`, `tracestate`) of the request that admitted the run, when it was
-- traced: every attempt of the run continues that trace, so a run and its admission are one trace.
ALTER TABLE runs ADD COLUMN trace_headers jsonb;
