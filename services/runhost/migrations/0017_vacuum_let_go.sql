-- Rows that live only while a run does: a run's live ledger and file index are sealed into one document each
-- at its end and deleted (0015, 0016), and its model-call journal is trimmed (0013). Their live rows are the
-- work in flight, so vacuuming them costs little; vacuumed as soon as rows are let go (instead of when a
-- fifth of the table is dead, autovacuum's default), their room serves the next runs instead of growing
-- the tables by every run's rows.
ALTER TABLE ledger SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 0);
ALTER TABLE run_files SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 0);
ALTER TABLE model_journal SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 0);
-- Rows that stay but change while a run goes (a run's status, lease and figures; a content's references):
-- vacuumed when a twentieth of the table is dead, not a fifth.
ALTER TABLE runs SET (autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE file_contents SET (autovacuum_vacuum_scale_factor = 0.05);
