-- How the answer's cited sentences fared against the passages they cite (the claims are stored with the
-- publication version; the run keeps the counts for its `stats`).
ALTER TABLE runs
    ADD COLUMN claims_supported   integer NOT NULL DEFAULT 0,
    ADD COLUMN claims_weak        integer NOT NULL DEFAULT 0,
    ADD COLUMN claims_unsupported integer NOT NULL DEFAULT 0;
