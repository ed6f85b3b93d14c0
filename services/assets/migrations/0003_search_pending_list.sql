-- New passages wait in the full-text index's pending list until it passes gin_pending_list_limit (4 MB by
-- default, a few thousand passages) or autovacuum merges it, and every search scans all of that list once
-- per term. Measured at 100k passages (issue 14) with 2,000 passages pending: search median 14.4 ms and
-- p99 76 ms against 5.7 ms and 21 ms merged. A 256 kB limit merges each upload's passages as it stores
-- them, in bulk: a 500-passage COPY took as long as before (95 ms against 97 ms), where turning the
-- pending list off (fastupdate = off) made it 207 ms.
ALTER INDEX evidence_tsv SET (gin_pending_list_limit = 256);
