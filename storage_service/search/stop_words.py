"""The common English words the records' configuration leaves out ('english': PostgreSQL's
`english.stop`, the Snowball list): no record's search vector holds them, so no search finds
one, and the highlighter marks none ("the*" finds "theory", never "the", and marks
"theory" only). tests/storage/search/test_search.py compares this list with the server's
file.
"""

from __future__ import annotations

ENGLISH = frozenset(
    """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
    she her hers herself it its itself they them their theirs themselves what which who whom
    this that these those am is are was were be been being have has had having do does did
    doing a an the and but if or because as until while of at by for with about against
    between into through during before after above below to from up down in out on off over
    under again further then once here there when where why how all any both each few more
    most other some such no nor not only own same so than too very s t can will just don
    should now
    """.split()
)
