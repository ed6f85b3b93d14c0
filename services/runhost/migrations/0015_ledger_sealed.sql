-- An ended run's ledger is sealed: its rows, which nothing appends to once the run has ended (every append
-- is fenced by the running lease), are kept as one document per run, and the rows and their index entries
-- go. A run's ledger reads the same whichever way it is kept (services/runhost/repository.py `_ledger`):
-- the same rows, ids, order and times.
CREATE TABLE ledger_sealed (
    run_id  text PRIMARY KEY REFERENCES runs (id),
    -- The rows in id order, as JSON deflated with zlib (services/runhost/sealed.py): {id, stage, ref,
    -- content_hash, locator, reason, model_request, at}.
    entries bytea NOT NULL
);
-- A sealed document is already deflated: kept in the row (up to a page) rather than moved out of line,
-- where a few hundred bytes of it would cost a TOAST chunk, its index entry and a page of their own.
ALTER TABLE ledger_sealed ALTER COLUMN entries SET STORAGE MAIN;
ALTER TABLE ledger_sealed SET (toast_tuple_target = 8160);
