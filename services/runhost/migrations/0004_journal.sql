-- The model-call journal: each model request of a run (driven by a model endpoint) with the sha256 of its
-- exact input, the step the model answered, and the result that step produced. A resumed run rebuilds
-- its context from the results and gets a journaled answer back for an input already sent.
CREATE TABLE model_journal (
    seq        bigserial PRIMARY KEY,
    run_id     text NOT NULL REFERENCES runs (id),
    epoch      integer NOT NULL,
    request_id text NOT NULL,
    input_hash text NOT NULL,
    -- json, not jsonb: the key order of tool arguments is part of the next input, so it is kept as it was.
    response   json NOT NULL,
    result     json,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX model_journal_run ON model_journal (run_id, input_hash);

-- `replayed`: a model request answered from the journal. It names the request and its input hash, and
-- no material (it carries none of its own), so its ref is empty.
ALTER TABLE ledger ALTER COLUMN ref DROP NOT NULL;
ALTER TABLE ledger DROP CONSTRAINT ledger_stage_check;
ALTER TABLE ledger ADD CONSTRAINT ledger_stage_check
    CHECK (stage IN ('listed', 'read', 'included', 'unavailable', 'replayed'));
ALTER TABLE ledger ADD CONSTRAINT ledger_ref_present CHECK (ref IS NOT NULL OR stage = 'replayed');
