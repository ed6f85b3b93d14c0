-- The ledger's once-rule (0008) without the whole ref document and locator in its index: a row is named by
-- a digest of its stage, ref and locator, so each index entry is a run id and 16 bytes instead of a copy of
-- the ref, most of what a run's live rows left in the index after they were sealed and let go (0015).
-- jsonb's text is canonical (keys sorted, one form of each), so a ref with its keys in another order is the
-- same row, as under jsonb equality; a NULL locator and an empty one stay apart, as NULLS NOT DISTINCT kept
-- them. Writers name the same expression in ON CONFLICT (services/runhost/repository.py).
CREATE FUNCTION ledger_key(stage text, ref jsonb, locator text) RETURNS uuid
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN md5(stage || chr(1) || ref::text || chr(1) || coalesce('+' || locator, '-'))::uuid;
CREATE UNIQUE INDEX ledger_once_key ON ledger (run_id, ledger_key(stage, ref, locator)) WHERE ref IS NOT NULL;
DROP INDEX ledger_once;
