-- A ledger row says once that a run listed, read, included or found unavailable a material at a locator.
-- Concurrent calls under one lease wrote such a row again (parallel reads of one passage, two finishes),
-- so the first row of each is kept and a later one is refused by the index (services/runhost/repository.py
-- writes with ON CONFLICT DO NOTHING). A `replayed` row has no ref: it names a model request of its own.
DELETE FROM ledger WHERE id IN (
    SELECT id FROM (
        SELECT id, row_number() OVER (PARTITION BY run_id, stage, ref, locator ORDER BY id) AS nth
        FROM ledger WHERE ref IS NOT NULL
    ) AS numbered
    WHERE nth > 1
);
CREATE UNIQUE INDEX ledger_once ON ledger (run_id, stage, ref, locator) NULLS NOT DISTINCT WHERE ref IS NOT NULL;
