-- Search leaves out the Arabic tatweel and the Quranic annotation marks, in records, labels
-- and metadata values, as the query does (search10: "كتب" did not find "كـتـب", the word
-- stretched by the kashida, nor "فيه" the Quranic "فِيهِۦ", nor "محمد" "محمدؐ", nor the
-- reverse; 0048 left out the harakat only).
--
-- 1. `stello_search_text(text)`, the one normalisation of a searched text (0035, 0038,
--    0041-0045, 0048), also removes the tatweel (U+0640: a letter to Unicode, Lm, so a
--    stretched word was a word of its own, 'كـتـب'), the honorific signs and small letters
--    above (U+0610-U+061A) and the Quranic marks U+06D6-U+06ED (pause marks, small high and
--    low letters, the end of ayah, the rub el hizb, the place of sajdah, the stops), as 0048
--    removes the harakat: the same step, its two character classes grown by these three
--    ranges (query.py `QURANIC_MARKS`), so a text holding none of 0048's characters nor these
--    costs what it cost under 0048 (one regular expression test; bench/bench_search_text.py
--    times both). `normalise` in storage_service/search/query.py removes them from a query
--    (in `MARKS`), and the highlighter reads a word across them, marking the word as written;
--    a test compares this function with `normalise` over each of these characters
--    (tests/storage/search/test_search_tatweel.py). Everything else of 0048's body (0045's
--    body kept whole in it) is unchanged. A text of ASCII only still takes 0046's path.
-- 2. Labels: `sessions_label_search` is built again, as 0048 built it. Metadata values: the
--    rows holding one of these characters are written again (their value unchanged).
--    Records: the storage service's search backfill walks every space again from its first
--    record (its prefilter, backfill_repository.py REWRITE, takes the rows holding one of
--    these characters too).
--
-- The function keeps its name (stello/distribution_plan.py lists it for Citus: the new body
-- reaches every node).

CREATE OR REPLACE FUNCTION stello_search_text(content text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT CASE WHEN searched ~ '[\u0401\u0451\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7\u0610-\u061a\u0640\u064b-\u065f\u0670\u06d6-\u06ed]'
    THEN translate(regexp_replace(searched, '[\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7\u0610-\u061a\u0640\u064b-\u065f\u0670\u06d6-\u06ed]+',
                                   '', 'g'), E'\u0451\u0401', E'\u0435\u0435')
    ELSE searched END
FROM (
    SELECT CASE WHEN folded ~ '[\u00c6\u00de\u0132\u014a\u0152\u0181-\u0182\u0184\u0186-\u0187\u0189-\u018b'
                              '\u018e-\u0191\u0193-\u0194\u0196-\u0198\u019c-\u019d\u019f\u01a2\u01a4\u01a6-\u01a7'
                              '\u01a9\u01ac\u01ae\u01b1-\u01b3\u01b7-\u01b8\u01bc\u01c4-\u01c5\u01c7-\u01c8'
                              '\u01ca-\u01cb\u01e2\u01ee\u01f1-\u01f2\u01f6-\u01f7\u01fc\u021c\u0220\u0222\u0224'
                              '\u023a-\u023b\u023d-\u023e\u0241\u0244-\u0246\u0248\u024a\u024c\u024e\u0370\u0372'
                              '\u0376\u037f\u0386\u0388-\u038a\u038c\u038e-\u038f\u0391-\u03a1\u03a3-\u03ab\u03c2'
                              '\u03cf\u03d8\u03da\u03dc\u03de\u03e0\u03e2\u03e4\u03e6\u03e8\u03ea\u03ec\u03ee\u03f4'
                              '\u03f7\u03f9-\u03fa\u03fd-\u042f\u0460\u0462\u0464\u0466\u0468\u046a\u046c\u046e\u0470'
                              '\u0472\u0474\u0476\u0478\u047a\u047c\u047e\u0480\u048a\u048c\u048e\u0490\u0492\u0494'
                              '\u0496\u0498\u049a\u049c\u049e\u04a0\u04a2\u04a4\u04a6\u04a8\u04aa\u04ac\u04ae\u04b0'
                              '\u04b2\u04b4\u04b6\u04b8\u04ba\u04bc\u04be\u04c0-\u04c1\u04c3\u04c5\u04c7\u04c9\u04cb'
                              '\u04cd\u04d0\u04d2\u04d4\u04d6\u04d8\u04da\u04dc\u04de\u04e0\u04e2\u04e4\u04e6\u04e8'
                              '\u04ea\u04ec\u04ee\u04f0\u04f2\u04f4\u04f6\u04f8\u04fa\u04fc\u04fe\u0500\u0502\u0504'
                              '\u0506\u0508\u050a\u050c\u050e\u0510\u0512\u0514\u0516\u0518\u051a\u051c\u051e\u0520'
                              '\u0522\u0524\u0526\u0528\u052a\u052c\u052e\u0531-\u0556\u10a0-\u10c5\u10c7\u10cd'
                              '\u13a0-\u13f5\u1c90-\u1cba\u1cbd-\u1cbf\u1e9e\u1efa\u1efc\u1efe\u1f08-\u1f0f'
                              '\u1f18-\u1f1d\u1f28-\u1f2f\u1f38-\u1f3f\u1f48-\u1f4d\u1f59\u1f5b\u1f5d\u1f5f'
                              '\u1f68-\u1f6f\u1f88-\u1f8f\u1f98-\u1f9f\u1fa8-\u1faf\u1fb8-\u1fbc\u1fc8-\u1fcc'
                              '\u1fd8-\u1fdb\u1fe8-\u1fec\u1ff8-\u1ffc\u2126\u212a-\u212b\u2132\u2160-\u216f\u2183'
                              '\u24b6-\u24cf\u2c00-\u2c2f\u2c60\u2c62-\u2c64\u2c67\u2c69\u2c6b\u2c6d-\u2c70\u2c72'
                              '\u2c75\u2c7e-\u2c80\u2c82\u2c84\u2c86\u2c88\u2c8a\u2c8c\u2c8e\u2c90\u2c92\u2c94\u2c96'
                              '\u2c98\u2c9a\u2c9c\u2c9e\u2ca0\u2ca2\u2ca4\u2ca6\u2ca8\u2caa\u2cac\u2cae\u2cb0\u2cb2'
                              '\u2cb4\u2cb6\u2cb8\u2cba\u2cbc\u2cbe\u2cc0\u2cc2\u2cc4\u2cc6\u2cc8\u2cca\u2ccc\u2cce'
                              '\u2cd0\u2cd2\u2cd4\u2cd6\u2cd8\u2cda\u2cdc\u2cde\u2ce0\u2ce2\u2ceb\u2ced\u2cf2\ua640'
                              '\ua642\ua644\ua646\ua648\ua64a\ua64c\ua64e\ua650\ua652\ua654\ua656\ua658\ua65a\ua65c'
                              '\ua65e\ua660\ua662\ua664\ua666\ua668\ua66a\ua66c\ua680\ua682\ua684\ua686\ua688\ua68a'
                              '\ua68c\ua68e\ua690\ua692\ua694\ua696\ua698\ua69a\ua722\ua724\ua726\ua728\ua72a\ua72c'
                              '\ua72e\ua732\ua734\ua736\ua738\ua73a\ua73c\ua73e\ua740\ua742\ua744\ua746\ua748\ua74a'
                              '\ua74c\ua74e\ua750\ua752\ua754\ua756\ua758\ua75a\ua75c\ua75e\ua760\ua762\ua764\ua766'
                              '\ua768\ua76a\ua76c\ua76e\ua779\ua77b\ua77d-\ua77e\ua780\ua782\ua784\ua786\ua78b\ua78d'
                              '\ua790\ua792\ua796\ua798\ua79a\ua79c\ua79e\ua7a0\ua7a2\ua7a4\ua7a6\ua7a8\ua7aa-\ua7ae'
                              '\ua7b0-\ua7b4\ua7b6\ua7b8\ua7ba\ua7bc\ua7be\ua7c0\ua7c2\ua7c4-\ua7c7\ua7c9\ua7d0\ua7d6'
                              '\ua7d8\ua7f5\U00010400-\U00010427\U000104b0-\U000104d3\U00010570-\U0001057a'
                              '\U0001057c-\U0001058a\U0001058c-\U00010592\U00010594-\U00010595\U00010c80-\U00010cb2'
                              '\U000118a0-\U000118bf\U00016e40-\U00016e5f\U0001e900-\U0001e921]' THEN (
        SELECT string_agg(
            p.m[1]
                || translate(p.m[2],
                    E'\u0410\u0411\u0412\u0413\u0414\u0415\u0416\u0417\u0418\u0419\u041a\u041b\u041c\u041d'
                    '\u041e\u041f\u0420\u0421\u0422\u0423\u0424\u0425\u0426\u0427\u0428\u0429\u042a\u042b'
                    '\u042c\u042d\u042e\u042f\u0400\u0401\u0402\u0403\u0404\u0405\u0406\u0407\u0408\u0409'
                    '\u040a\u040b\u040c\u040d\u040e\u040f\u0460\u0462\u0464\u0466\u0468\u046a\u046c\u046e'
                    '\u0470\u0472\u0474\u0476\u0478\u047a\u047c\u047e\u0480\u048a\u048c\u048e\u0490\u0492'
                    '\u0494\u0496\u0498\u049a\u049c\u049e\u04a0\u04a2\u04a4\u04a6\u04a8\u04aa\u04ac\u04ae'
                    '\u04b0\u04b2\u04b4\u04b6\u04b8\u04ba\u04bc\u04be\u04c0\u04c1\u04c3\u04c5\u04c7\u04c9'
                    '\u04cb\u04cd\u04d0\u04d2\u04d4\u04d6\u04d8\u04da\u04dc\u04de\u04e0\u04e2\u04e4\u04e6'
                    '\u04e8\u04ea\u04ec\u04ee\u04f0\u04f2\u04f4\u04f6\u04f8\u04fa\u04fc\u04fe\u0500\u0502'
                    '\u0504\u0506\u0508\u050a\u050c\u050e\u0510\u0512\u0514\u0516\u0518\u051a\u051c\u051e'
                    '\u0520\u0522\u0524\u0526\u0528\u052a\u052c\u052e\ua640\ua642\ua644\ua646\ua648\ua64a'
                    '\ua64c\ua64e\ua650\ua652\ua654\ua656\ua658\ua65a\ua65c\ua65e\ua660\ua662\ua664\ua666'
                    '\ua668\ua66a\ua66c\ua680\ua682\ua684\ua686\ua688\ua68a\ua68c\ua68e\ua690\ua692\ua694'
                    '\ua696\ua698\ua69a',
                    E'\u0430\u0431\u0432\u0433\u0434\u0435\u0436\u0437\u0438\u0439\u043a\u043b\u043c\u043d'
                    '\u043e\u043f\u0440\u0441\u0442\u0443\u0444\u0445\u0446\u0447\u0448\u0449\u044a\u044b'
                    '\u044c\u044d\u044e\u044f\u0450\u0451\u0452\u0453\u0454\u0455\u0456\u0457\u0458\u0459'
                    '\u045a\u045b\u045c\u045d\u045e\u045f\u0461\u0463\u0465\u0467\u0469\u046b\u046d\u046f'
                    '\u0471\u0473\u0475\u0477\u0479\u047b\u047d\u047f\u0481\u048b\u048d\u048f\u0491\u0493'
                    '\u0495\u0497\u0499\u049b\u049d\u049f\u04a1\u04a3\u04a5\u04a7\u04a9\u04ab\u04ad\u04af'
                    '\u04b1\u04b3\u04b5\u04b7\u04b9\u04bb\u04bd\u04bf\u04cf\u04c2\u04c4\u04c6\u04c8\u04ca'
                    '\u04cc\u04ce\u04d1\u04d3\u04d5\u04d7\u04d9\u04db\u04dd\u04df\u04e1\u04e3\u04e5\u04e7'
                    '\u04e9\u04eb\u04ed\u04ef\u04f1\u04f3\u04f5\u04f7\u04f9\u04fb\u04fd\u04ff\u0501\u0503'
                    '\u0505\u0507\u0509\u050b\u050d\u050f\u0511\u0513\u0515\u0517\u0519\u051b\u051d\u051f'
                    '\u0521\u0523\u0525\u0527\u0529\u052b\u052d\u052f\ua641\ua643\ua645\ua647\ua649\ua64b'
                    '\ua64d\ua64f\ua651\ua653\ua655\ua657\ua659\ua65b\ua65d\ua65f\ua661\ua663\ua665\ua667'
                    '\ua669\ua66b\ua66d\ua681\ua683\ua685\ua687\ua689\ua68b\ua68d\ua68f\ua691\ua693\ua695'
                    '\ua697\ua699\ua69b')
                || translate(p.m[3],
                    E'\u0391\u0392\u0393\u0394\u0395\u0396\u0397\u0398\u0399\u039a\u039b\u039c\u039d\u039e'
                    '\u039f\u03a0\u03a1\u03a3\u03a4\u03a5\u03a6\u03a7\u03a8\u03a9\u0386\u0388\u0389\u038a'
                    '\u038c\u038e\u038f\u03c2\u0370\u0372\u0376\u037f\u03aa\u03ab\u03cf\u03d8\u03da\u03dc'
                    '\u03de\u03e0\u03e2\u03e4\u03e6\u03e8\u03ea\u03ec\u03ee\u03f4\u03f7\u03f9\u03fa\u03fd'
                    '\u03fe\u03ff\u1f08\u1f09\u1f0a\u1f0b\u1f0c\u1f0d\u1f0e\u1f0f\u1f18\u1f19\u1f1a\u1f1b'
                    '\u1f1c\u1f1d\u1f28\u1f29\u1f2a\u1f2b\u1f2c\u1f2d\u1f2e\u1f2f\u1f38\u1f39\u1f3a\u1f3b'
                    '\u1f3c\u1f3d\u1f3e\u1f3f\u1f48\u1f49\u1f4a\u1f4b\u1f4c\u1f4d\u1f59\u1f5b\u1f5d\u1f5f'
                    '\u1f68\u1f69\u1f6a\u1f6b\u1f6c\u1f6d\u1f6e\u1f6f\u1f88\u1f89\u1f8a\u1f8b\u1f8c\u1f8d'
                    '\u1f8e\u1f8f\u1f98\u1f99\u1f9a\u1f9b\u1f9c\u1f9d\u1f9e\u1f9f\u1fa8\u1fa9\u1faa\u1fab'
                    '\u1fac\u1fad\u1fae\u1faf\u1fb8\u1fb9\u1fba\u1fbb\u1fbc\u1fc8\u1fc9\u1fca\u1fcb\u1fcc'
                    '\u1fd8\u1fd9\u1fda\u1fdb\u1fe8\u1fe9\u1fea\u1feb\u1fec\u1ff8\u1ff9\u1ffa\u1ffb\u1ffc',
                    E'\u03b1\u03b2\u03b3\u03b4\u03b5\u03b6\u03b7\u03b8\u03b9\u03ba\u03bb\u03bc\u03bd\u03be'
                    '\u03bf\u03c0\u03c1\u03c3\u03c4\u03c5\u03c6\u03c7\u03c8\u03c9\u03ac\u03ad\u03ae\u03af'
                    '\u03cc\u03cd\u03ce\u03c3\u0371\u0373\u0377\u03f3\u03ca\u03cb\u03d7\u03d9\u03db\u03dd'
                    '\u03df\u03e1\u03e3\u03e5\u03e7\u03e9\u03eb\u03ed\u03ef\u03b8\u03f8\u03f2\u03fb\u037b'
                    '\u037c\u037d\u1f00\u1f01\u1f02\u1f03\u1f04\u1f05\u1f06\u1f07\u1f10\u1f11\u1f12\u1f13'
                    '\u1f14\u1f15\u1f20\u1f21\u1f22\u1f23\u1f24\u1f25\u1f26\u1f27\u1f30\u1f31\u1f32\u1f33'
                    '\u1f34\u1f35\u1f36\u1f37\u1f40\u1f41\u1f42\u1f43\u1f44\u1f45\u1f51\u1f53\u1f55\u1f57'
                    '\u1f60\u1f61\u1f62\u1f63\u1f64\u1f65\u1f66\u1f67\u1f80\u1f81\u1f82\u1f83\u1f84\u1f85'
                    '\u1f86\u1f87\u1f90\u1f91\u1f92\u1f93\u1f94\u1f95\u1f96\u1f97\u1fa0\u1fa1\u1fa2\u1fa3'
                    '\u1fa4\u1fa5\u1fa6\u1fa7\u1fb0\u1fb1\u1f70\u1f71\u1fb3\u1f72\u1f73\u1f74\u1f75\u1fc3'
                    '\u1fd0\u1fd1\u1f76\u1f77\u1fe0\u1fe1\u1f7a\u1f7b\u1fe5\u1f78\u1f79\u1f7c\u1f7d\u1ff3')
                || translate(p.m[4],
                    E'\u00c6\u00de\u0132\u014a\u0152\u0181\u0182\u0184\u0186\u0187\u0189\u018a\u018b\u018e'
                    '\u018f\u0190\u0191\u0193\u0194\u0196\u0197\u0198\u019c\u019d\u019f\u01a2\u01a4\u01a6'
                    '\u01a7\u01a9\u01ac\u01ae\u01b1\u01b2\u01b3\u01b7\u01b8\u01bc\u01c4\u01c5\u01c7\u01c8'
                    '\u01ca\u01cb\u01e2\u01ee\u01f1\u01f2\u01f6\u01f7\u01fc\u021c\u0220\u0222\u0224\u023a'
                    '\u023b\u023d\u023e\u0241\u0244\u0245\u0246\u0248\u024a\u024c\u024e\u0531\u0532\u0533'
                    '\u0534\u0535\u0536\u0537\u0538\u0539\u053a\u053b\u053c\u053d\u053e\u053f\u0540\u0541'
                    '\u0542\u0543\u0544\u0545\u0546\u0547\u0548\u0549\u054a\u054b\u054c\u054d\u054e\u054f'
                    '\u0550\u0551\u0552\u0553\u0554\u0555\u0556\u10a0\u10a1\u10a2\u10a3\u10a4\u10a5\u10a6'
                    '\u10a7\u10a8\u10a9\u10aa\u10ab\u10ac\u10ad\u10ae\u10af\u10b0\u10b1\u10b2\u10b3\u10b4'
                    '\u10b5\u10b6\u10b7\u10b8\u10b9\u10ba\u10bb\u10bc\u10bd\u10be\u10bf\u10c0\u10c1\u10c2'
                    '\u10c3\u10c4\u10c5\u10c7\u10cd\u13a0\u13a1\u13a2\u13a3\u13a4\u13a5\u13a6\u13a7\u13a8'
                    '\u13a9\u13aa\u13ab\u13ac\u13ad\u13ae\u13af\u13b0\u13b1\u13b2\u13b3\u13b4\u13b5\u13b6'
                    '\u13b7\u13b8\u13b9\u13ba\u13bb\u13bc\u13bd\u13be\u13bf\u13c0\u13c1\u13c2\u13c3\u13c4'
                    '\u13c5\u13c6\u13c7\u13c8\u13c9\u13ca\u13cb\u13cc\u13cd\u13ce\u13cf\u13d0\u13d1\u13d2'
                    '\u13d3\u13d4\u13d5\u13d6\u13d7\u13d8\u13d9\u13da\u13db\u13dc\u13dd\u13de\u13df\u13e0'
                    '\u13e1\u13e2\u13e3\u13e4\u13e5\u13e6\u13e7\u13e8\u13e9\u13ea\u13eb\u13ec\u13ed\u13ee'
                    '\u13ef\u13f0\u13f1\u13f2\u13f3\u13f4\u13f5\u1c90\u1c91\u1c92\u1c93\u1c94\u1c95\u1c96'
                    '\u1c97\u1c98\u1c99\u1c9a\u1c9b\u1c9c\u1c9d\u1c9e\u1c9f\u1ca0\u1ca1\u1ca2\u1ca3\u1ca4'
                    '\u1ca5\u1ca6\u1ca7\u1ca8\u1ca9\u1caa\u1cab\u1cac\u1cad\u1cae\u1caf\u1cb0\u1cb1\u1cb2'
                    '\u1cb3\u1cb4\u1cb5\u1cb6\u1cb7\u1cb8\u1cb9\u1cba\u1cbd\u1cbe\u1cbf\u1e9e\u1efa\u1efc'
                    '\u1efe\u2126\u212a\u212b\u2132\u2160\u2161\u2162\u2163\u2164\u2165\u2166\u2167\u2168'
                    '\u2169\u216a\u216b\u216c\u216d\u216e\u216f\u2183\u24b6\u24b7\u24b8\u24b9\u24ba\u24bb'
                    '\u24bc\u24bd\u24be\u24bf\u24c0\u24c1\u24c2\u24c3\u24c4\u24c5\u24c6\u24c7\u24c8\u24c9'
                    '\u24ca\u24cb\u24cc\u24cd\u24ce\u24cf\u2c00\u2c01\u2c02\u2c03\u2c04\u2c05\u2c06\u2c07'
                    '\u2c08\u2c09\u2c0a\u2c0b\u2c0c\u2c0d\u2c0e\u2c0f\u2c10\u2c11\u2c12\u2c13\u2c14\u2c15'
                    '\u2c16\u2c17\u2c18\u2c19\u2c1a\u2c1b\u2c1c\u2c1d\u2c1e\u2c1f\u2c20\u2c21\u2c22\u2c23'
                    '\u2c24\u2c25\u2c26\u2c27\u2c28\u2c29\u2c2a\u2c2b\u2c2c\u2c2d\u2c2e\u2c2f\u2c60\u2c62'
                    '\u2c63\u2c64\u2c67\u2c69\u2c6b\u2c6d\u2c6e\u2c6f\u2c70\u2c72\u2c75\u2c7e\u2c7f\u2c80'
                    '\u2c82\u2c84\u2c86\u2c88\u2c8a\u2c8c\u2c8e\u2c90\u2c92\u2c94\u2c96\u2c98\u2c9a\u2c9c'
                    '\u2c9e\u2ca0\u2ca2\u2ca4\u2ca6\u2ca8\u2caa\u2cac\u2cae\u2cb0\u2cb2\u2cb4\u2cb6\u2cb8'
                    '\u2cba\u2cbc\u2cbe\u2cc0\u2cc2\u2cc4\u2cc6\u2cc8\u2cca\u2ccc\u2cce\u2cd0\u2cd2\u2cd4'
                    '\u2cd6\u2cd8\u2cda\u2cdc\u2cde\u2ce0\u2ce2\u2ceb\u2ced\u2cf2\ua722\ua724\ua726\ua728'
                    '\ua72a\ua72c\ua72e\ua732\ua734\ua736\ua738\ua73a\ua73c\ua73e\ua740\ua742\ua744\ua746'
                    '\ua748\ua74a\ua74c\ua74e\ua750\ua752\ua754\ua756\ua758\ua75a\ua75c\ua75e\ua760\ua762'
                    '\ua764\ua766\ua768\ua76a\ua76c\ua76e\ua779\ua77b\ua77d\ua77e\ua780\ua782\ua784\ua786'
                    '\ua78b\ua78d\ua790\ua792\ua796\ua798\ua79a\ua79c\ua79e\ua7a0\ua7a2\ua7a4\ua7a6\ua7a8'
                    '\ua7aa\ua7ab\ua7ac\ua7ad\ua7ae\ua7b0\ua7b1\ua7b2\ua7b3\ua7b4\ua7b6\ua7b8\ua7ba\ua7bc'
                    '\ua7be\ua7c0\ua7c2\ua7c4\ua7c5\ua7c6\ua7c7\ua7c9\ua7d0\ua7d6\ua7d8\ua7f5\U00010400'
                    '\U00010401\U00010402\U00010403\U00010404\U00010405\U00010406\U00010407\U00010408'
                    '\U00010409\U0001040a\U0001040b\U0001040c\U0001040d\U0001040e\U0001040f\U00010410'
                    '\U00010411\U00010412\U00010413\U00010414\U00010415\U00010416\U00010417\U00010418'
                    '\U00010419\U0001041a\U0001041b\U0001041c\U0001041d\U0001041e\U0001041f\U00010420'
                    '\U00010421\U00010422\U00010423\U00010424\U00010425\U00010426\U00010427\U000104b0'
                    '\U000104b1\U000104b2\U000104b3\U000104b4\U000104b5\U000104b6\U000104b7\U000104b8'
                    '\U000104b9\U000104ba\U000104bb\U000104bc\U000104bd\U000104be\U000104bf\U000104c0'
                    '\U000104c1\U000104c2\U000104c3\U000104c4\U000104c5\U000104c6\U000104c7\U000104c8'
                    '\U000104c9\U000104ca\U000104cb\U000104cc\U000104cd\U000104ce\U000104cf\U000104d0'
                    '\U000104d1\U000104d2\U000104d3\U00010570\U00010571\U00010572\U00010573\U00010574'
                    '\U00010575\U00010576\U00010577\U00010578\U00010579\U0001057a\U0001057c\U0001057d'
                    '\U0001057e\U0001057f\U00010580\U00010581\U00010582\U00010583\U00010584\U00010585'
                    '\U00010586\U00010587\U00010588\U00010589\U0001058a\U0001058c\U0001058d\U0001058e'
                    '\U0001058f\U00010590\U00010591\U00010592\U00010594\U00010595\U00010c80\U00010c81'
                    '\U00010c82\U00010c83\U00010c84\U00010c85\U00010c86\U00010c87\U00010c88\U00010c89'
                    '\U00010c8a\U00010c8b\U00010c8c\U00010c8d\U00010c8e\U00010c8f\U00010c90\U00010c91'
                    '\U00010c92\U00010c93\U00010c94\U00010c95\U00010c96\U00010c97\U00010c98\U00010c99'
                    '\U00010c9a\U00010c9b\U00010c9c\U00010c9d\U00010c9e\U00010c9f\U00010ca0\U00010ca1'
                    '\U00010ca2\U00010ca3\U00010ca4\U00010ca5\U00010ca6\U00010ca7\U00010ca8\U00010ca9'
                    '\U00010caa\U00010cab\U00010cac\U00010cad\U00010cae\U00010caf\U00010cb0\U00010cb1'
                    '\U00010cb2\U000118a0\U000118a1\U000118a2\U000118a3\U000118a4\U000118a5\U000118a6'
                    '\U000118a7\U000118a8\U000118a9\U000118aa\U000118ab\U000118ac\U000118ad\U000118ae'
                    '\U000118af\U000118b0\U000118b1\U000118b2\U000118b3\U000118b4\U000118b5\U000118b6'
                    '\U000118b7\U000118b8\U000118b9\U000118ba\U000118bb\U000118bc\U000118bd\U000118be'
                    '\U000118bf\U00016e40\U00016e41\U00016e42\U00016e43\U00016e44\U00016e45\U00016e46'
                    '\U00016e47\U00016e48\U00016e49\U00016e4a\U00016e4b\U00016e4c\U00016e4d\U00016e4e'
                    '\U00016e4f\U00016e50\U00016e51\U00016e52\U00016e53\U00016e54\U00016e55\U00016e56'
                    '\U00016e57\U00016e58\U00016e59\U00016e5a\U00016e5b\U00016e5c\U00016e5d\U00016e5e'
                    '\U00016e5f\U0001e900\U0001e901\U0001e902\U0001e903\U0001e904\U0001e905\U0001e906'
                    '\U0001e907\U0001e908\U0001e909\U0001e90a\U0001e90b\U0001e90c\U0001e90d\U0001e90e'
                    '\U0001e90f\U0001e910\U0001e911\U0001e912\U0001e913\U0001e914\U0001e915\U0001e916'
                    '\U0001e917\U0001e918\U0001e919\U0001e91a\U0001e91b\U0001e91c\U0001e91d\U0001e91e'
                    '\U0001e91f\U0001e920\U0001e921',
                    E'\u00e6\u00fe\u0133\u014b\u0153\u0253\u0183\u0185\u0254\u0188\u0256\u0257\u018c\u01dd'
                    '\u0259\u025b\u0192\u0260\u0263\u0269\u0268\u0199\u026f\u0272\u0275\u01a3\u01a5\u0280'
                    '\u01a8\u0283\u01ad\u0288\u028a\u028b\u01b4\u0292\u01b9\u01bd\u01c6\u01c6\u01c9\u01c9'
                    '\u01cc\u01cc\u01e3\u01ef\u01f3\u01f3\u0195\u01bf\u01fd\u021d\u019e\u0223\u0225\u2c65'
                    '\u023c\u019a\u2c66\u0242\u0289\u028c\u0247\u0249\u024b\u024d\u024f\u0561\u0562\u0563'
                    '\u0564\u0565\u0566\u0567\u0568\u0569\u056a\u056b\u056c\u056d\u056e\u056f\u0570\u0571'
                    '\u0572\u0573\u0574\u0575\u0576\u0577\u0578\u0579\u057a\u057b\u057c\u057d\u057e\u057f'
                    '\u0580\u0581\u0582\u0583\u0584\u0585\u0586\u2d00\u2d01\u2d02\u2d03\u2d04\u2d05\u2d06'
                    '\u2d07\u2d08\u2d09\u2d0a\u2d0b\u2d0c\u2d0d\u2d0e\u2d0f\u2d10\u2d11\u2d12\u2d13\u2d14'
                    '\u2d15\u2d16\u2d17\u2d18\u2d19\u2d1a\u2d1b\u2d1c\u2d1d\u2d1e\u2d1f\u2d20\u2d21\u2d22'
                    '\u2d23\u2d24\u2d25\u2d27\u2d2d\uab70\uab71\uab72\uab73\uab74\uab75\uab76\uab77\uab78'
                    '\uab79\uab7a\uab7b\uab7c\uab7d\uab7e\uab7f\uab80\uab81\uab82\uab83\uab84\uab85\uab86'
                    '\uab87\uab88\uab89\uab8a\uab8b\uab8c\uab8d\uab8e\uab8f\uab90\uab91\uab92\uab93\uab94'
                    '\uab95\uab96\uab97\uab98\uab99\uab9a\uab9b\uab9c\uab9d\uab9e\uab9f\uaba0\uaba1\uaba2'
                    '\uaba3\uaba4\uaba5\uaba6\uaba7\uaba8\uaba9\uabaa\uabab\uabac\uabad\uabae\uabaf\uabb0'
                    '\uabb1\uabb2\uabb3\uabb4\uabb5\uabb6\uabb7\uabb8\uabb9\uabba\uabbb\uabbc\uabbd\uabbe'
                    '\uabbf\u13f8\u13f9\u13fa\u13fb\u13fc\u13fd\u10d0\u10d1\u10d2\u10d3\u10d4\u10d5\u10d6'
                    '\u10d7\u10d8\u10d9\u10da\u10db\u10dc\u10dd\u10de\u10df\u10e0\u10e1\u10e2\u10e3\u10e4'
                    '\u10e5\u10e6\u10e7\u10e8\u10e9\u10ea\u10eb\u10ec\u10ed\u10ee\u10ef\u10f0\u10f1\u10f2'
                    '\u10f3\u10f4\u10f5\u10f6\u10f7\u10f8\u10f9\u10fa\u10fd\u10fe\u10ff\u00df\u1efb\u1efd'
                    '\u1eff\u03c9\u006b\u0061\u214e\u2170\u2171\u2172\u2173\u2174\u2175\u2176\u2177\u2178'
                    '\u2179\u217a\u217b\u217c\u217d\u217e\u217f\u2184\u24d0\u24d1\u24d2\u24d3\u24d4\u24d5'
                    '\u24d6\u24d7\u24d8\u24d9\u24da\u24db\u24dc\u24dd\u24de\u24df\u24e0\u24e1\u24e2\u24e3'
                    '\u24e4\u24e5\u24e6\u24e7\u24e8\u24e9\u2c30\u2c31\u2c32\u2c33\u2c34\u2c35\u2c36\u2c37'
                    '\u2c38\u2c39\u2c3a\u2c3b\u2c3c\u2c3d\u2c3e\u2c3f\u2c40\u2c41\u2c42\u2c43\u2c44\u2c45'
                    '\u2c46\u2c47\u2c48\u2c49\u2c4a\u2c4b\u2c4c\u2c4d\u2c4e\u2c4f\u2c50\u2c51\u2c52\u2c53'
                    '\u2c54\u2c55\u2c56\u2c57\u2c58\u2c59\u2c5a\u2c5b\u2c5c\u2c5d\u2c5e\u2c5f\u2c61\u026b'
                    '\u1d7d\u027d\u2c68\u2c6a\u2c6c\u0251\u0271\u0250\u0252\u2c73\u2c76\u023f\u0240\u2c81'
                    '\u2c83\u2c85\u2c87\u2c89\u2c8b\u2c8d\u2c8f\u2c91\u2c93\u2c95\u2c97\u2c99\u2c9b\u2c9d'
                    '\u2c9f\u2ca1\u2ca3\u2ca5\u2ca7\u2ca9\u2cab\u2cad\u2caf\u2cb1\u2cb3\u2cb5\u2cb7\u2cb9'
                    '\u2cbb\u2cbd\u2cbf\u2cc1\u2cc3\u2cc5\u2cc7\u2cc9\u2ccb\u2ccd\u2ccf\u2cd1\u2cd3\u2cd5'
                    '\u2cd7\u2cd9\u2cdb\u2cdd\u2cdf\u2ce1\u2ce3\u2cec\u2cee\u2cf3\ua723\ua725\ua727\ua729'
                    '\ua72b\ua72d\ua72f\ua733\ua735\ua737\ua739\ua73b\ua73d\ua73f\ua741\ua743\ua745\ua747'
                    '\ua749\ua74b\ua74d\ua74f\ua751\ua753\ua755\ua757\ua759\ua75b\ua75d\ua75f\ua761\ua763'
                    '\ua765\ua767\ua769\ua76b\ua76d\ua76f\ua77a\ua77c\u1d79\ua77f\ua781\ua783\ua785\ua787'
                    '\ua78c\u0265\ua791\ua793\ua797\ua799\ua79b\ua79d\ua79f\ua7a1\ua7a3\ua7a5\ua7a7\ua7a9'
                    '\u0266\u025c\u0261\u026c\u026a\u029e\u0287\u029d\uab53\ua7b5\ua7b7\ua7b9\ua7bb\ua7bd'
                    '\ua7bf\ua7c1\ua7c3\ua794\u0282\u1d8e\ua7c8\ua7ca\ua7d1\ua7d7\ua7d9\ua7f6\U00010428'
                    '\U00010429\U0001042a\U0001042b\U0001042c\U0001042d\U0001042e\U0001042f\U00010430'
                    '\U00010431\U00010432\U00010433\U00010434\U00010435\U00010436\U00010437\U00010438'
                    '\U00010439\U0001043a\U0001043b\U0001043c\U0001043d\U0001043e\U0001043f\U00010440'
                    '\U00010441\U00010442\U00010443\U00010444\U00010445\U00010446\U00010447\U00010448'
                    '\U00010449\U0001044a\U0001044b\U0001044c\U0001044d\U0001044e\U0001044f\U000104d8'
                    '\U000104d9\U000104da\U000104db\U000104dc\U000104dd\U000104de\U000104df\U000104e0'
                    '\U000104e1\U000104e2\U000104e3\U000104e4\U000104e5\U000104e6\U000104e7\U000104e8'
                    '\U000104e9\U000104ea\U000104eb\U000104ec\U000104ed\U000104ee\U000104ef\U000104f0'
                    '\U000104f1\U000104f2\U000104f3\U000104f4\U000104f5\U000104f6\U000104f7\U000104f8'
                    '\U000104f9\U000104fa\U000104fb\U00010597\U00010598\U00010599\U0001059a\U0001059b'
                    '\U0001059c\U0001059d\U0001059e\U0001059f\U000105a0\U000105a1\U000105a3\U000105a4'
                    '\U000105a5\U000105a6\U000105a7\U000105a8\U000105a9\U000105aa\U000105ab\U000105ac'
                    '\U000105ad\U000105ae\U000105af\U000105b0\U000105b1\U000105b3\U000105b4\U000105b5'
                    '\U000105b6\U000105b7\U000105b8\U000105b9\U000105bb\U000105bc\U00010cc0\U00010cc1'
                    '\U00010cc2\U00010cc3\U00010cc4\U00010cc5\U00010cc6\U00010cc7\U00010cc8\U00010cc9'
                    '\U00010cca\U00010ccb\U00010ccc\U00010ccd\U00010cce\U00010ccf\U00010cd0\U00010cd1'
                    '\U00010cd2\U00010cd3\U00010cd4\U00010cd5\U00010cd6\U00010cd7\U00010cd8\U00010cd9'
                    '\U00010cda\U00010cdb\U00010cdc\U00010cdd\U00010cde\U00010cdf\U00010ce0\U00010ce1'
                    '\U00010ce2\U00010ce3\U00010ce4\U00010ce5\U00010ce6\U00010ce7\U00010ce8\U00010ce9'
                    '\U00010cea\U00010ceb\U00010cec\U00010ced\U00010cee\U00010cef\U00010cf0\U00010cf1'
                    '\U00010cf2\U000118c0\U000118c1\U000118c2\U000118c3\U000118c4\U000118c5\U000118c6'
                    '\U000118c7\U000118c8\U000118c9\U000118ca\U000118cb\U000118cc\U000118cd\U000118ce'
                    '\U000118cf\U000118d0\U000118d1\U000118d2\U000118d3\U000118d4\U000118d5\U000118d6'
                    '\U000118d7\U000118d8\U000118d9\U000118da\U000118db\U000118dc\U000118dd\U000118de'
                    '\U000118df\U00016e60\U00016e61\U00016e62\U00016e63\U00016e64\U00016e65\U00016e66'
                    '\U00016e67\U00016e68\U00016e69\U00016e6a\U00016e6b\U00016e6c\U00016e6d\U00016e6e'
                    '\U00016e6f\U00016e70\U00016e71\U00016e72\U00016e73\U00016e74\U00016e75\U00016e76'
                    '\U00016e77\U00016e78\U00016e79\U00016e7a\U00016e7b\U00016e7c\U00016e7d\U00016e7e'
                    '\U00016e7f\U0001e922\U0001e923\U0001e924\U0001e925\U0001e926\U0001e927\U0001e928'
                    '\U0001e929\U0001e92a\U0001e92b\U0001e92c\U0001e92d\U0001e92e\U0001e92f\U0001e930'
                    '\U0001e931\U0001e932\U0001e933\U0001e934\U0001e935\U0001e936\U0001e937\U0001e938'
                    '\U0001e939\U0001e93a\U0001e93b\U0001e93c\U0001e93d\U0001e93e\U0001e93f\U0001e940'
                    '\U0001e941\U0001e942\U0001e943'),
            '' ORDER BY p.n)
        FROM regexp_matches(folded,
            '([^'
            '\u00c6\u00de\u0132\u014a\u0152\u0181-\u0182\u0184\u0186-\u0187\u0189-\u018b'
            '\u018e-\u0191\u0193-\u0194\u0196-\u0198\u019c-\u019d\u019f\u01a2\u01a4\u01a6-\u01a7'
            '\u01a9\u01ac\u01ae\u01b1-\u01b3\u01b7-\u01b8\u01bc\u01c4-\u01c5\u01c7-\u01c8'
            '\u01ca-\u01cb\u01e2\u01ee\u01f1-\u01f2\u01f6-\u01f7\u01fc\u021c\u0220\u0222\u0224'
            '\u023a-\u023b\u023d-\u023e\u0241\u0244-\u0246\u0248\u024a\u024c\u024e\u0370\u0372'
            '\u0376\u037f\u0386\u0388-\u038a\u038c\u038e-\u038f\u0391-\u03a1\u03a3-\u03ab\u03c2'
            '\u03cf\u03d8\u03da\u03dc\u03de\u03e0\u03e2\u03e4\u03e6\u03e8\u03ea\u03ec\u03ee\u03f4'
            '\u03f7\u03f9-\u03fa\u03fd-\u042f\u0460\u0462\u0464\u0466\u0468\u046a\u046c\u046e\u0470'
            '\u0472\u0474\u0476\u0478\u047a\u047c\u047e\u0480\u048a\u048c\u048e\u0490\u0492\u0494'
            '\u0496\u0498\u049a\u049c\u049e\u04a0\u04a2\u04a4\u04a6\u04a8\u04aa\u04ac\u04ae\u04b0'
            '\u04b2\u04b4\u04b6\u04b8\u04ba\u04bc\u04be\u04c0-\u04c1\u04c3\u04c5\u04c7\u04c9\u04cb'
            '\u04cd\u04d0\u04d2\u04d4\u04d6\u04d8\u04da\u04dc\u04de\u04e0\u04e2\u04e4\u04e6\u04e8'
            '\u04ea\u04ec\u04ee\u04f0\u04f2\u04f4\u04f6\u04f8\u04fa\u04fc\u04fe\u0500\u0502\u0504'
            '\u0506\u0508\u050a\u050c\u050e\u0510\u0512\u0514\u0516\u0518\u051a\u051c\u051e\u0520'
            '\u0522\u0524\u0526\u0528\u052a\u052c\u052e\u0531-\u0556\u10a0-\u10c5\u10c7\u10cd'
            '\u13a0-\u13f5\u1c90-\u1cba\u1cbd-\u1cbf\u1e9e\u1efa\u1efc\u1efe\u1f08-\u1f0f'
            '\u1f18-\u1f1d\u1f28-\u1f2f\u1f38-\u1f3f\u1f48-\u1f4d\u1f59\u1f5b\u1f5d\u1f5f'
            '\u1f68-\u1f6f\u1f88-\u1f8f\u1f98-\u1f9f\u1fa8-\u1faf\u1fb8-\u1fbc\u1fc8-\u1fcc'
            '\u1fd8-\u1fdb\u1fe8-\u1fec\u1ff8-\u1ffc\u2126\u212a-\u212b\u2132\u2160-\u216f\u2183'
            '\u24b6-\u24cf\u2c00-\u2c2f\u2c60\u2c62-\u2c64\u2c67\u2c69\u2c6b\u2c6d-\u2c70\u2c72'
            '\u2c75\u2c7e-\u2c80\u2c82\u2c84\u2c86\u2c88\u2c8a\u2c8c\u2c8e\u2c90\u2c92\u2c94\u2c96'
            '\u2c98\u2c9a\u2c9c\u2c9e\u2ca0\u2ca2\u2ca4\u2ca6\u2ca8\u2caa\u2cac\u2cae\u2cb0\u2cb2'
            '\u2cb4\u2cb6\u2cb8\u2cba\u2cbc\u2cbe\u2cc0\u2cc2\u2cc4\u2cc6\u2cc8\u2cca\u2ccc\u2cce'
            '\u2cd0\u2cd2\u2cd4\u2cd6\u2cd8\u2cda\u2cdc\u2cde\u2ce0\u2ce2\u2ceb\u2ced\u2cf2\ua640'
            '\ua642\ua644\ua646\ua648\ua64a\ua64c\ua64e\ua650\ua652\ua654\ua656\ua658\ua65a\ua65c'
            '\ua65e\ua660\ua662\ua664\ua666\ua668\ua66a\ua66c\ua680\ua682\ua684\ua686\ua688\ua68a'
            '\ua68c\ua68e\ua690\ua692\ua694\ua696\ua698\ua69a\ua722\ua724\ua726\ua728\ua72a\ua72c'
            '\ua72e\ua732\ua734\ua736\ua738\ua73a\ua73c\ua73e\ua740\ua742\ua744\ua746\ua748\ua74a'
            '\ua74c\ua74e\ua750\ua752\ua754\ua756\ua758\ua75a\ua75c\ua75e\ua760\ua762\ua764\ua766'
            '\ua768\ua76a\ua76c\ua76e\ua779\ua77b\ua77d-\ua77e\ua780\ua782\ua784\ua786\ua78b\ua78d'
            '\ua790\ua792\ua796\ua798\ua79a\ua79c\ua79e\ua7a0\ua7a2\ua7a4\ua7a6\ua7a8\ua7aa-\ua7ae'
            '\ua7b0-\ua7b4\ua7b6\ua7b8\ua7ba\ua7bc\ua7be\ua7c0\ua7c2\ua7c4-\ua7c7\ua7c9\ua7d0\ua7d6'
            '\ua7d8\ua7f5\U00010400-\U00010427\U000104b0-\U000104d3\U00010570-\U0001057a'
            '\U0001057c-\U0001058a\U0001058c-\U00010592\U00010594-\U00010595\U00010c80-\U00010cb2'
            '\U000118a0-\U000118bf\U00016e40-\U00016e5f\U0001e900-\U0001e921'
            ']*)(['
            '\u0400-\u042f\u0460\u0462\u0464\u0466\u0468\u046a\u046c\u046e\u0470\u0472\u0474\u0476'
            '\u0478\u047a\u047c\u047e\u0480\u048a\u048c\u048e\u0490\u0492\u0494\u0496\u0498\u049a'
            '\u049c\u049e\u04a0\u04a2\u04a4\u04a6\u04a8\u04aa\u04ac\u04ae\u04b0\u04b2\u04b4\u04b6'
            '\u04b8\u04ba\u04bc\u04be\u04c0-\u04c1\u04c3\u04c5\u04c7\u04c9\u04cb\u04cd\u04d0\u04d2'
            '\u04d4\u04d6\u04d8\u04da\u04dc\u04de\u04e0\u04e2\u04e4\u04e6\u04e8\u04ea\u04ec\u04ee'
            '\u04f0\u04f2\u04f4\u04f6\u04f8\u04fa\u04fc\u04fe\u0500\u0502\u0504\u0506\u0508\u050a'
            '\u050c\u050e\u0510\u0512\u0514\u0516\u0518\u051a\u051c\u051e\u0520\u0522\u0524\u0526'
            '\u0528\u052a\u052c\u052e\ua640\ua642\ua644\ua646\ua648\ua64a\ua64c\ua64e\ua650\ua652'
            '\ua654\ua656\ua658\ua65a\ua65c\ua65e\ua660\ua662\ua664\ua666\ua668\ua66a\ua66c\ua680'
            '\ua682\ua684\ua686\ua688\ua68a\ua68c\ua68e\ua690\ua692\ua694\ua696\ua698\ua69a'
            ']*)(['
            '\u0370\u0372\u0376\u037f\u0386\u0388-\u038a\u038c\u038e-\u038f\u0391-\u03a1'
            '\u03a3-\u03ab\u03c2\u03cf\u03d8\u03da\u03dc\u03de\u03e0\u03e2\u03e4\u03e6\u03e8\u03ea'
            '\u03ec\u03ee\u03f4\u03f7\u03f9-\u03fa\u03fd-\u03ff\u1f08-\u1f0f\u1f18-\u1f1d'
            '\u1f28-\u1f2f\u1f38-\u1f3f\u1f48-\u1f4d\u1f59\u1f5b\u1f5d\u1f5f\u1f68-\u1f6f'
            '\u1f88-\u1f8f\u1f98-\u1f9f\u1fa8-\u1faf\u1fb8-\u1fbc\u1fc8-\u1fcc\u1fd8-\u1fdb'
            '\u1fe8-\u1fec\u1ff8-\u1ffc'
            ']*)(['
            '\u00c6\u00de\u0132\u014a\u0152\u0181-\u0182\u0184\u0186-\u0187\u0189-\u018b'
            '\u018e-\u0191\u0193-\u0194\u0196-\u0198\u019c-\u019d\u019f\u01a2\u01a4\u01a6-\u01a7'
            '\u01a9\u01ac\u01ae\u01b1-\u01b3\u01b7-\u01b8\u01bc\u01c4-\u01c5\u01c7-\u01c8'
            '\u01ca-\u01cb\u01e2\u01ee\u01f1-\u01f2\u01f6-\u01f7\u01fc\u021c\u0220\u0222\u0224'
            '\u023a-\u023b\u023d-\u023e\u0241\u0244-\u0246\u0248\u024a\u024c\u024e\u0531-\u0556'
            '\u10a0-\u10c5\u10c7\u10cd\u13a0-\u13f5\u1c90-\u1cba\u1cbd-\u1cbf\u1e9e\u1efa\u1efc'
            '\u1efe\u2126\u212a-\u212b\u2132\u2160-\u216f\u2183\u24b6-\u24cf\u2c00-\u2c2f\u2c60'
            '\u2c62-\u2c64\u2c67\u2c69\u2c6b\u2c6d-\u2c70\u2c72\u2c75\u2c7e-\u2c80\u2c82\u2c84'
            '\u2c86\u2c88\u2c8a\u2c8c\u2c8e\u2c90\u2c92\u2c94\u2c96\u2c98\u2c9a\u2c9c\u2c9e\u2ca0'
            '\u2ca2\u2ca4\u2ca6\u2ca8\u2caa\u2cac\u2cae\u2cb0\u2cb2\u2cb4\u2cb6\u2cb8\u2cba\u2cbc'
            '\u2cbe\u2cc0\u2cc2\u2cc4\u2cc6\u2cc8\u2cca\u2ccc\u2cce\u2cd0\u2cd2\u2cd4\u2cd6\u2cd8'
            '\u2cda\u2cdc\u2cde\u2ce0\u2ce2\u2ceb\u2ced\u2cf2\ua722\ua724\ua726\ua728\ua72a\ua72c'
            '\ua72e\ua732\ua734\ua736\ua738\ua73a\ua73c\ua73e\ua740\ua742\ua744\ua746\ua748\ua74a'
            '\ua74c\ua74e\ua750\ua752\ua754\ua756\ua758\ua75a\ua75c\ua75e\ua760\ua762\ua764\ua766'
            '\ua768\ua76a\ua76c\ua76e\ua779\ua77b\ua77d-\ua77e\ua780\ua782\ua784\ua786\ua78b\ua78d'
            '\ua790\ua792\ua796\ua798\ua79a\ua79c\ua79e\ua7a0\ua7a2\ua7a4\ua7a6\ua7a8\ua7aa-\ua7ae'
            '\ua7b0-\ua7b4\ua7b6\ua7b8\ua7ba\ua7bc\ua7be\ua7c0\ua7c2\ua7c4-\ua7c7\ua7c9\ua7d0\ua7d6'
            '\ua7d8\ua7f5\U00010400-\U00010427\U000104b0-\U000104d3\U00010570-\U0001057a'
            '\U0001057c-\U0001058a\U0001058c-\U00010592\U00010594-\U00010595\U00010c80-\U00010cb2'
            '\U000118a0-\U000118bf\U00016e40-\U00016e5f\U0001e900-\U0001e921'
            ']*)',
            'g') WITH ORDINALITY AS p(m, n))
        ELSE folded END
    FROM (
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
        OFFSET 0) AS f(folded)  -- 0044's function: its mappings first, then the capitals left
    OFFSET 0) AS y(searched)  -- 0045's function: its mappings first, then "ё" and the marks
$$;

DROP INDEX sessions_label_search;
CREATE INDEX sessions_label_search ON sessions USING gin (space_id, stello_label_vector(label))
    WITH (fastupdate = off) WHERE provisional_until IS NULL OR provisional_until <> 'infinity';

UPDATE session_metadata SET value = value WHERE value ~ '[\u0610-\u061a\u0640\u06d6-\u06ed]';

-- Every space that holds sessions starts its pass again from its first record (on
-- Citus, one statement per shard, each reading its own sessions).
INSERT INTO search_backfill (space_id) SELECT DISTINCT space_id FROM sessions
ON CONFLICT (space_id) DO UPDATE
SET after_session = DEFAULT, after_seq = DEFAULT, finished_at = NULL;
