"""The one TeX renderer (crase_core.views.tex): real hep-th strings, every text of the embedded corpus, hostile input."""

from __future__ import annotations

import gzip
import html
import json
import re
import sys
import time
from pathlib import Path

import pytest

from crase_core.views import tex

ROOT = Path(__file__).resolve().parents[1]

# (source as stored in the corpus, plain Unicode, HTML) — titles, authors and abstract fragments of the corpus
REAL = [
    ("Strings in AdS_3 and the SL(2,R) WZW Model. Part 1: The Spectrum",  # hep-th/0001053's title
     "Strings in AdS₃ and the SL(2,R) WZW Model. Part 1: The Spectrum",
     "Strings in AdS<sub>3</sub> and the SL(2,R) WZW Model. Part 1: The Spectrum"),
    ("M\\'aximo Ba\\~nados, Claudio Teitelboim, and Jorge Zanelli",
     "Máximo Bañados, Claudio Teitelboim, and Jorge Zanelli", "Máximo Bañados, Claudio Teitelboim, and Jorge Zanelli"),
    ("A.L. Larsen, N. S\\'{a}nchez (Obs. de Paris, DEMIRM)", "A.L. Larsen, N. Sánchez (Obs. de Paris, DEMIRM)",
     "A.L. Larsen, N. Sánchez (Obs. de Paris, DEMIRM)"),
    ("Jordi Par\\'{\\i}s", "Jordi París", "Jordi París"),
    ("Mirjam Cveti\\v{c}, Stephen Griffies", "Mirjam Cvetič, Stephen Griffies", "Mirjam Cvetič, Stephen Griffies"),
    ("Fran\\c{c}ois Delduc", "François Delduc", "François Delduc"),
    ("P. Berglund and T. H\\\"ubsch", "P. Berglund and T. Hübsch", "P. Berglund and T. Hübsch"),
    ("Special geometry and K\\\"ahler potentials", "Special geometry and Kähler potentials",
     "Special geometry and Kähler potentials"),
    ("Twisted Sector Yukawa Couplings for the $Z_3\\times Z_3$ Orbifold",
     "Twisted Sector Yukawa Couplings for the Z₃ × Z₃ Orbifold",
     "Twisted Sector Yukawa Couplings for the Z<sub>3</sub> × Z<sub>3</sub> Orbifold"),
    ("Fermions in the Lowest Landau Level: Bosonization, $W_{\\infty}$ Algebra",
     "Fermions in the Lowest Landau Level: Bosonization, W_∞ Algebra",
     "Fermions in the Lowest Landau Level: Bosonization, W<sub>∞</sub> Algebra"),
    ("its Weyl Subgroup $S_5 \\bowtie Z_2$", "its Weyl Subgroup S₅ ⋈ Z₂",
     "its Weyl Subgroup S<sub>5</sub> ⋈ Z<sub>2</sub>"),
    ("${\\cal N}=4$ super Yang-Mills on $AdS_5\\times S^5$", "𝒩=4 super Yang-Mills on AdS₅ × S⁵",
     "𝒩=4 super Yang-Mills on AdS<sub>5</sub> × S<sup>5</sup>"),
    ("at $\\theta_{ph} =-\\pi, \\pi, 3\\pi, \\ldots$", "at θₚₕ =−π, π, 3π, …",
     "at θ<sub>ph</sub> =−π, π, 3π, …"),
    ("the spin-$\\frac{1}{2}$ field and $g_{\\mu\\nu}$", "the spin-½ field and g_μν",
     "the spin-½ field and g<sub>μν</sub>"),
    ("${1 \\over 2}$-BPS and $\\sqrt{\\alpha'}$", "½-BPS and √α′",
     '½-BPS and √<span style="text-decoration:overline">α′</span>'),
    ("Topological versus Non--Topological Theories and $p-q$ Duality in $c \\le 1$ 2d Gravity Models",
     "Topological versus Non–Topological Theories and p−q Duality in c ≤ 1 2d Gravity Models",
     "Topological versus Non–Topological Theories and p−q Duality in c ≤ 1 2d Gravity Models"),
    ("The $\\tau$-function and $\\hat{W}_{\\infty}$, the $\\bar{D}$ brane", "The τ-function and Ŵ_∞, the D̄ brane",
     "The τ-function and Ŵ<sub>∞</sub>, the D̄ brane"),
    ("{\\it i.e.} the $\\IZ_2$ orbifold of $\\IR^4$ and ${\\bf C}^3$", "i.e. the ℤ₂ orbifold of ℝ⁴ and C³",
     "<i>i.e.</i> the ℤ<sub>2</sub> orbifold of ℝ<sup>4</sup> and <b>C</b><sup>3</sup>"),
    ("a `Planck scale quantum group' and ``Witten's'' model", "a ‘Planck scale quantum group’ and “Witten's” model",
     "a ‘Planck scale quantum group’ and “Witten&#x27;s” model"),
    ("as shown in \\cite{Mal97}. The $x^{n+1}$ term", "as shown in. The xⁿ⁺¹ term",
     "as shown in. The x<sup>n+1</sup> term"),
]


@pytest.mark.parametrize(("source", "plain", "html_"), REAL)
def test_real_hep_th_strings(source, plain, html_):
    assert tex.to_plain(source) == plain
    assert tex.to_html(source) == html_
    assert tex.raw_tex(plain) == []


def test_markdown_is_the_html_with_every_text_run_escaped():
    assert tex.to_markdown("${\\cal N}=4$ on $AdS_5$") == "𝒩=4 on AdS<sub>5</sub>"
    assert tex.to_markdown("**bold** [a](javascript:alert(1)) # x") == (
        "\\*\\*bold\\*\\* \\[a\\]\\(javascript\\:alert\\(1\\)\\) \\# x")
    assert tex.to_markdown("costs $5 and") == "costs \\$5 and"  # a lone dollar: literal, never math


def test_json_tree_matches_the_html():
    assert tex.to_json("$AdS_5\\times S^5$ and $\\frac{a}{b}$") == [
        "AdS", ["sub", ["5"]], " × S", ["sup", ["5"]], " and ", ["frac", ["a"], ["b"]]]
    assert tex.to_json("Ba\\~nados") == ["Bañados"]
    assert tex.to_json("") == []


def test_text_mode_scripts_need_a_glued_base_and_a_short_script():
    assert tex.to_plain("GL_q(3) and su_{q}(m|n)") == "GL_q(3) and su_q(m|n)"
    assert tex.to_html("GL_q(3)") == "GL<sub>q</sub>(3)"
    assert tex.to_plain("The G_Newton --> 0 Limit") == "The G_Newton → 0 Limit"  # not G with subscript N
    assert tex.to_plain("file _name and x ^ y") == "file _name and x ^ y"


def test_unknown_commands_show_their_name_and_nothing_else():
    assert tex.to_plain("the $\\bicross$ product") == "the bicross product"
    assert tex.to_plain("$\\cN=2$, $\\CW$ and $\\IR$, $\\RR$, $\\bR$") == "𝒩=2, 𝒲 and ℝ, ℝ, ℝ"
    assert tex.to_plain("\\def\\mon{S^3} the $\\al'$ expansion") == "the α′ expansion"
    for hostile in ("\\color{red}x", "\\input{/etc/passwd}", "\\write18{rm -rf /}", "\\catcode`\\@=11",
                    "\\includegraphics{a.png}", "\\html{<b>x</b>}"):
        out = tex.to_html(hostile)
        assert "\\" not in out and not re.search(r"<(?!/?(?:sub|sup|b|i)>|/?span)", out), (hostile, out)


def test_links_and_markup_in_the_input_stay_text():
    assert tex.to_plain("$\\href{javascript:alert(1)}{click}$") == "click"
    out = tex.to_html("\\url{javascript:alert(1)} <a href=x onclick=y>z</a>")
    assert "<a" not in out and "&lt;a href=x onclick=y&gt;z&lt;/a&gt;" in out
    title = "<script>alert('xss')</script> $AdS_3$ black holes"
    assert tex.to_html(title) == "&lt;script&gt;alert(&#x27;xss&#x27;)&lt;/script&gt; AdS<sub>3</sub> black holes"
    assert "<script" not in tex.to_markdown(title)
    assert tex.to_plain(title) == "<script>alert('xss')</script> AdS₃ black holes"  # plain text is not HTML


ALLOWED_TAG = re.compile(r'</?(?:sub|sup|b|i)>|<span style="text-decoration:overline">|</span>')


@pytest.mark.parametrize("text", [
    "{{{a", "a}}}b", "${x$ y", "x^{", "\\frac{", "\\sqrt[", "$$$", "\\", "x_", "}{", "\\'", "\\left", "$\\over$",
    "{\\bf", "\\stackrel{", "a \\over", "\\def", "\\newcommand{\\x}[1]{", "^^^^", "__{_{", "$^$_$",
])
def test_unbalanced_and_truncated_input(text):
    for out in (tex.to_plain(text), html.unescape(re.sub(r"<[^>]*>", "", tex.to_html(text)))):
        assert tex.raw_tex(out) == [], (text, out)
    assert ALLOWED_TAG.sub("", tex.to_html(text)).count("<") == 0


@pytest.mark.parametrize(("text", "expected"), [
    ("{" * 1_000_000 + "x" + "}" * 1_000_000, "x"),
    ("}" * 1_000_000 + "x", "x"),
    ("{" * 1_000_000, ""),
    ("\\'" * 100_000 + "a", None),
    ("\\sqrt" * 100_000 + "{x}", None),
    ("{\\bf " * 100_000 + "x", "x"),
    ("x^" * 100_000, None),
    ("$" * 1_000_001, None),
    ("\\frac{" * 100_000, None),
])
def test_huge_hostile_input_in_bounded_time(text, expected):
    """Linear in the input: a million nested braces are no costlier than a million letters. The limit is a
    guard against a blow-up (a quadratic or exponential path would take hours; ~1 s each on an idle core),
    not a speed target."""
    limit = sys.getrecursionlimit()
    started = time.perf_counter()
    for render in (tex.to_plain, tex.to_html):
        out = render(text)
        if expected is not None and render is tex.to_plain:
            assert out == expected
    assert time.perf_counter() - started < 120
    assert sys.getrecursionlimit() == limit


def test_every_text_of_the_embedded_corpus_renders_without_raw_tex():
    """An invariant on real data: all 29,555 titles, author lists and abstracts (10,000 with $…$ math, 8,000
    with backslash commands) render with no raw TeX left, in plain text and in the HTML's visible text, and
    the HTML holds the renderer's own tags only."""
    path = ROOT / "assets" / "corpora" / "hepth" / "papers.jsonl.gz"
    raw: list[tuple[str, str]] = []
    n = 0
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            p = json.loads(line)
            for field in ("title", "authors", "abstract"):
                source = p.get(field) or ""
                if not re.search(r"[\\$^_{}~]", source):
                    continue
                n += 1
                markup = tex.to_html(source)
                assert ALLOWED_TAG.sub("", markup).count("<") == 0, markup
                visible = html.unescape(ALLOWED_TAG.sub("", markup))
                raw += [(p["id"], r) for r in tex.raw_tex(tex.to_plain(source)) + tex.raw_tex(visible)]
    assert n > 15_000
    assert raw == []


def test_the_raw_tex_definition():
    assert tex.raw_tex("AdS_3 x^{2} $x$ \\cal {\\bf a} \\'e") == ["^{", "$x$", "\\cal", "{\\", "\\'"]
    assert tex.raw_tex("costs $5 and $6; e-mail a_b; 3^4") == []
