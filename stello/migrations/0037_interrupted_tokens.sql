-- The leases INTERRUPTs took over: the tokens of the turns they stopped,
-- oldest first, the newest 16 kept (storage writes them under the row lock).
--
-- Migration 0016 kept only the latest. A turn stopped by an INTERRUPT whose
-- own turn was stopped by a third before the first turn's next renewal (a
-- chain of INTERRUPTs across gateways, faster than a renewal) found another
-- token there, took its lost lease for a lapse and told its caller
-- CONCURRENT_MODIFICATION instead of TURN_INTERRUPTED (explore, stop 60).
-- Columns added and dropped without a rewrite; a token recorded before the
-- upgrade is not carried over (it matters for the seconds a turn takes).
ALTER TABLE sessions ADD COLUMN interrupted_turn_tokens uuid[];
ALTER TABLE sessions DROP COLUMN interrupted_turn_token;
