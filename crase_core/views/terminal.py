"""Text safe to print on a terminal.

Titles, abstracts, queries and ids come from corpora, APIs and saved traces:
anyone may have put terminal escape sequences in them (``ESC ] 0 ; … BEL``
retitles the window, ``ESC [ 2 J`` clears the screen, ``ESC ] 8`` plants
links). :func:`printable` removes every such sequence and every other
control character before a string is printed.
"""

from __future__ import annotations

import re

# ESC-introduced sequences: CSI (ESC [ … final), OSC/DCS/SOS/PM/APC strings (ended by BEL or ESC \, or
# unterminated to the end), and two-character escapes. The 8-bit forms (U+009B CSI, U+009D OSC, …) too.
_ESCAPE_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f]).*?(?:\x07|\x1b\\|\x9c|$)"
    r"|\x1b[\x20-\x7e]?",
    re.DOTALL,
)
# C0 and C1 controls, DEL, and the bidirectional overrides/isolates that reorder what is shown.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: object, keep_newlines: bool = False) -> str:
    """``str(text)`` without escape sequences or control characters.

    Tabs (and newlines unless ``keep_newlines``) become spaces; everything else
    that is a control character is dropped, so what is printed is what the
    text says and nothing the terminal would act on.
    """
    s = _ESCAPE_SEQUENCE.sub("", str(text))
    if keep_newlines:
        return "\n".join(_CONTROL.sub("", line.replace("\t", " ")) for line in s.split("\n"))
    return _CONTROL.sub(lambda m: " " if m.group(0) in "\t\n\r" else "", s)
