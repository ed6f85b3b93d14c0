-- The answer a worker reached, kept under the lease fence before any finishing step leaves the
-- service: a worker that takes the run over finishes with these same bytes, so every publish of
-- the run (a stale worker's included) is the same request and never a conflicting one.
ALTER TABLE runs ADD COLUMN final_answer text;
ALTER TABLE runs ADD COLUMN final_proposal jsonb;
