"""Parse, validate and (where it is safe) repair model answers. Pure functions, no I/O.

Each parser takes the decoded JSON of one answer and returns ``(value, notes)``
or raises :class:`OutputError` saying what is wrong (the caller retries with
that message, then records it). Notes that describe a change to the model's
output start with ``repaired:`` (the pipeline counts them). What counts as
safely repairable:

- JSON wrapped in prose or a Markdown fence → the one JSON object inside;
- a bare list instead of ``{"key": [...]}`` → wrapped;
- numbers sent as strings (``"0.8"``) → numbers;
- a flat list of exactly n_u·n_v scores → reshaped row by row;
- scores within 1e-6 of [0, 1] → clamped (anything further out is rejected);
- more than the allowed sub-queries or claims → the first ones kept;
- a claim type in another letter case → upper-cased; an unknown type → typed by
  the offline cue-word rules (:func:`crase_core.evidence.claims.classify_claim`), noted.

Never repaired: a matrix of the wrong shape, scores outside [0, 1], missing
claim text, truncated JSON.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from crase_core.evidence.claims import MAX_CLAIMS, check_verbatim, classify_claim
from crase_core.evidence.entailment import validate_matrix
from crase_core.records import CLAIM_TYPES, Claim, Paper
from crase_core.text import content_words, stem

SCORE_STEPS = tuple(round(k / 20, 2) for k in range(21))  # 0, 0.05, …, 1 (the schema's allowed scores)
MAX_SUBQUERY_WORDS = 12
MAX_CLAIM_CHARS = 400
# plain keyword text: no brackets, quotes, backticks, backslashes, underscores or line breaks, 3–80 characters
SUBQUERY_PATTERN = "^[^\\[\\]{}`\"\\\\_\\n\\r\\t]{3,80}$"
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
_QUOTES = "\"'“”‘’«»`"


class OutputError(ValueError):
    """A model answer that cannot be used (the message says why; it is shown to the model on retry)."""


# --- JSON ------------------------------------------------------------------------------------------


def decode_json(text: str, finish_reason: str | None = None) -> tuple[Any, list[str]]:
    """The JSON value of an answer; tolerates a Markdown fence or prose around one object. JSON nested
    deeper than :data:`MAX_ANSWER_DEPTH` is an unusable answer (no answer of ours nests beyond 4)."""
    try:
        value, notes = _decode_json(text, finish_reason)
    except RecursionError:
        raise OutputError("the answer is JSON nested too deeply") from None
    if _depth_over(value, MAX_ANSWER_DEPTH):
        raise OutputError(f"the answer is JSON nested more than {MAX_ANSWER_DEPTH} levels deep")
    return value, notes


#: how deep a model's JSON answer may nest (plans, claims and matrices nest 3 deep; a group 4)
MAX_ANSWER_DEPTH = 16


def _depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists/objects more than ``limit`` deep (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict | list):
            if d > limit:
                return True
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return False


def _decode_json(text: str, finish_reason: str | None) -> tuple[Any, list[str]]:
    if finish_reason == "length":
        raise OutputError("the answer was cut off at the token limit; answer more briefly")
    stripped = text.strip()
    if not stripped:
        raise OutputError("the answer was empty")
    try:
        return json.loads(stripped), []
    except json.JSONDecodeError:
        pass
    try:  # raw line breaks or tabs inside strings (llama.cpp grammars let them through)
        return json.loads(stripped, strict=False), ["repaired: accepted raw control characters inside JSON strings"]
    except json.JSONDecodeError:
        pass
    unfenced = _FENCE.sub("", stripped).strip()
    start = min((i for i in (unfenced.find("{"), unfenced.find("[")) if i >= 0), default=-1)
    if start >= 0:
        try:
            value, _ = json.JSONDecoder().raw_decode(unfenced[start:])
            return value, ["repaired: took the JSON value out of surrounding text"]
        except json.JSONDecodeError:
            pass
    raise OutputError("the answer is not valid JSON")


def _unwrap(value: Any, key: str, aliases: tuple[str, ...] = ()) -> tuple[list, list[str]]:
    if isinstance(value, list):
        return value, [f"repaired: wrapped a bare list as {{\"{key}\": [...]}}"]
    if not isinstance(value, dict):
        raise OutputError(f'expected a JSON object with a "{key}" list')
    if isinstance(value.get(key), list):
        return value[key], []
    for alias in aliases:
        if isinstance(value.get(alias), list):
            return value[alias], [f'repaired: read "{alias}" as "{key}"']
    raise OutputError(f'the JSON object has no "{key}" list')


def _clean_text(s: str) -> str:
    return " ".join(s.split()).strip(_QUOTES + " ")


# --- plan -------------------------------------------------------------------------------------------


def parse_plan(value: Any, query: str, max_subqueries: int) -> tuple[list[str], list[str]]:
    """Sub-queries from ``{"subqueries": [...]}``: cleaned, de-duplicated, at most ``max_subqueries``.

    Sub-queries that bring in words absent from the query are kept but noted
    (an auditor checks them against the plan rule "add no new tasks, methods,
    data sets or domains").
    """
    items, notes = _unwrap(value, "subqueries", ("queries", "sub_queries", "keywords"))
    query_stems = {stem(w) for w in content_words(query)}
    out: list[str] = []
    seen: set[frozenset[str]] = set()
    dropped = off_topic = underscores = 0
    for item in items:
        if not isinstance(item, str):
            dropped += 1
            continue
        sq = _clean_text(item).rstrip(".?!;,")
        if "_" in sq:
            sq = _clean_text(sq.replace("_", " "))
            underscores += 1
        words = sq.split()
        key = frozenset(stem(w.lower()) for w in content_words(sq))
        if not key or len(words) > MAX_SUBQUERY_WORDS or key in seen:
            dropped += 1
            continue
        if query_stems and not key & query_stems:
            off_topic += 1
            continue
        seen.add(key)
        out.append(sq)
    if dropped:
        notes.append(f"repaired: dropped {dropped} empty, duplicate, non-text or over-long sub-quer{'y' if dropped == 1 else 'ies'}")
    if underscores:
        notes.append(f"repaired: replaced underscores by spaces in {underscores} sub-quer{'y' if underscores == 1 else 'ies'}")
    if off_topic:
        notes.append(f"repaired: dropped {off_topic} sub-quer{'y' if off_topic == 1 else 'ies'} sharing no word with the query")
    if not out:
        raise OutputError("no usable sub-query: every sub-query must be a short keyword phrase made of the question's own terms")
    if len(out) > max_subqueries:
        notes.append(f"repaired: kept the first {max_subqueries} of {len(out)} sub-queries")
        out = out[:max_subqueries]
    for i, sq in enumerate(out, 1):
        new = [w for w in content_words(sq) if stem(w) not in query_stems]
        if new:
            notes.append(f"sub-query {i} uses words not in the query: {', '.join(dict.fromkeys(new))}")
    return out, notes


# --- claims -----------------------------------------------------------------------------------------


def parse_claims(value: Any, paper: Paper, min_claims: int) -> tuple[list[Claim], list[str]]:
    """Typed claims from ``{"claims": [{type, text, source_phrase}]}``, ids c1…, verbatim-checked.

    Raises :class:`OutputError` when fewer than ``min_claims`` usable claims remain.
    """
    items, notes = _unwrap(value, "claims", ("atomic_claims",))
    claims: list[Claim] = []
    seen: set[str] = set()
    dropped = 0
    for item in items:
        if not isinstance(item, dict):
            dropped += 1
            continue
        text = item.get("text", item.get("claim"))
        if not isinstance(text, str) or len(_clean_text(text).split()) < 3:
            dropped += 1
            continue
        text = _clean_text(text)[:MAX_CLAIM_CHARS]
        if text.lower() in seen:
            dropped += 1
            continue
        seen.add(text.lower())
        phrase = item.get("source_phrase", item.get("source", ""))
        phrase = _clean_text(phrase).strip(".… ") if isinstance(phrase, str) else ""
        cid = f"c{len(claims) + 1}"
        raw_type = item.get("type")
        ctype = raw_type.strip().upper() if isinstance(raw_type, str) else ""
        if ctype not in CLAIM_TYPES:
            ctype = classify_claim(text, len(claims))
            notes.append(f"repaired: {cid} type {raw_type!r} is not one of {', '.join(CLAIM_TYPES)}; "
                         f"typed {ctype} by cue words")
        elif raw_type != ctype:
            notes.append(f"repaired: {cid} type {raw_type!r} upper-cased")
        claims.append(Claim(cid, ctype, text, phrase))  # type: ignore[arg-type]
    if dropped:
        notes.append(f"repaired: dropped {dropped} claim(s) without usable text or repeating another")
    if len(claims) < min_claims:
        raise OutputError(f"{len(claims)} usable claim(s); give {min_claims} to {MAX_CLAIMS} claims, "
                          "each with type, text and source_phrase")
    if len(claims) > MAX_CLAIMS:
        notes.append(f"repaired: kept the first {MAX_CLAIMS} of {len(claims)} claims")
        claims = claims[:MAX_CLAIMS]
    claims = check_verbatim(claims, paper.text)
    for c in claims:
        if not c.verbatim:
            notes.append(f"{c.id}: source phrase is not verbatim in the paper's text")
    return claims, notes


# --- entailment matrix ---------------------------------------------------------------------------------

_CLAMP_EPS = 1e-6


def _number(x: Any) -> tuple[float, bool]:
    """(value, was_string); OutputError when ``x`` is not a number."""
    if isinstance(x, bool):
        raise OutputError(f"{x!r} is not a number")
    if isinstance(x, int | float):
        return float(x), False
    if isinstance(x, str):
        try:
            return float(x.strip()), True
        except ValueError:
            pass
    raise OutputError(f"{x!r} is not a number")


def parse_matrix(value: Any, n_u: int, n_v: int) -> tuple[list[list[float]], list[str]]:
    """An n_u × n_v matrix of scores in [0, 1] from ``{"matrix": [[...]]}`` (see module doc for repairs)."""
    rows, notes = _unwrap(value, "matrix", ("scores", "entailment"))
    if len(rows) == n_u * n_v and all(not isinstance(x, list) for x in rows) and n_v > 1:
        rows = [rows[i * n_v : (i + 1) * n_v] for i in range(n_u)]
        notes.append(f"repaired: reshaped a flat list of {n_u * n_v} scores into {n_u} rows of {n_v}")
    if len(rows) != n_u:
        raise OutputError(f"expected {n_u} rows (one per A claim), got {len(rows)}")
    strings = clamped = 0
    out: list[list[float]] = []
    for i, row in enumerate(rows, 1):
        if not isinstance(row, list) or len(row) != n_v:
            got = len(row) if isinstance(row, list) else type(row).__name__
            raise OutputError(f"row {i}: expected {n_v} scores (one per B claim), got {got}")
        vals = []
        for x in row:
            try:
                fx, was_string = _number(x)
            except OutputError as e:
                raise OutputError(f"row {i}: {e}") from None
            strings += was_string
            if not math.isfinite(fx) or fx < -_CLAMP_EPS or fx > 1 + _CLAMP_EPS:
                raise OutputError(f"row {i}: score {fx:g} is outside [0, 1]")
            if fx < 0 or fx > 1:
                clamped += 1
                fx = min(1.0, max(0.0, fx))
            vals.append(fx)
        out.append(vals)
    if strings:
        notes.append(f"repaired: read {strings} score(s) given as text")
    if clamped:
        notes.append(f"repaired: clamped {clamped} score(s) within 1e-6 of [0, 1]")
    return validate_matrix(out, n_u, n_v), notes


# --- JSON schemas sent as response_format --------------------------------------------------------------


def plan_schema(max_subqueries: int) -> dict:
    return {
        "type": "object",
        "properties": {
            "subqueries": {
                "type": "array",
                "items": {"type": "string", "pattern": SUBQUERY_PATTERN},
                "minItems": 1,
                "maxItems": max_subqueries,
            }
        },
        "required": ["subqueries"],
    }


def claims_schema() -> dict:
    return {
        "type": "object",
        "properties": {
            "claims": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "type": {"type": "string", "enum": list(CLAIM_TYPES)},
                        "text": {"type": "string", "minLength": 10, "maxLength": 300},
                        "source_phrase": {"type": "string", "minLength": 3, "maxLength": 200},
                    },
                    "required": ["type", "text", "source_phrase"],
                },
                "minItems": 4,
                "maxItems": MAX_CLAIMS,
            }
        },
        "required": ["claims"],
    }


def matrix_schema(n_u: int, n_v: int) -> dict:
    """Exactly n_u rows of n_v scores, each one of 0, 0.05, …, 1 (a grammar-enforcing server cannot leave [0, 1])."""
    return {
        "type": "object",
        "properties": {
            "matrix": {
                "type": "array",
                "items": {
                    "type": "array",
                    "items": {"type": "number", "enum": list(SCORE_STEPS)},
                    "minItems": n_v,
                    "maxItems": n_v,
                },
                "minItems": n_u,
                "maxItems": n_u,
            }
        },
        "required": ["matrix"],
    }


# --- grouped entailment (prompt entailment_group: one call, one matrix per cited paper) ------------------


def block_id(k: int) -> str:
    """The id of the k-th cited paper's block in a grouped prompt and its answer (1-based): ``P<k>``."""
    return f"P{k}"


def parse_group(value: Any, n_u: int, n_vs: list[int]) -> tuple[dict[int, list[list[float]]], dict[int, str], list[str]]:
    """The matrices of a grouped answer ``{"P1": [[...]], "P2": ...}``, validated block by block.

    Returns ``(matrices, problems, notes)``: ``matrices[k]`` is the n_u × n_vs[k] matrix of block k
    (0-based) when its answer is usable; ``problems[k]`` says why block k is not (missing, wrong
    shape, a score outside [0, 1]). A usable block is never thrown away because another one is not.
    Raises :class:`OutputError` only when the answer is not an object at all. Repairs as
    :func:`parse_matrix` (per block), plus a bare list of exactly ``len(n_vs)`` matrices (in order).
    """
    notes: list[str] = []
    if isinstance(value, list) and len(value) == len(n_vs):
        value = {block_id(k + 1): m for k, m in enumerate(value)}
        notes.append("repaired: read a bare list of matrices as P1, P2, … in order")
    if isinstance(value, dict) and len(n_vs) == 1 and block_id(1) not in value and "matrix" in value:
        value = {block_id(1): value["matrix"]}
        notes.append('repaired: read {"matrix": …} as the one block P1')
    if not isinstance(value, dict):
        raise OutputError('expected a JSON object {"P1": [[...]], "P2": ...} with one matrix per cited paper')
    matrices: dict[int, list[list[float]]] = {}
    problems: dict[int, str] = {}
    for k, n_v in enumerate(n_vs):
        name = block_id(k + 1)
        if name not in value:
            problems[k] = f"no matrix for {name}"
            continue
        try:
            matrix, block_notes = parse_matrix({"matrix": value[name]}, n_u, n_v)
        except OutputError as e:
            problems[k] = f"{name}: {e}"
            continue
        matrices[k] = matrix
        notes.extend(f"{note} ({name})" for note in block_notes)
    return matrices, problems, notes


def group_schema(n_u: int, n_vs: list[int]) -> dict:
    """One required ``P<k>`` property per cited paper: exactly n_u rows of n_vs[k] scores on the 0.05 grid."""
    props = {block_id(k + 1): matrix_schema(n_u, n_v)["properties"]["matrix"] for k, n_v in enumerate(n_vs)}
    return {"type": "object", "properties": props, "required": list(props)}
