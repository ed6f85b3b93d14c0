-- A published event is deleted once DOSSIER_OUTBOX_KEEP_SECONDS have passed (shared/outbox.py), so the
-- outbox's live rows are a window of recent events and vacuuming it costs little. Autovacuum's default waits
-- until a fifth of a table is dead; until then the room of the rows let go is not reused and every new event
-- grows the table. Vacuumed as soon as any row is let go, it stays the size of its window.
ALTER TABLE outbox SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 0);
