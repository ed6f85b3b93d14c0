-- A run's context economy (the `stats` of a run in docs/api.md): the size of its model inputs against the source text it read.
ALTER TABLE runs
    ADD COLUMN model_input_chars_max   bigint NOT NULL DEFAULT 0,
    ADD COLUMN model_input_chars_total bigint NOT NULL DEFAULT 0,
    ADD COLUMN source_chars_read       bigint NOT NULL DEFAULT 0,
    ADD COLUMN tokens_in               bigint,
    ADD COLUMN tokens_out              bigint;
