-- A claimed request_id holds no response until the work's transaction stores
-- it: `claim` inserts the key first (one statement instead of lock + select),
-- so other calls with the same key wait on its row. Committed rows always
-- carry a response; a NULL one is never returned as a stored answer.
ALTER TABLE idempotency_keys ALTER COLUMN response DROP NOT NULL;
