-- A running run's row is rewritten at every step (its counters); its frozen catalog and answer are kept
-- out of line, so each rewrite copies a few hundred bytes instead of the whole admission.
ALTER TABLE runs SET (toast_tuple_target = 128);
