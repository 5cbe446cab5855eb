-- A delete of any size answers at once (DESIGN §4.8): DeleteSubtree hides the
-- subtree in one short transaction and a job of the tree service erases it
-- in bounded batches afterwards.
--
-- A session being erased is provisional forever: `provisional_until =
-- 'infinity'`. Every read already answers a provisional session as absent,
-- so the subtree is unreadable from the hiding transaction's commit on;
-- writes refuse it too (storage accepts writes to a provisional session only
-- while it can still be committed), CommitSession and the provisional sweep
-- leave it alone, and a remembered reply linked to it answers NOT_FOUND. The
-- job takes the deepest hidden sessions of a space first (a parent goes in
-- the batch of its last child or after it: `parent_id` has no action), so
-- each batch is one DELETE of at most a batch of sessions, with everything
-- that belongs to them, and the work left is always the hidden rows
-- themselves: a job killed between batches resumes where it stopped.
CREATE INDEX sessions_erasing ON sessions (space_id, depth)
    WHERE provisional_until = 'infinity';
