-- Who asked for the run: the agent its PROV export names beside the model (runs admitted before this
-- migration have none recorded).
ALTER TABLE runs ADD COLUMN principal text;
