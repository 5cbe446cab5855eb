-- `stello_search_text` maps the Latin letters with diacritics of a text in time that follows
-- those letters, not the length of the lines holding them (searchsymbols: one line of 1 MiB
-- of Russian, Chinese or Japanese text holding a single "é" took about 4 s of the database's
-- CPU inside the record's write, whose `search_vector` is a STORED generated column).
--
-- 0042's function (kept by 0043) ran `translate` over every line holding such a letter.
-- PostgreSQL's `translate` looks each character of its text up in its list in order, so a
-- character in none (a Cyrillic or CJK one) walks the whole list of about 400 characters:
-- a text of n characters on one line cost n times the list. Now the text is read as pairs
-- of a run of other characters and the run of characters of those blocks (U+00C0-U+024F,
-- U+1E00-U+1EFF) after it (`regexp_matches`, one pass), and `translate` reads the latter
-- only, with the list of letters alone (the ASCII characters that 0042's list began with,
-- each mapped to itself, are never in such a run). The cost is per run of letters: a text
-- where nearly every word holds one (Vietnamese) pays about as before. The same text as
-- before, character for character: nothing is rewritten, no index is built again, the
-- backfill does not start again (tests/storage/search/test_search_accents.py compares the
-- function with the query's `normalise`, lines of other scripts holding letters included).
--
-- Measured here (embedded PostgreSQL 18, 2 cores shared, noisy; bench/bench_search_text.py,
-- 0043's function -> this one, the range of three runs): one line of 512 Ki Cyrillic
-- characters holding one "é" 1.9-3.1 s -> 0.02-0.06 s (the record's whole vector 0.46 s now,
-- where 0042's read the text twice), one line of 341 Ki CJK characters holding one "é"
-- 1.9-2.3 s -> 0.03-0.04 s; 1 MiB of ASCII 0.04-0.06 s -> 0.04-0.05 s, of French words on
-- one line 0.30-0.53 s -> 0.25-0.46 s, of Russian lines with one "é" 0.06-0.14 s ->
-- 0.10-0.15 s, of Vietnamese words on one line 0.8-2.0 s -> 1.1-1.8 s (its runs are many:
-- up to about 1.4x in a run, within this machine's noise in another).
--
-- The function keeps its name (stello/distribution_plan.py lists it for Citus: the new
-- body reaches every node).

CREATE OR REPLACE FUNCTION stello_search_text(content text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT regexp_replace(
    regexp_replace(
        CASE WHEN wide ~ '[\u00c0-\u024f\u1e00-\u1eff]' THEN (
            SELECT string_agg(
                p.m[1] || translate(p.m[2],
                        E'\u00e9\u00e8\u00e0\u00e7\u00ea\u00f4\u00f9\u00e2\u00ee\u00fb\u00eb\u00ef\u00fc\u00f6'
                        '\u00e4\u00f1\u00e1\u00ed\u00f3\u00fa\u00e3\u00f5\u00e5\u00f8\u0142\u015b\u0107\u0144'
                        '\u017a\u017c\u0105\u0119\u0151\u0171\u017e\u0161\u010d\u0159\u00fd\u016f\u0165\u010f'
                        '\u0148\u013e\u0103\u0219\u021b\u0111\u01a1\u01b0\u1ea1\u1ea3\u1ea5\u1ea7\u1ea9\u1eab'
                        '\u1ead\u1eaf\u1eb1\u1eb3\u1eb5\u1eb7\u1eb9\u1ebb\u1ebd\u1ebf\u1ec1\u1ec3\u1ec5\u1ec7'
                        '\u1ec9\u1ecb\u1ecd\u1ecf\u1ed1\u1ed3\u1ed5\u1ed7\u1ed9\u1edb\u1edd\u1edf\u1ee1\u1ee3'
                        '\u1ee5\u1ee7\u1ee9\u1eeb\u1eed\u1eef\u1ef1\u1ef3\u1ef5\u1ef7\u1ef9\u00c9\u00c8\u00c0'
                        '\u00c7\u00ca\u00d4\u00d9\u00c2\u00ce\u00db\u00cb\u00cf\u00dc\u00d6\u00c4\u00d1\u00c1'
                        '\u00cd\u00d3\u00da\u00c3\u00d5\u00c5\u00d8\u0141\u015a\u0106\u0143\u0179\u017b\u0104'
                        '\u0118\u0150\u0170\u017d\u0160\u010c\u0158\u00dd\u016e\u0164\u010e\u0147\u013d\u0102'
                        '\u0218\u021a\u0110\u01a0\u01af\u1ea0\u1ea2\u1ea4\u1ea6\u1ea8\u1eaa\u1eac\u1eae\u1eb0'
                        '\u1eb2\u1eb4\u1eb6\u1eb8\u1eba\u1ebc\u1ebe\u1ec0\u1ec2\u1ec4\u1ec6\u1ec8\u1eca\u1ecc'
                        '\u1ece\u1ed0\u1ed2\u1ed4\u1ed6\u1ed8\u1eda\u1edc\u1ede\u1ee0\u1ee2\u1ee4\u1ee6\u1ee8'
                        '\u1eea\u1eec\u1eee\u1ef0\u1ef2\u1ef4\u1ef6\u1ef8\u00cc\u00d0\u00d2\u00ec\u00f0\u00f2'
                        '\u00ff\u0100\u0101\u0108\u0109\u010a\u010b\u0112\u0113\u0114\u0115\u0116\u0117\u011a'
                        '\u011b\u011c\u011d\u011e\u011f\u0120\u0121\u0122\u0123\u0124\u0125\u0126\u0127\u0128'
                        '\u0129\u012a\u012b\u012c\u012d\u012e\u012f\u0130\u0131\u0134\u0135\u0136\u0137\u0139'
                        '\u013a\u013b\u013c\u013f\u0140\u0145\u0146\u014c\u014d\u014e\u014f\u0154\u0155\u0156'
                        '\u0157\u015c\u015d\u015e\u015f\u0162\u0163\u0166\u0167\u0168\u0169\u016a\u016b\u016c'
                        '\u016d\u0172\u0173\u0174\u0175\u0176\u0177\u0178\u017f\u0180\u01b5\u01b6\u01cd\u01ce'
                        '\u01cf\u01d0\u01d1\u01d2\u01d3\u01d4\u01d5\u01d6\u01d7\u01d8\u01d9\u01da\u01db\u01dc'
                        '\u01de\u01df\u01e0\u01e1\u01e4\u01e5\u01e6\u01e7\u01e8\u01e9\u01ea\u01eb\u01ec\u01ed'
                        '\u01f0\u01f4\u01f5\u01f8\u01f9\u01fa\u01fb\u01fe\u01ff\u0200\u0201\u0202\u0203\u0204'
                        '\u0205\u0206\u0207\u0208\u0209\u020a\u020b\u020c\u020d\u020e\u020f\u0210\u0211\u0212'
                        '\u0213\u0214\u0215\u0216\u0217\u021e\u021f\u0226\u0227\u0228\u0229\u022a\u022b\u022c'
                        '\u022d\u022e\u022f\u0230\u0231\u0232\u0233\u0243\u1e00\u1e01\u1e02\u1e03\u1e04\u1e05'
                        '\u1e06\u1e07\u1e08\u1e09\u1e0a\u1e0b\u1e0c\u1e0d\u1e0e\u1e0f\u1e10\u1e11\u1e12\u1e13'
                        '\u1e14\u1e15\u1e16\u1e17\u1e18\u1e19\u1e1a\u1e1b\u1e1c\u1e1d\u1e1e\u1e1f\u1e20\u1e21'
                        '\u1e22\u1e23\u1e24\u1e25\u1e26\u1e27\u1e28\u1e29\u1e2a\u1e2b\u1e2c\u1e2d\u1e2e\u1e2f'
                        '\u1e30\u1e31\u1e32\u1e33\u1e34\u1e35\u1e36\u1e37\u1e38\u1e39\u1e3a\u1e3b\u1e3c\u1e3d'
                        '\u1e3e\u1e3f\u1e40\u1e41\u1e42\u1e43\u1e44\u1e45\u1e46\u1e47\u1e48\u1e49\u1e4a\u1e4b'
                        '\u1e4c\u1e4d\u1e4e\u1e4f\u1e50\u1e51\u1e52\u1e53\u1e54\u1e55\u1e56\u1e57\u1e58\u1e59'
                        '\u1e5a\u1e5b\u1e5c\u1e5d\u1e5e\u1e5f\u1e60\u1e61\u1e62\u1e63\u1e64\u1e65\u1e66\u1e67'
                        '\u1e68\u1e69\u1e6a\u1e6b\u1e6c\u1e6d\u1e6e\u1e6f\u1e70\u1e71\u1e72\u1e73\u1e74\u1e75'
                        '\u1e76\u1e77\u1e78\u1e79\u1e7a\u1e7b\u1e7c\u1e7d\u1e7e\u1e7f\u1e80\u1e81\u1e82\u1e83'
                        '\u1e84\u1e85\u1e86\u1e87\u1e88\u1e89\u1e8a\u1e8b\u1e8c\u1e8d\u1e8e\u1e8f\u1e90\u1e91'
                        '\u1e92\u1e93\u1e94\u1e95\u1e96\u1e97\u1e98\u1e99\u1e9b\u1e9e',
                        E'eeaceouaiueiuoanaiouaoaolscnzzaeouzscryutdnlastdouaaaaaaaaaaaaeeeeeeeeiioooooooooooo'
                        'uuuuuuuyyyyEEACEOUAIUEIUOANAIOUAOAOLSCNZZAEOUZSCRYUTDNLASTDOUAAAAAAAAAAAAEEEEEEEEIIO'
                        'OOOOOOOOOOOUUUUUUUYYYYIDOidoyAaCcCcEeEeEeEeGgGgGgGgHhHhIiIiIiIiIiJjKkLlLlLlNnOoOoRrR'
                        'rSsSsTtTtUuUuUuUuWwYyYsbZzAaIiOoUuUuUuUuUuAaAaGgGgKkOoOojGgNnAaOoAaAaEeEeIiIiOoOoRrR'
                        'rUuUuHhAaEeOoOoOoOoYyBAaBbBbBbCcDdDdDdDdDdEeEeEeEeEeFfGgHhHhHhHhHhIiIiKkKkKkLlLlLlLl'
                        'MmMmMmNnNnNnNnOoOoOoOoPpPpRrRrRrRrSsSsSsSsSsTtTtTtTtUuUuUuUuUuVvVvWwWwWwWwWwXxXxYyZz'
                        'ZzZzhtwys\u00df'),
                '' ORDER BY p.n)
            FROM regexp_matches(wide, '([^\u00c0-\u024f\u1e00-\u1eff]*)([\u00c0-\u024f\u1e00-\u1eff]*)', 'g')
                 WITH ORDINALITY AS p(m, n))
            ELSE wide END,
        '[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\u0300-\u036f\ufe00-\ufe0f\u20d0-\u20ff]+', '', 'g'),
    '[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]', ' ', 'g')
FROM (SELECT CASE WHEN content ~ '[\uff01-\uff5e\u3000]'
    THEN translate(content,
                   E'\uff01\uff02\uff03\uff04\uff05\uff06\uff07\uff08\uff09\uff0a\uff0b\uff0c\uff0d\uff0e\uff0f\uff10\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff19\uff1a\uff1b\uff1c\uff1d\uff1e\uff1f\uff20\uff21\uff22\uff23\uff24\uff25\uff26\uff27\uff28\uff29\uff2a\uff2b\uff2c\uff2d\uff2e\uff2f\uff30\uff31\uff32\uff33\uff34\uff35\uff36\uff37\uff38\uff39\uff3a\uff3b\uff3c\uff3d\uff3e\uff3f\uff40\uff41\uff42\uff43\uff44\uff45\uff46\uff47\uff48\uff49\uff4a\uff4b\uff4c\uff4d\uff4e\uff4f\uff50\uff51\uff52\uff53\uff54\uff55\uff56\uff57\uff58\uff59\uff5a\uff5b\uff5c\uff5d\uff5e\u3000',
                   '!"#$%&''()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\]^_`abcdefghijklmnopqrstuvwxyz{|}~ ')
    ELSE content END OFFSET 0) AS w(wide)  -- OFFSET 0: the subquery is not pulled up, so the
    -- full-width translate runs once (not once for each mention of `wide`)
$$;
