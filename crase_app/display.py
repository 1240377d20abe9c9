"""How papers and roles look on every page: colours, labels, escaping, short titles, demo queries.

Plain functions (no Streamlit), so they are unit-tested without a browser.
``md_escape`` is what makes paper text safe for Streamlit markdown.
"""

from __future__ import annotations

import html
import json
import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path

from crase_core.records import NodeRecord
from crase_core.resources import demo_queries_file

# --- colours shared by the graph, legends and charts ------------------------------------------------
ROLE_COLOURS: dict[str, str] = {
    "seed_kept": "#2a9d8f",  # teal
    "seed_pruned": "#e76f51",  # burnt orange
    "expanded": "#4f6d9a",  # slate blue
    "expanded_pruned": "#b8bfca",  # grey
    "text": "#9b6bb5",  # muted violet: full-query text match outside the citation graph
}
ROLE_LABELS: dict[str, str] = {
    "seed_kept": "seed, kept",
    "seed_pruned": "seed, pruned",
    "expanded": "expanded (neighbour)",
    "expanded_pruned": "expanded, pruned",
    "text": "text match (outside the graph)",
}
PRUNED_EDGE_COLOUR = "#d08c7f"

DEMO_QUERIES_FILE = demo_queries_file()

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>$:])")


def md_escape(text: object) -> str:
    """``text`` as literal Streamlit markdown: HTML escaped, markdown/LaTeX syntax backslashed.

    ``<script>`` comes out as the visible text ``<script>``; ``$x$`` is not typeset;
    ``[a](javascript:…)`` is not a link.
    """
    s = html.escape(str(text), quote=False)
    return _MD_SPECIAL.sub(r"\\\1", s).replace("\n", " ")


def node_role(node: NodeRecord) -> str:
    """One of ``ROLE_COLOURS``' keys (:attr:`NodeRecord.display_role`, shared with the HTML export)."""
    return node.display_role


def short_title(title: str, limit: int = 60) -> str:
    t = " ".join(title.split())
    return t if len(t) <= limit else t[: limit - 1] + "…"


def authors_line(authors: Sequence[str], limit: int = 3) -> str:
    if not authors:
        return "unknown authors"
    if len(authors) <= limit:
        return ", ".join(authors)
    return ", ".join(authors[:limit]) + f" et al. (+{len(authors) - limit})"


def load_demo_queries(path: Path = DEMO_QUERIES_FILE) -> list[dict[str, str]]:
    """Demo queries shipped with the app: ``[{"label", "query", "source"}]``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return []
    return [d for d in data if isinstance(d, dict) and d.get("query")]


# --- words, labels and TeX ---------------------------------------------------------------------------
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
_TEX_SEGMENT = re.compile(r"\$([^$\n]{1,160})\$")
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


def tex_markdown(text: object, *, in_table: bool = False) -> str:
    """``text`` as Streamlit markdown with its ``$…$`` math typeset and everything else literal.

    Every part outside a math segment goes through :func:`md_escape`; a math segment is kept only
    when :func:`safe_tex` accepts it (else it is shown as literal text, dollars included). Inside a
    markdown table cell (``in_table``) ``|`` in math becomes ``\\vert``. The result contains no HTML.
    """
    s = str(text).replace("\n", " ")
    out: list[str] = []
    pos = 0
    for m in _TEX_SEGMENT.finditer(s):
        math = m.group(1)
        after = s[m.end() : m.end() + 1]
        before = s[m.start() - 1 : m.start()] if m.start() else ""
        # only where remark-math reads a math span: not glued to a digit after, nor escaped before
        if not safe_tex(math) or after.isdigit() or before == "\\":
            continue
        out.append(md_escape(s[pos : m.start()]))
        if in_table:
            math = math.replace("\\|", "\\Vert ").replace("|", "\\vert ")
        out.append(f"${math}$")
        pos = m.end()
    out.append(md_escape(s[pos:]))
    return "".join(out)


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

    return tex_accents(_TEX_SEGMENT.sub(one, " ".join(str(text).split())))
