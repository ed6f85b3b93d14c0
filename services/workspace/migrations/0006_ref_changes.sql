-- The changes of a ref the workspace was told of: a new version (`version` is it), a withdrawal (`version`
-- is the version withdrawn) or a retirement (`version` 0), each with when it happened (`at`, its event's).
-- The owners' events come in no order between one another, so a publication's committed event can come
-- after the event of a change, made later, of what it cites: its citations are checked against these when
-- they are recorded (services/workspace/drift.py).
CREATE TABLE ref_changes (
    scope    text NOT NULL,
    ref_kind text NOT NULL,
    ref_id   text NOT NULL,
    reason   text NOT NULL,
    version  integer NOT NULL,
    at       timestamptz NOT NULL,
    PRIMARY KEY (scope, ref_kind, ref_id, reason, version)
);
