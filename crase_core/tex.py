"""Paper text for plain-text places: TeX accents and simple math in Unicode, short words, author names.

Pure functions shared by the app, the graph views (crase_core.graph_views) and the HTML export; nothing here
produces markup. :func:`safe_tex` is the allow-list that decides whether a ``$…$`` segment may be typeset.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence


def authors_line(authors: Sequence[str], limit: int = 3) -> str:
    if not authors:
        return "unknown authors"
    if len(authors) <= limit:
        return ", ".join(authors)
    return ", ".join(authors[:limit]) + f" et al. (+{len(authors) - limit})"


def shorten_words(text: str, limit: int = 60) -> str:
    """``text`` on one line, cut at a word boundary to at most ``limit`` characters (``…`` marks a cut).

    Never cuts inside a word unless the first word alone is longer than ``limit``.
    """
    t = " ".join(str(text).split())
    if len(t) <= limit:
        return t
    cut = t[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 3:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-–—") + "…"


_TEX_ACCENTS = {"~": "\u0303", "'": "\u0301", "`": "\u0300", '"': "\u0308", "^": "\u0302", "c": "\u0327",
                "v": "\u030c", "u": "\u0306", "=": "\u0304", ".": "\u0307", "H": "\u030b"}
_TEX_ACCENT = re.compile(r"\\([~'`\"^cvu=.H])\s*\{?([A-Za-z])\}?")


def tex_accents(text: str) -> str:
    """BibTeX-style accents as letters (``Ba\\~nados`` → ``Bañados``, ``G\\"odel`` → ``Gödel``); braces dropped."""
    out = _TEX_ACCENT.sub(lambda m: unicodedata.normalize("NFC", m.group(2) + _TEX_ACCENTS[m.group(1)]), text)
    return out.replace("{", "").replace("}", "")


def first_author_surname(authors: Sequence[str]) -> str:
    """The first author's family name (``"J. M. Maldacena"`` → ``"Maldacena"``); ``""`` when unknown."""
    for a in authors:
        name = re.sub(r"\(.*", "", tex_accents(str(a)))  # "(Harvard U.)", "(DAMTP" — affiliations
        name = re.sub(r"\s+(?:Jr|Sr|II|III|IV)\.?$", "", " ".join(name.replace("<", " ").replace(">", " ").split()))
        if not name:
            continue
        if "," in name:  # "Maldacena, J."
            return name.split(",", 1)[0].strip()
        return name.replace(".", ". ").split()[-1].strip(".")
    return ""


# Commands KaTeX may typeset from paper text: symbols, fonts, accents, operators. Anything else
# (\href, \url, \html…, \def, \color, \rule, …) makes the segment plain text.
_TEX_COMMAND_NAMES = """
alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi pi varpi rho varrho sigma
varsigma tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega
infty partial nabla hbar ell prime dagger ast star circ bullet cdot cdots ldots dots vdots ddots times div pm mp
le leq ge geq ll gg ne neq approx simeq sim cong equiv propto to rightarrow leftarrow Rightarrow Leftarrow
leftrightarrow longrightarrow mapsto in notin subset subseteq supset supseteq cup cap wedge vee otimes oplus
sum prod int oint frac dfrac tfrac sqrt bar hat tilde widetilde widehat vec dot ddot overline underline
mathcal mathbb mathrm mathbf mathit mathsf mathfrak boldsymbol text textrm textit textbf operatorname
left right big Big bigg Bigg langle rangle lvert rvert lVert rVert vert Vert lfloor rfloor lceil rceil
log ln exp sin cos tan sinh cosh tanh lim sup inf min max det dim ker arg deg Tr tr Re Im mathrm quad qquad
forall exists neg emptyset varnothing perp parallel mid nonumber over bf rm it cal sf tt
"""
_TEX_COMMANDS = frozenset(_TEX_COMMAND_NAMES.split())
TEX_SEGMENT = re.compile(r"\$([^$\n]{1,160})\$")
_TEX_CHARS = re.compile(r"^[A-Za-z0-9\s\\{}^_+\-*/=(),.|'!;:\[\]~]*$")
_TEX_COMMAND = re.compile(r"\\([A-Za-z]+|.)")
_TEX_SPACING = frozenset(",;! {}|")


def safe_tex(math: str) -> bool:
    """Whether ``math`` (the inside of ``$…$``) may be handed to KaTeX: a small alphabet, known
    commands only (no links, no HTML, no macros, no colours or sizes), bounded length and nesting."""
    if not math.strip() or math != math.strip() or not _TEX_CHARS.match(math):
        return False
    if "](" in math or "://" in math:  # link syntax, should a renderer ever read it as markdown
        return False
    depth = 0
    for ch in math:
        depth += (ch == "{") - (ch == "}")
        if depth < 0 or depth > 4:
            return False
    if depth:
        return False
    for m in _TEX_COMMAND.finditer(math):
        cmd = m.group(1)
        if cmd not in _TEX_COMMANDS and cmd not in _TEX_SPACING:
            return False
    return True


_TEX_UNICODE = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε", "zeta": "ζ",
    "eta": "η", "theta": "θ", "kappa": "κ", "lambda": "λ", "mu": "μ", "nu": "ν", "xi": "ξ", "pi": "π",
    "rho": "ρ", "sigma": "σ", "tau": "τ", "phi": "φ", "varphi": "φ", "chi": "χ", "psi": "ψ", "omega": "ω",
    "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ", "Lambda": "Λ", "Sigma": "Σ", "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω",
    "infty": "∞", "partial": "∂", "nabla": "∇", "hbar": "ħ", "ell": "ℓ", "to": "→", "rightarrow": "→",
    "times": "×", "cdot": "·", "pm": "±", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "ne": "≠", "neq": "≠",
    "approx": "≈", "sim": "∼", "otimes": "⊗", "oplus": "⊕", "sum": "∑", "int": "∫", "sqrt": "√", "langle": "⟨",
    "rangle": "⟩", "ldots": "…", "cdots": "⋯", "in": "∈",
}
_SUPER = str.maketrans("0123456789+-=()n", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿ")
_SUB = str.maketrans("0123456789+-=()", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎")


def tex_plain(text: object) -> str:
    """``text`` for plain-text places (graph labels, tooltips): ``$…$`` math spelled in Unicode
    where it is simple (``$R^2$`` → ``R²``, ``$w_{\\infty}$`` → ``w_∞``), dollars dropped; never HTML."""

    def one(m: re.Match[str]) -> str:
        math = m.group(1)
        if not safe_tex(math):
            return m.group(0)
        math = re.sub(r"\\([A-Za-z]+)", lambda c: _TEX_UNICODE.get(c.group(1), c.group(1)), math)

        def script(c: re.Match[str], table: dict[int, int], mark: str) -> str:
            body = c.group(1) if c.group(1) is not None else c.group(2)
            return body.translate(table) if body and all(ord(ch) in table for ch in body) else mark + body

        math = re.sub(r"\^(?:\{([^{}]*)\}|(.))", lambda c: script(c, _SUPER, "^"), math)
        math = re.sub(r"_(?:\{([^{}]*)\}|(.))", lambda c: script(c, _SUB, "_"), math)
        return math.replace("{", "").replace("}", "").replace("\\", "")

    return tex_accents(TEX_SEGMENT.sub(one, " ".join(str(text).split())))
