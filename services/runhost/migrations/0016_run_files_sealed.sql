-- An ended run's file index is sealed with its ledger (0015): its rows become one document per run and
-- go. The document still names its contents: sealing leaves `file_contents.refs` as it was (the trigger
-- below skips the rows a seal deletes), and a release of a sealed run gives those references back
-- (services/runhost/storage_repository.py). A file written after the seal (a person's plan edit racing the
-- run's end) is a live row again, and is read before the sealed entry of the same path.
CREATE TABLE run_files_sealed (
    run_id text PRIMARY KEY REFERENCES runs (id),
    -- The rows in path order, deflated JSON as the ledger's: {path, size, sha256, ref, content_hash, locator,
    -- by_content}.
    files  bytea NOT NULL
);
-- Kept in the row, as a sealed ledger is (0015).
ALTER TABLE run_files_sealed ALTER COLUMN files SET STORAGE MAIN;
ALTER TABLE run_files_sealed SET (toast_tuple_target = 8160);

CREATE OR REPLACE FUNCTION run_files_count_refs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('dossier.sealing', true) = 'on' THEN
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.by_content THEN
        UPDATE file_contents SET refs = refs - 1 WHERE sha256 = OLD.sha256;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.by_content THEN
        UPDATE file_contents SET refs = refs + 1 WHERE sha256 = NEW.sha256;
    END IF;
    RETURN NULL;
END $$;
