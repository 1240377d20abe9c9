"""Paper text with TeX in it, rendered one way everywhere: plain Unicode, HTML, Streamlit markdown.

Titles, authors, abstracts and claims of arXiv papers carry TeX: ``$AdS_5\\times S^5$``,
``${\\cal N}=4$``, ``Ba\\~nados``, ``S\\'{a}nchez``, ``AdS_3`` without dollars. One parser
(:func:`parse`) reads such a string into a small tree of text and a few marks (sup, sub,
bold, italic, overline, fraction, root); three emitters draw that tree:

* :func:`to_plain` — Unicode text: terminal output, tooltips, graph labels, table cells
  (``AdS₅×S⁵``, ``𝒩=4``, ``Bañados``; a script with no Unicode form keeps a bare ``^``/``_``);
* :func:`to_html` — HTML for the one-file export: every piece of the input text escaped, the
  marks as ``<sup>``, ``<sub>``, ``<b>``, ``<i>`` and ``<span style="text-decoration:overline">``
  only (no attribute or tag comes from the input);
* :func:`to_markdown` — the same HTML with every text run also markdown-escaped, for
  ``st.markdown(..., unsafe_allow_html=True)``: nothing the input says becomes a link, emphasis,
  a heading or math;
* :func:`to_json` — the tree as JSON-able lists (``[text | [mark, child, …]]``), which the export's
  script turns into elements with ``textContent`` (it never parses HTML).

The whitelist is the command table below (symbols, accents, fonts, ``\\frac``, ``\\sqrt``,
``\\text``…): a command it does not name is shown as its bare name (``\\cN`` → ``cN``), never
interpreted, so no input reaches a TeX engine, a link or a style. Bounded: one linear pass over the
tokens; groups nest at most :data:`MAX_DEPTH` deep (deeper braces are read as plain grouping), so a
million nested braces cost no more than a million letters.

:func:`raw_tex` is the definition of "raw TeX" that the tests hold visible text to.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Union

MAX_DEPTH = 24

# ---- the tree ------------------------------------------------------------------------------------------------
Node = Union[str, "Mark"]


@dataclass(frozen=True)
class Mark:
    """A marked run: ``kind`` is one of sup, sub, b, i, over (overline), frac (``parts`` = numerator,
    denominator), sqrt (``parts`` = body, index), cal, bb, frak (math alphabets, applied to letters), or ""
    (a plain group: ``\\text{…}``, ``{\\rm …}``; its parts are drawn one after the other)."""

    kind: str
    parts: tuple[tuple[Node, ...], ...]

    @property
    def body(self) -> tuple[Node, ...]:
        return self.parts[0]


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# ---- the whitelist ---------------------------------------------------------------------------------------------
_GREEK = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ϵ", "varepsilon": "ε", "zeta": "ζ",
    "eta": "η", "theta": "θ", "vartheta": "ϑ", "iota": "ι", "kappa": "κ", "varkappa": "ϰ", "lambda": "λ",
    "mu": "μ", "nu": "ν", "xi": "ξ", "omicron": "ο", "pi": "π", "varpi": "ϖ", "rho": "ρ", "varrho": "ϱ",
    "sigma": "σ", "varsigma": "ς", "tau": "τ", "upsilon": "υ", "phi": "ϕ", "varphi": "φ", "chi": "χ",
    "psi": "ψ", "omega": "ω", "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ", "Lambda": "Λ", "Xi": "Ξ", "Pi": "Π",
    "Sigma": "Σ", "Upsilon": "Υ", "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω",
}
_SYMBOLS = {
    **_GREEK,
    # operators
    "times": "×", "div": "÷", "pm": "±", "mp": "∓", "cdot": "·", "cdots": "⋯", "ldots": "…", "dots": "…",
    "vdots": "⋮", "ddots": "⋱", "ast": "∗", "star": "⋆", "circ": "∘", "bullet": "•", "dagger": "†", "dag": "†",
    "ddagger": "‡", "ddag": "‡", "oplus": "⊕", "otimes": "⊗", "ominus": "⊖", "odot": "⊙", "bigoplus": "⨁",
    "bigotimes": "⨂", "wedge": "∧", "land": "∧", "vee": "∨", "lor": "∨", "cap": "∩", "cup": "∪",
    "bigcup": "⋃", "bigcap": "⋂", "setminus": "∖", "ltimes": "⋉", "rtimes": "⋊", "bowtie": "⋈", "Join": "⨝", "wr": "≀", "amalg": "⨿",
    # relations
    "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "ll": "≪", "gg": "≫", "ne": "≠", "neq": "≠", "approx": "≈",
    "simeq": "≃", "sim": "∼", "cong": "≅", "equiv": "≡", "propto": "∝", "prec": "≺", "succ": "≻",
    "preceq": "⪯", "succeq": "⪰", "subset": "⊂", "supset": "⊃", "subseteq": "⊆", "supseteq": "⊇", "in": "∈",
    "ni": "∋", "notin": "∉", "perp": "⊥", "parallel": "∥", "mid": "∣", "models": "⊨", "vdash": "⊢",
    "lesssim": "≲", "gtrsim": "≳", "doteq": "≐", "asymp": "≍",
    # arrows
    "to": "→", "rightarrow": "→", "leftarrow": "←", "gets": "←", "Rightarrow": "⇒", "Leftarrow": "⇐",
    "leftrightarrow": "↔", "Leftrightarrow": "⇔", "longrightarrow": "⟶", "longleftarrow": "⟵",
    "Longrightarrow": "⟹", "Longleftrightarrow": "⟺", "longleftrightarrow": "⟷", "mapsto": "↦",
    "longmapsto": "⟼", "uparrow": "↑", "downarrow": "↓", "hookrightarrow": "↪", "rightleftharpoons": "⇌",
    "iff": "⟺", "implies": "⟹", "nearrow": "↗", "searrow": "↘",
    # letters and signs
    "infty": "∞", "partial": "∂", "nabla": "∇", "hbar": "ħ", "hslash": "ℏ", "ell": "ℓ", "prime": "′",
    "emptyset": "∅", "varnothing": "∅", "forall": "∀", "exists": "∃", "neg": "¬", "lnot": "¬", "aleph": "ℵ",
    "Re": "ℜ", "Im": "ℑ", "wp": "℘", "angle": "∠", "triangle": "△", "Box": "□", "square": "□",
    "diamond": "◇", "sharp": "♯", "flat": "♭", "natural": "♮", "surd": "√", "top": "⊤", "bot": "⊥",
    "imath": "ı", "jmath": "ȷ", "sum": "∑", "prod": "∏", "coprod": "∐", "int": "∫", "oint": "∮", "iint": "∬",
    "iiint": "∭", "langle": "⟨", "rangle": "⟩", "lbrace": "{", "rbrace": "}", "lbrack": "[", "rbrack": "]",
    "lfloor": "⌊", "rfloor": "⌋", "lceil": "⌈", "rceil": "⌉", "vert": "|", "Vert": "‖", "lvert": "|",
    "rvert": "|", "lVert": "‖", "rVert": "‖", "backslash": "⧵", "S": "§", "P": "¶", "copyright": "©",
    "lq": "‘", "rq": "’", "textendash": "–", "textemdash": "—", "degree": "°", "circledR": "®",
    # text-mode letters
    "i": "ı", "j": "ȷ", "l": "ł", "L": "Ł", "o": "ø", "O": "Ø", "aa": "å", "AA": "Å", "ae": "æ", "AE": "Æ",
    "oe": "œ", "OE": "Œ", "ss": "ß",
    # three macros nearly every hep-th preamble defines this way
    "half": "½", "del": "∂", "veps": "ε",
}
#: drawn with a space on each side in math (a binary operator or relation): AdS₅ × S⁵, q → 0, c ≤ 1
_SPACED = _names("times otimes oplus ominus odot cup cap wedge vee setminus ltimes rtimes le leq ge geq ll gg ne neq "
                    "approx simeq sim cong equiv propto subset supset subseteq supseteq in notin to rightarrow "
                    "leftarrow Rightarrow Leftarrow leftrightarrow Leftrightarrow longrightarrow longleftarrow "
                    "Longrightarrow mapsto longmapsto rightleftharpoons iff implies lesssim gtrsim")
_NAMED = _names("log ln lg exp sin cos tan cot sec csc sinh cosh tanh coth arcsin arccos arctan lim limsup liminf sup "
          "inf min max det dim ker arg deg hom Pr gcd Tr tr sgn sech csch mod bmod pmod")
_SYMBOLS.update({n: n for n in _NAMED})
_SPACES = {",": " ", ";": " ", ":": " ", ">": " ", " ": " ", "quad": " ", "qquad": " ", "enspace": " ",
           "thinspace": " ", "!": "", "/": "", "-": "", "\\": " ", "newline": " ", "linebreak": " "}
_ESCAPED = {"%": "%", "&": "&", "$": "$", "#": "#", "_": "_", "{": "{", "}": "}", "|": "‖"}
_DROP = _names("left right big Big bigg Bigg bigl bigr Bigl Bigr biggl biggr displaystyle textstyle scriptstyle limits "
    "nolimits nonumber noindent par medskip bigskip smallskip break relax protect hfill vfill centerline "
    "mathstrut strut large Large LARGE small tiny normalsize footnotesize scriptsize huge Huge boldmath "
    "unboldmath normalfont upshape mdseries itshape bfseries")
_DROP_ARGUMENT = _names("cite citep citet ref eqref label hspace vspace phantom hphantom vphantom "
                           "footnote thanks")
_SWITCHES = {"bf": "b", "it": "i", "em": "i", "sl": "i", "rm": "", "sf": "", "tt": "", "sc": "", "cal": "cal",
             "Bbb": "bb", "bbb": "bb", "frak": "frak", "mit": "i", "mathbf": "b", "mathit": "i", "mathrm": "",
             "mathcal": "cal", "mathscr": "cal", "mathbb": "bb", "mathfrak": "frak", "mathsf": "", "mathtt": "",
             "boldsymbol": "b", "bm": "b", "pmb": "b", "textbf": "b", "textit": "i", "emph": "i", "textsl": "i",
             "textsf": "", "texttt": "", "textsc": "", "textup": "", "textmd": "", "Cal": "cal", "bold": "b"}
_TEXT_ARGUMENT = _names("text textrm textnormal mbox hbox operatorname mathop ensuremath url")
_ACCENT_MARKS = {"'": "\u0301", "`": "\u0300", "^": "\u0302", '"': "\u0308", "~": "\u0303", "=": "\u0304",
                 ".": "\u0307", "u": "\u0306", "v": "\u030c", "H": "\u030b", "c": "\u0327", "k": "\u0328",
                 "r": "\u030a", "d": "\u0323", "b": "\u0331", "t": "\u0361", "hat": "\u0302", "widehat": "\u0302",
                 "check": "\u030c", "tilde": "\u0303", "widetilde": "\u0303", "acute": "\u0301", "grave": "\u0300",
                 "dot": "\u0307", "ddot": "\u0308", "breve": "\u0306", "vec": "\u20d7", "mathring": "\u030a",
                 "underline": "\u0332", "slash": "\u0338", "wt": "\u0303", "wh": "\u0302"}
_OVERLINES = frozenset({"bar", "overline", "widebar"})
_FRACTIONS = {("1", "2"): "½", ("1", "3"): "⅓", ("2", "3"): "⅔", ("1", "4"): "¼", ("3", "4"): "¾",
              ("1", "8"): "⅛", ("1", "6"): "⅙", ("1", "5"): "⅕"}
_SUPER = dict(zip("0123456789+-−=()nijklmhrstuvwxyzabcdefgoptABDEGHIJKLMNOPRTUVWβγδθιφχ",
                  "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁻⁼⁽⁾ⁿⁱʲᵏˡᵐʰʳˢᵗᵘᵛʷˣʸᶻᵃᵇᶜᵈᵉᶠᵍᵒᵖᵗᴬᴮᴰᴱᴳᴴᴵᴶᴷᴸᴹᴺᴼᴾᴿᵀᵁⱽᵂᵝᵞᵟᶿᶥᵠᵡ", strict=True))
_SUPER.update({"′": "′", "*": "*", "∗": "*", "†": "†", "'": "′", " ": ""})
_SUB = dict(zip("0123456789+-−=()aehijklmnoprstuvxβγρφχ", "₀₁₂₃₄₅₆₇₈₉₊₋₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓᵦᵧᵨᵩᵪ",
                strict=True))
_SUB[" "] = ""


def _alphabet(upper: int, lower: int | None, holes: dict[str, str], digits: int | None = None) -> dict[str, str]:
    out = {chr(65 + i): holes.get(chr(65 + i), chr(upper + i)) for i in range(26)}
    if lower is not None:
        out.update({chr(97 + i): holes.get(chr(97 + i), chr(lower + i)) for i in range(26)})
    if digits is not None:
        out.update({str(i): chr(digits + i) for i in range(10)})
    return out


_ALPHABETS = {
    "cal": _alphabet(0x1D49C, 0x1D4B6, {"B": "ℬ", "E": "ℰ", "F": "ℱ", "H": "ℋ", "I": "ℐ", "L": "ℒ", "M": "ℳ",
                                        "R": "ℛ", "e": "ℯ", "g": "ℊ", "o": "ℴ"}),
    "bb": _alphabet(0x1D538, 0x1D552, {"C": "ℂ", "H": "ℍ", "N": "ℕ", "P": "ℙ", "Q": "ℚ", "R": "ℝ", "Z": "ℤ"},
                    0x1D7D8),
    "frak": _alphabet(0x1D504, 0x1D51E, {"C": "ℭ", "H": "ℌ", "I": "ℑ", "R": "ℜ", "Z": "ℨ"}),
}
# author macros of shapes the field's preambles share: \cN, \CN → 𝒩 (calligraphic); \IR, \bbR, \bR, \RR,
# \R, \reals → ℝ (blackboard); in math, short Greek names (\al, \la, \om; \a, \g, \m…)
_MACRO_CAL = re.compile(r"^(?:c|C)([A-Z])$|^c(w)$")
_MACRO_BB = re.compile(r"^(?:I|b|bb|Bbb|mathbb)([A-Z])$|^([A-Z])\2$|^([ZRCNQ])$")
_MACROS = {"real": "ℝ", "Real": "ℝ", "reals": "ℝ", "Reals": "ℝ", "complex": "ℂ", "integers": "ℤ", "ie": "i.e.",
           "eg": "e.g.", "etal": "et al.", "ra": "→", "lra": "⟷", "Ra": "⇒", "pa": "∂", "pd": "∂"}
_MATH_MACROS = {"a": "α", "b": "β", "g": "γ", "d": "δ", "e": "ε", "k": "κ", "l": "λ", "m": "μ", "n": "ν",
                "r": "ρ", "s": "σ", "al": "α", "be": "β", "ga": "γ", "de": "δ", "ep": "ε", "eps": "ε", "ve": "ε",
                "ze": "ζ", "th": "θ", "te": "θ", "ka": "κ", "la": "λ", "lam": "λ", "si": "σ", "sig": "σ",
                "om": "ω", "vp": "φ", "Ga": "Γ", "De": "Δ", "Th": "Θ", "La": "Λ", "Lam": "Λ", "Si": "Σ", "Om": "Ω"}

# commands, $ / $$, the characters that mean something, runs of dashes, and runs of anything else (spaces,
# single hyphens and quotes included: they are rewritten inside the run)
_TOKEN = re.compile(r"\\(?:[A-Za-z]+\*?|.)?|\$\$?|[{}^_~]|-{2,3}>?|-?[^\\{}$^_~-]+(?:-[^\\{}$^_~-]+)*(?:-(?!-))?|-",
                    re.DOTALL)
_SPECIAL = re.compile(r"[\\$^_{}~]|--|''|``")


# ---- the parser ---------------------------------------------------------------------------------------------------
@dataclass
class _Parser:
    tokens: list[str]
    pos: int = 0
    math: bool = False
    dollars: int = 0  # the $ / $$ tokens not yet read
    skip_closers: int = 0  # '}' of groups read flat (deeper than MAX_DEPTH)
    ended: str = "end"  # what ended the last group: "}", "$" (its math span closed) or "end"
    quote_open: bool = False  # a ‘ was written and no ’ yet: the next ' closes it

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def group(self, depth: int, closing: bool) -> list[Node]:
        """Nodes up to the ``}`` that closes this group (``closing``), the ``$`` that ends the math span the
        group began in, or the end of the text. The top level (``closing`` False) always reads to the end."""
        nodes: list[Node] = []
        in_math = self.math
        while (tok := self.peek()) is not None:
            if tok == "}":
                self.take()
                if self.skip_closers:
                    self.skip_closers -= 1
                elif closing:
                    self.ended = "}"
                    return nodes
                continue  # an unbalanced '}' closes nothing
            if closing and in_math and self.math and tok in ("$", "$$"):
                self.ended = "$"
                return nodes
            if self._command(tok, nodes, depth) and closing:
                return nodes  # a switch (\bf, \cal…) or \over read the rest of the group
        self.ended = "end"
        return nodes

    def _command(self, tok: str, nodes: list[Node], depth: int) -> bool:
        """Read one token (and its arguments) into ``nodes``; True when it consumed the rest of the group."""
        if tok == "{":
            self.take()
            if depth >= MAX_DEPTH:
                self.skip_closers += 1
            else:
                nodes.extend(self.group(depth + 1, True))
            return False
        if tok in ("$", "$$"):
            self.take()
            self.dollars -= 1
            if self.math or self.dollars > 0:
                self.math = not self.math
            else:
                nodes.append("$")  # a lone dollar: no math follows
            return False
        if tok in ("^", "_"):
            self._script(tok, nodes, depth)
            return False
        if tok.startswith("\\"):
            return self._backslash(nodes, depth)
        self.take()
        nodes.append(self._text(tok))
        return False

    def _text(self, tok: str) -> str:
        if self.math:
            if tok in ("--", "---", "-->", "~"):
                return {"-->": "→", "~": " "}.get(tok, "−" * len(tok))
            return tok.replace("''", "″").replace("'", "′").replace("-", "−").replace("``", "“")
        if tok == "~":
            before = self.tokens[self.pos - 2][-1:] if self.pos >= 2 else " "
            after = (self.peek() or " ")[:1]
            return "~" if before.isspace() and after.isspace() else " "  # a tie, unless it stands alone
        if tok in ("--", "---", "-->"):
            return {"--": "–", "---": "—", "-->": "→"}[tok]
        out = tok.replace("``", "“").replace("''", "”")
        if "`" not in out and not (self.quote_open and "'" in out):
            return out
        return re.sub(r"[`']", self._quote, out)

    def _quote(self, m: re.Match[str]) -> str:
        """`` ` `` opens a single quote (‘) and the next ``'`` closes it (’); other ``'`` stay apostrophes."""
        if m.group(0) == "`":
            self.quote_open = True
            return "‘"
        if self.quote_open:
            self.quote_open = False
            return "’"
        return "'"

    def _script(self, tok: str, nodes: list[Node], depth: int) -> None:
        """``^`` / ``_``: always a script in math; in text only when glued to what precedes it and followed by
        a group, a command, a digit run or one letter (``AdS_3``, ``GL_q(3)``; not ``G_Newton``)."""
        self.take()
        nxt = self.peek()
        if not self.math:
            prev = nodes[-1] if nodes else ""
            glued = isinstance(prev, Mark) or prev[-1:].strip() != ""
            simple = nxt is not None and (nxt == "{" or nxt.startswith("\\")
                                          or re.match(r"\d|[A-Za-z](?![A-Za-z])", nxt) is not None)
            if not glued or not simple:
                nodes.append(tok)
                return
        body = self.argument(depth, digits=not self.math)
        nodes.append(Mark("sup" if tok == "^" else "sub", (tuple(body),)))

    def argument(self, depth: int, digits: bool = False, math: bool | None = None) -> list[Node]:
        """A command's argument: a ``{…}`` group, one command, or one character (a digit run if ``digits``)."""
        self._skip_space()
        tok = self.peek()
        if tok is None or depth > MAX_DEPTH or tok in ("}", "$", "$$", "^", "_"):
            return []
        saved = self.math
        if math is not None:
            self.math = math
        try:
            if tok == "{":
                self.take()
                if depth >= MAX_DEPTH:
                    self.skip_closers += 1
                    return []
                return self.group(depth + 1, True)
            if tok.startswith("\\"):
                nodes: list[Node] = []
                self._backslash(nodes, depth + 1)
                return nodes
            self.take()
            m = re.match(r"\d+" if digits else r".", tok, re.DOTALL)
            head = m.group(0) if m else tok[:1]
            if len(head) < len(tok):
                self.pos -= 1
                self.tokens[self.pos] = tok[len(head):]
            return [self._text(head)]
        finally:
            self.math = saved

    def _backslash(self, nodes: list[Node], depth: int) -> bool:
        tok = self.take()
        name = tok[1:].rstrip("*") if len(tok) > 2 else tok[1:]
        if not name:
            return False  # a lone backslash at the end
        if name in _SPACES:
            nodes.append(_SPACES[name])
        elif name in _ESCAPED:
            nodes.append(_ESCAPED[name])
        elif name in _ACCENT_MARKS and (not name.isalpha() or len(name) > 1 or self._argument_follows()):
            nodes.append(_accented(self.argument(depth + 1), _ACCENT_MARKS[name]))
        elif name in _OVERLINES:
            nodes.append(Mark("over", (tuple(self.argument(depth + 1)),)))
        elif name in _SYMBOLS:
            nodes.append(f" {_SYMBOLS[name]} " if self.math and name in _SPACED else _SYMBOLS[name])
        elif name in _SWITCHES:
            self._skip_space()
            return self._switch(name, nodes, depth)
        else:
            return self._structure(name, nodes, depth)
        return False

    def _optional(self) -> str:
        """A ``[…]`` optional argument written as plain text right after the command (``\\sqrt[3]``), or ""."""
        tok = self.peek()
        if tok is None or not tok.startswith("[") or "]" not in tok:
            return ""
        inside, rest = tok[1:].split("]", 1)
        if rest:
            self.tokens[self.pos] = rest
        else:
            self.take()
        return inside

    def _skip_space(self) -> None:
        """The space after a control word ends the word (``{\\em foo}``: no space before "foo")."""
        while (tok := self.peek()) is not None and tok[:1].isspace():
            stripped = tok.lstrip()
            if stripped:
                self.tokens[self.pos] = stripped
                return
            self.take()

    def _argument_follows(self) -> bool:
        """After a one-letter accent command (``\\c``, ``\\v``…): is there something to put the accent on?"""
        tok = self.peek()
        return tok is not None and tok not in ("}", "$", "$$")

    def _switch(self, name: str, nodes: list[Node], depth: int) -> bool:
        """``\\bf`` / ``\\cal`` / … (the rest of the group) or ``\\mathbf{…}`` / ``\\textit{…}`` (one argument)."""
        kind = _SWITCHES[name]
        if name.startswith(("math", "text", "bold")) or name in ("emph", "bm", "pmb"):
            text_mode = name.startswith("text") or name == "emph"
            nodes.append(Mark(kind, (tuple(self.argument(depth + 1, math=False if text_mode else None)),)))
            return False
        if depth >= MAX_DEPTH:
            return False
        nodes.append(Mark(kind, (tuple(self.group(depth + 1, True)),)))
        return self.ended != "$"

    def _structure(self, name: str, nodes: list[Node], depth: int) -> bool:
        """Commands with arguments (fractions, roots, text, dropped references) and unknown commands; True
        for ``\\over`` (it reads the rest of the group as the denominator)."""
        if name in ("frac", "dfrac", "tfrac", "cfrac"):
            top = tuple(self.argument(depth + 1))
            nodes.append(Mark("frac", (top, tuple(self.argument(depth + 1)))))
        elif name in ("over", "choose") and depth < MAX_DEPTH:
            above: tuple[Node, ...] = tuple(nodes)
            nodes.clear()
            below: tuple[Node, ...] = tuple(self.group(depth + 1, True))
            nodes.append(Mark("frac", (above, below)) if name == "over"
                         else Mark("", (("(",), above, (" choose ",), below, (")",))))
            return self.ended != "$"
        elif name == "sqrt":
            index = self._optional()
            nodes.append(Mark("sqrt", (tuple(self.argument(depth + 1)), (index,) if index else ())))
        elif name in ("stackrel", "overset", "underset"):
            over = self.argument(depth + 1)
            base = self.argument(depth + 1)
            nodes.append(Mark("", (tuple(base), (Mark("sup" if name != "underset" else "sub", (tuple(over),)),))))
        elif name == "not":
            nodes.append(_accented(self.argument(depth + 1), "\u0338"))
        elif name in _TEXT_ARGUMENT:
            nodes.append(Mark("", (tuple(self.argument(depth + 1, math=False)),)))
        elif name == "href":
            self.argument(depth + 1, math=False)
            nodes.append(Mark("", (tuple(self.argument(depth + 1, math=False)),)))
        elif name in _DROP_ARGUMENT:
            self._optional()
            self.argument(depth + 1)
            if nodes and isinstance(nodes[-1], str):
                nodes[-1] = nodes[-1].rstrip()  # "shown in \\cite{x}." → "shown in."
        elif name in _DROP:
            self._skip_space()
            nxt = self.peek()
            if name in ("left", "right", "bigl", "bigr", "Bigl", "Bigr", "biggl", "biggr") and nxt and nxt[0] == ".":
                self.tokens[self.pos] = nxt[1:]  # \\left. — an invisible delimiter
        elif name in ("def", "newcommand", "renewcommand", "providecommand"):
            self._definition(depth)
        else:
            nodes.append(_macro(name, self.math))
        return False

    def _definition(self, depth: int) -> None:
        """``\\def\\name{…}`` / ``\\newcommand{\\name}[n]{…}``: a macro definition shows nothing."""
        self._skip_space()
        tok = self.peek()
        if tok == "{":
            self.argument(depth + 1)
        elif tok is not None and tok.startswith("\\"):
            self.take()
        self._skip_space()
        while (tok := self.peek()) is not None and tok != "{" and tok[:1] in ("#", "[", " "):
            self.take()
        self.argument(depth + 1)


def _macro(name: str, math: bool) -> str:
    """An unknown command: an author macro of a known shape, an accent glued to its letter (``\\vc``), or
    its bare name."""
    if name in _MACROS:
        return _MACROS[name]
    if math and name in _MATH_MACROS:
        return _MATH_MACROS[name]
    m = _MACRO_CAL.match(name)
    if m:
        return _ALPHABETS["cal"][(m.group(1) or m.group(2)).upper()]
    m = _MACRO_BB.match(name)
    if m:
        return _ALPHABETS["bb"][m.group(1) or m.group(2) or m.group(3)]
    if len(name) == 2 and name[0] in "cvuHkr" and name[1].isalpha():
        return unicodedata.normalize("NFC", name[1] + _ACCENT_MARKS[name[0]])
    return name


def _accented(body: list[Node], mark: str) -> Node:
    """``body`` with a combining ``mark`` on each of its letters (``\\'{a}`` → á, ``\\hat{SO}`` → ŜÔ)."""
    text = _plain(body)
    if not text.strip():
        return {"\u0303": "~", "\u0302": "^", "\u0301": "´", "\u0308": "¨"}.get(mark, "")
    if mark != "\u0338":
        text = text.replace("ı", "i").replace("ȷ", "j")
    return unicodedata.normalize("NFC", "".join(ch + mark if ch.strip() and not unicodedata.combining(ch) else ch
                                                for ch in unicodedata.normalize("NFD", text)))


def parse(text: object) -> list[Node]:
    """The tree of ``text`` (see the module docstring); never raises, linear in the length of ``text``."""
    s = str(text or "")
    if not _SPECIAL.search(s):
        return [s]
    tokens = _TOKEN.findall(s)
    p = _Parser(tokens, dollars=sum(t in ("$", "$$") for t in tokens))
    return p.group(0, False)


# ---- emitters -----------------------------------------------------------------------------------------------------
def _walk(nodes: Iterable[Node], text: Callable[[str], str], mark: Callable[[Mark], str]) -> str:
    return "".join(mark(n) if isinstance(n, Mark) else text(n) for n in nodes)


def _styled(nodes: Iterable[Node], alphabet: dict[str, str]) -> tuple[Node, ...]:
    """Letters of every text run (marks included) in a math alphabet."""
    return tuple(Mark(n.kind, tuple(_styled(p, alphabet) for p in n.parts)) if isinstance(n, Mark)
                 else "".join(alphabet.get(ch, ch) for ch in n) for n in nodes)


def _collapse(s: str) -> str:
    return " ".join(s.split())


def _needs_parens(s: str) -> bool:
    return not re.fullmatch(r"[\w′.]+", s)


def _single(nodes: tuple[Node, ...]) -> str | None:
    """The one visible character of ``nodes`` when that is all they hold (no mark), else None."""
    if any(isinstance(n, Mark) for n in nodes):
        return None
    text = "".join(n for n in nodes if isinstance(n, str)).strip()
    return text if len(text) == 1 else None


def _fraction(m: Mark) -> str | None:
    """½, ¼, … for a fraction of two plain numbers (looked at without drawing nested marks)."""
    if len(m.parts) != 2 or any(isinstance(n, Mark) for p in m.parts for n in p):
        return None
    num, den = ("".join(str(n) for n in p).strip() for p in m.parts)
    return _FRACTIONS.get((num, den))


def _plain_mark(m: Mark) -> str:
    if m.kind in _ALPHABETS:
        return _plain(_styled(m.body, _ALPHABETS[m.kind]))
    if m.kind in ("sup", "sub"):
        body = _collapse(_plain(m.body))
        table = _SUPER if m.kind == "sup" else _SUB
        if body and all(ch in table for ch in body):
            return "".join(table[ch] for ch in body)
        sign = "^" if m.kind == "sup" else "_"
        return sign + (f"({body})" if len(body) > 1 and _needs_parens(body) else body)
    if m.kind == "over":
        one = _single(m.body)
        if one is not None:
            return unicodedata.normalize("NFC", one + "\u0304")
        return "".join(ch + "\u0305" if ch.strip() and not unicodedata.combining(ch) else ch for ch in _plain(m.body))
    if m.kind == "frac":
        vulgar = _fraction(m)
        if vulgar:
            return vulgar
        num, den = (_collapse(_plain(p)) for p in m.parts)
        return (f"({num})" if _needs_parens(num) else num) + "/" + (f"({den})" if _needs_parens(den) else den)
    if m.kind == "sqrt":
        body, index = (_collapse(_plain(p)) for p in m.parts)
        root = {"3": "∛", "4": "∜"}.get(index, "√")
        head = "".join(_SUPER.get(ch, ch) for ch in index) if index and root == "√" else ""
        return head + root + (f"({body})" if _needs_parens(body) else body)
    return "".join(_plain(p) for p in m.parts)  # b, i, a plain group


def _plain(nodes: Iterable[Node]) -> str:
    return _walk(nodes, lambda s: s, _plain_mark)


_OVERLINE = '<span style="text-decoration:overline">'


def _html_mark(m: Mark, esc: Callable[[str], str]) -> str:
    def inner(nodes: Iterable[Node], strip: bool = True) -> str:
        text = _walk(nodes, esc, lambda x: _html_mark(x, esc))
        return _collapse(text) if strip else text

    if m.kind in _ALPHABETS:
        return inner(_styled(m.body, _ALPHABETS[m.kind]), strip=False)
    if m.kind in ("sup", "sub", "b", "i"):
        return f"<{m.kind}>{inner(m.body)}</{m.kind}>"
    if m.kind == "over":
        one = _single(m.body)
        return esc(unicodedata.normalize("NFC", one + "\u0304")) if one else f"{_OVERLINE}{inner(m.body)}</span>"
    if m.kind == "frac":
        vulgar = _fraction(m)
        return esc(vulgar) if vulgar else f"<sup>{inner(m.parts[0])}</sup>⁄<sub>{inner(m.parts[1])}</sub>"
    if m.kind == "sqrt":
        body, index = m.parts
        return (f"<sup>{inner(index)}</sup>" if index else "") + f"√{_OVERLINE}{inner(body)}</span>"
    return "".join(inner(p, strip=False) for p in m.parts)


_CACHE_LIMIT = 20_000  # characters: longer texts are rendered each time, not kept


def _cached(fn: Callable[[str], str]) -> Callable[[object], str]:
    """``fn`` with the last few thousand short texts remembered (titles and abstracts are drawn on every
    rerun of a page)."""
    remembered = functools.lru_cache(maxsize=8192)(fn)

    def call(text: object) -> str:
        s = str(text) if text is not None else ""
        return remembered(s) if len(s) <= _CACHE_LIMIT else fn(s)

    call.__doc__ = fn.__doc__
    call.__name__ = fn.__name__
    return call


@_cached
def to_plain(text: str) -> str:
    """``text`` as Unicode on one line: TeX rendered, whitespace collapsed, no markup of any kind."""
    return _collapse(_plain(parse(text)))


def _html_escape(s: str) -> str:
    return html.escape(s, quote=True)


@_cached
def to_html(text: str) -> str:
    """``text`` as an HTML fragment: every input character escaped; marks as sup/sub/b/i/overline spans."""
    return _collapse(_walk(parse(text), _html_escape, lambda m: _html_mark(m, _html_escape)))


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>$:])")


def markdown_escape(s: str) -> str:
    """``s`` as literal markdown text: HTML-escaped, then every markdown / math character backslashed
    (``<script>`` shows as text, ``$x$`` is not typeset, ``[a](javascript:…)`` is not a link)."""
    return _MD_SPECIAL.sub(r"\\\1", html.escape(s, quote=False)).replace("\n", " ")


@_cached
def to_markdown(text: str) -> str:
    """``text`` for ``st.markdown(..., unsafe_allow_html=True)``: :func:`to_html`'s marks, every text run
    markdown-escaped (:func:`markdown_escape`), so the only HTML is the renderer's own."""
    return _collapse(_walk(parse(text), markdown_escape, lambda m: _html_mark(m, markdown_escape)))


def _json(nodes: Iterable[Node]) -> list:
    out: list = []
    for n in nodes:
        if not isinstance(n, Mark):
            item: object = n
        elif n.kind in _ALPHABETS:
            out.extend(_json(_styled(n.body, _ALPHABETS[n.kind])))
            continue
        elif n.kind == "over" and _single(n.body):
            item = unicodedata.normalize("NFC", f"{_single(n.body)}\u0304")
        elif n.kind == "frac" and _fraction(n):
            item = _fraction(n)
        elif n.kind in ("", "b", "i") and n.kind == "":
            for p in n.parts:
                out.extend(_json(p))
            continue
        else:
            item = [n.kind, *(_json(p) for p in n.parts)]
        if isinstance(item, str) and out and isinstance(out[-1], str):
            out[-1] += item
        else:
            out.append(item)
    return out


def to_json(text: object) -> list:
    """The tree as JSON-able lists: a string is text; ``[kind, part, …]`` a mark whose parts are lists of
    the same (``kind`` one of sup, sub, b, i, over, frac, sqrt; math alphabets are already applied).
    Whitespace is collapsed as :func:`to_plain` collapses it."""
    tree = _json(parse(text))

    def squeeze(items: list) -> list:
        return [re.sub(r"\s+", " ", x) if isinstance(x, str) else [x[0], *(squeeze(p) for p in x[1:])]
                for x in items]

    tree = squeeze(tree)
    if tree and isinstance(tree[0], str):
        tree[0] = tree[0].lstrip()
    if tree and isinstance(tree[-1], str):
        tree[-1] = tree[-1].rstrip()
    return [x for x in tree if x != ""]


# ---- what counts as raw TeX -----------------------------------------------------------------------------------------
RAW_TEX = re.compile(
    r"\\[A-Za-z]+"  # a command: \cal, \times, \'{a} reads as \' below
    r"|\\['\"`^~=.,;:!{}$&%#_]"  # an accent or an escaped character
    r"|\$[^$\s](?:[^$\n]{0,80}[^$\s])?\$"  # a math span still in dollars ($x$, $AdS_5$; not "$5 and $6")
    r"|[\^_]\{"  # a script group
    r"|\{\\"  # a font group ({\bf …}, {\cal N})
)


def raw_tex(visible: str) -> list[str]:
    """The raw TeX fragments in ``visible`` (text as a reader sees it): backslash commands and escapes,
    ``$…$`` spans, ``^{`` / ``_{`` script groups and ``{\\`` font groups. Empty for rendered text."""
    return RAW_TEX.findall(visible)
