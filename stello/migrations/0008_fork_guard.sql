-- The fork guard of the built-in stello_create_session tool (STELLO-SPEC
-- §4.11, DESIGN §4.5): the turn count at which a session last forked itself
-- through the tool (NULL = never), kept in the session's row so every gateway
-- process sees it (the reference keeps it in process memory). Storage writes
-- it, under the row lock, in ClaimFork and ReleaseForkClaim.
ALTER TABLE sessions ADD COLUMN last_fork_turn integer;
