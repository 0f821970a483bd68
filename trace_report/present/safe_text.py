"""Text from a trace made safe for where it is shown: a terminal, a spreadsheet, a Markdown page.

Kernel, operator, module and region names are whatever the profiled program (or whoever wrote the
trace file) put there. Printed raw they can move the cursor, clear the screen, set the window title
or the clipboard (ESC and C1 control sequences: ECMA-48 CSI, OSC 0/52), hide or reorder text
(Unicode bidirectional overrides and isolates, zero-width characters: the "Trojan Source" attack,
CVE-2021-42574), run a formula in a spreadsheet (OWASP "CSV Injection") or render as a link, an
image or a mention in Markdown. JSON output needs none of this: ``json.dumps`` escapes every
control and non-ASCII character. docs/security.md, "Text handling", is the user's account.
"""

from __future__ import annotations

import re

_HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 controls but tab and newline, DEL, C1 controls (0x9b: CSI)
    "\u00ad\u061c\u180e"  # soft hyphen, Arabic letter mark, Mongolian vowel separator
    "\u200b-\u200f"  # zero-width space, non-joiner, joiner; left-to-right and right-to-left marks
    "\u2028\u2029"  # line and paragraph separators
    "\u202a-\u202e"  # bidirectional embeddings and overrides
    "\u2060-\u2064\u2066-\u206f"  # word joiner, invisible operators, bidirectional isolates, deprecated formats
    "\ufeff\ufff9-\ufffb"  # zero-width no-break space (BOM), interlinear annotations
    "\ud800-\udfff"  # lone surrogates
    "\U000e0000-\U000e007f]"  # tag characters
)
"""Characters that a terminal obeys or that change or hide the text around them without showing
themselves: each is printed as an escape (``\\x1b``, ``\\u202e``)."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def terminal_text(text: str) -> str:
    """``text`` with every control, bidirectional and invisible formatting character (:data:`_HIDDEN`)
    as a visible escape: ``'a\\x1b[2Jb'`` -> ``'a\\\\x1b[2Jb'``, ``'x\\u202ey'`` -> ``'x\\\\u202ey'``.
    Tab and newline stay (a table draws them). Plain text comes back as it is."""
    return _HIDDEN.sub(_escape, text) if not text.isascii() or _HIDDEN.search(text) else text


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet reads as the start of a formula (OWASP "CSV Injection": ``=``, ``+``, ``-``,
``@``, tab and carriage return)."""


def csv_text(text: str) -> str:
    """A CSV text cell: a leading formula character (:data:`_FORMULA_START`) behind an apostrophe,
    which spreadsheets hide and which keeps the cell text (OWASP's advice), then
    :func:`terminal_text`: ``'=1+1'`` -> ``"'=1+1"``. Numbers are not text cells and never come here."""
    if text.startswith(_FORMULA_START):
        text = "'" + text
    return terminal_text(text)


_MARKDOWN_SPECIAL = re.compile(r"([\\`*{}\[\]()!@#~|$])")
"""ASCII punctuation that starts a Markdown (GFM) construct in a table cell: code spans, emphasis,
links and images, mentions and e-mail autolinks, issue references, strikethrough, cell borders,
math. The underscore stays: kernel names are full of them and one inside a word never emphasises."""
_AUTOLINK = re.compile(r"(?i)(https?|ftp)(:)(?=//)|\b(www)(\.)")
"""The starts of GFM's extended autolinks (``http://``, ``www.``)."""


def markdown_text(text: str) -> str:
    """One Markdown table cell of trace text shown as text: HTML's ``&``, ``<``, ``>`` as entities,
    the Markdown punctuation of :data:`_MARKDOWN_SPECIAL` behind a backslash, bare URLs broken
    (``http\\://``), line breaks as ``<br>``, then :func:`terminal_text` (CommonMark: any ASCII
    punctuation may be escaped; GFM spec, "Backslash escapes", "Autolinks (extension)")."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", text)
    text = _AUTOLINK.sub(lambda m: f"{m.group(1)}\\{m.group(2)}" if m.group(1) else f"{m.group(3)}\\{m.group(4)}",
                         text)
    text = text.replace("\r\n", "<br>").replace("\n", "<br>").replace("\r", "<br>")
    return terminal_text(text)
