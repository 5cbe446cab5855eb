"""The Latin letters with diacritics that search reads as their base letters (migration 0042).

`LETTERS[i]` reads as `BASES[i]`, one character for one, so a hit is marked at its offsets in
the original text: every precomposed letter of Latin-1 Supplement, Latin Extended-A and
Latin Extended Additional, and of Latin Extended-B below U+0250, whose canonical decomposition
is an ASCII letter and combining marks (U+0300-U+036F: "é" is "e", "ș" is "s", "ộ" is "o"),
and the letters with a stroke, bar or dot that have none (`STROKED`: "ł" is "l", "ø" is "o",
"đ" and "ð" are "d", the dotless i is "i"). The letters that stand for two (`ß`, `æ`, `œ`,
`þ`, `ĳ`) stay themselves: their one-for-one forms ("s", "a") would find other words, and a
longer one ("ss") would move every offset after it. Migration 0042's `stello_search_text` maps
the same table with `translate` (tests/storage/search/test_search_accents.py compares the two
over every character of these blocks). The most frequent letters come first: PostgreSQL's
`translate` looks each character up in its list in order (since migration 0044 it reads only
the runs of these blocks' characters, so a character of another script walks no list).
"""

from __future__ import annotations

# The letters with no canonical decomposition read as the letter under their stroke or bar.
STROKED = "ØøĐđÐðĦħŁłŦŧıĿŀſɃƀƵƶǤǥ"
STROKED_BASES = "OoDdDdHhLlTtiLlsBbZzGg"

LETTERS = (
    "éèàçêôùâîûëïüöäñáíóúãõåøłśćńźżąęőűžščřýůťďňľășțđơưạảấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớ"
    "ờởỡợụủứừửữựỳỵỷỹÉÈÀÇÊÔÙÂÎÛËÏÜÖÄÑÁÍÓÚÃÕÅØŁŚĆŃŹŻĄĘŐŰŽŠČŘÝŮŤĎŇĽĂȘȚĐƠƯẠẢẤẦẨẪẬẮẰẲẴẶẸẺẼ"
    "ẾỀỂỄỆỈỊỌỎỐỒỔỖỘỚỜỞỠỢỤỦỨỪỬỮỰỲỴỶỸÌÐÒìðòÿĀāĈĉĊċĒēĔĕĖėĚěĜĝĞğĠġĢģĤĥĦħĨĩĪīĬĭĮįİıĴĵĶķĹĺĻ"
    "ļĿŀŅņŌōŎŏŔŕŖŗŜŝŞşŢţŦŧŨũŪūŬŭŲųŴŵŶŷŸſƀƵƶǍǎǏǐǑǒǓǔǕǖǗǘǙǚǛǜǞǟǠǡǤǥǦǧǨǩǪǫǬǭǰǴǵǸǹǺǻǾǿȀȁȂ"
    "ȃȄȅȆȇȈȉȊȋȌȍȎȏȐȑȒȓȔȕȖȗȞȟȦȧȨȩȪȫȬȭȮȯȰȱȲȳɃḀḁḂḃḄḅḆḇḈḉḊḋḌḍḎḏḐḑḒḓḔḕḖḗḘḙḚḛḜḝḞḟḠḡḢḣḤḥḦḧḨḩ"
    "ḪḫḬḭḮḯḰḱḲḳḴḵḶḷḸḹḺḻḼḽḾḿṀṁṂṃṄṅṆṇṈṉṊṋṌṍṎṏṐṑṒṓṔṕṖṗṘṙṚṛṜṝṞṟṠṡṢṣṤṥṦṧṨṩṪṫṬṭṮṯṰṱṲṳṴṵṶṷṸṹ"
    "ṺṻṼṽṾṿẀẁẂẃẄẅẆẇẈẉẊẋẌẍẎẏẐẑẒẓẔẕẖẗẘẙẛ"
)
BASES = (
    "eeaceouaiueiuoanaiouaoaolscnzzaeouzscryutdnlastdouaaaaaaaaaaaaeeeeeeeeiioooooooo"
    "oooouuuuuuuyyyyEEACEOUAIUEIUOANAIOUAOAOLSCNZZAEOUZSCRYUTDNLASTDOUAAAAAAAAAAAAEEE"
    "EEEEEIIOOOOOOOOOOOOUUUUUUUYYYYIDOidoyAaCcCcEeEeEeEeGgGgGgGgHhHhIiIiIiIiIiJjKkLlL"
    "lLlNnOoOoRrRrSsSsTtTtUuUuUuUuWwYyYsbZzAaIiOoUuUuUuUuUuAaAaGgGgKkOoOojGgNnAaOoAaA"
    "aEeEeIiIiOoOoRrRrUuUuHhAaEeOoOoOoOoYyBAaBbBbBbCcDdDdDdDdDdEeEeEeEeEeFfGgHhHhHhHh"
    "HhIiIiKkKkKkLlLlLlLlMmMmMmNnNnNnNnOoOoOoOoPpPpRrRrRrRrSsSsSsSsSsTtTtTtTtUuUuUuUu"
    "UuVvVvWwWwWwWwWwXxXxYyZzZzZzhtwys"
)

FOLD = str.maketrans(LETTERS, BASES)
