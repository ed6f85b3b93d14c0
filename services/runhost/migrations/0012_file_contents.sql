-- Run files stored once per content: the bytes of a working file are kept at `runs/sha256/ab/<sha256>`,
-- however many runs (or versions of one file) hold the same text. A row here says the content is (being)
-- stored; `generation` changes when a row is made again after its content was let go, so a writer that
-- put the bytes under one generation never indexes them under another. A content that no `run_files` row
-- names, untouched for a grace period, is let go (services/runhost/retention.py).
CREATE TABLE file_contents (
    sha256     text PRIMARY KEY,
    generation bigserial NOT NULL,
    size       integer NOT NULL,
    stored     boolean NOT NULL DEFAULT false,
    -- How many `run_files` rows name this content (kept by the trigger below, in their transaction).
    refs       integer NOT NULL DEFAULT 0 CHECK (refs >= 0),
    touched_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX file_contents_unreferenced ON file_contents (touched_at) WHERE refs = 0;

-- Rows written before this migration name a per-run key (`runs/<run_id>/<path>@<sha256>`); later ones the
-- content key, and count as references to it.
ALTER TABLE run_files ADD COLUMN by_content boolean NOT NULL DEFAULT false;

CREATE FUNCTION run_files_count_refs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.by_content THEN
        UPDATE file_contents SET refs = refs - 1 WHERE sha256 = OLD.sha256;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.by_content THEN
        UPDATE file_contents SET refs = refs + 1 WHERE sha256 = NEW.sha256;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER run_files_refs AFTER INSERT OR DELETE OR UPDATE OF sha256, by_content ON run_files
    FOR EACH ROW EXECUTE FUNCTION run_files_count_refs();
