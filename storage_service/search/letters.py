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

# No character at or past this code point has a lowercase of its own
# (tests/storage/search/test_search_case.py reads every code point).
CASED_END = 0x1F000
# The greek small letter final sigma, the form a sigma takes at a word's end: read as the
# sigma (U+03C3), so "οδος" typed finds "ΟΔΟΣ" (whose lowercase is U+03BF U+03B4 U+03BF U+03C3
# letter by letter).
FINAL_SIGMA = 0x3C2
SIGMA = 0x3C3


def _lower() -> dict[int, int]:
    """Each character past ASCII whose lowercase is one other character, read as that
    lowercase (read as its base letter where the lowercase has one: the Ångström sign is
    "a"), and the final sigma as the sigma. Not the letters of `FOLD` (their base letters are
    ASCII, which every locale lowercases) nor the full-width forms (read as ASCII, migration
    0041); "İ", whose lowercase is two characters, is one of `FOLD`'s ("I")."""
    table = {FINAL_SIGMA: SIGMA}
    for point in range(0x80, CASED_END):
        low = chr(point).lower()
        if low != chr(point) and len(low) == 1 and point not in FOLD:
            if not 0xFF01 <= point <= 0xFF5E:
                table[point] = FOLD.get(ord(low), ord(low))
    return table


LOWER = _lower()
"""What migration 0045's `stello_search_text` lowercases, one character for one, whatever the
database's locale: the configurations' own lowercasing follows its LC_CTYPE, and the C locale
lowercases no letter past ASCII ("ПРИВЕТ" stayed 'ПРИВЕТ', found by no "привет")."""


def runs(points: list[int]) -> list[tuple[int, int]]:
    """Code points as their runs of consecutive points (first, last), in order."""
    found: list[list[int]] = []
    for point in sorted(points):
        if found and point == found[-1][1] + 1:
            found[-1][1] = point
        else:
            found.append([point, point])
    return [(first, last) for first, last in found]


def _sql_class(points: list[int]) -> str:
    """Code points as a class of PostgreSQL's regular expressions (without brackets):
    `\\uXXXX`, `\\UXXXXXXXX`, runs as ranges."""

    def escaped(point: int) -> str:
        return f"\\u{point:04x}" if point < 0x10000 else f"\\U{point:08x}"

    return "".join(escaped(a) + ("" if a == b else f"-{escaped(b)}") for a, b in runs(points))


YO = {0x401: 0x435, 0x451: 0x435}
"""Migration 0048: the Cyrillic "ё" and "Ё" read as "е" (Russian is mostly written without the
diaeresis: "елка" finds "ёлка" and the reverse), one character for one, after `LOWER` (which
reads "Ё" as "ё")."""

# The characters `LOWER` maps, as migration 0045 writes their class.
SQL_CASED = _sql_class(list(LOWER))
