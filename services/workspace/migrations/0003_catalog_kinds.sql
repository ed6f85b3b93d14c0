-- A run's catalog reads each kind's newest associations apart (services/workspace/catalog.py), each
-- through this index, so one kind's many items never make another kind's few expensive to find.
CREATE INDEX associations_by_kind ON associations (workspace_id, kind, seq DESC)
    WHERE kind IN ('publication', 'source', 'artifact');
