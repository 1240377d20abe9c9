"""A recall calibration file: the fitted estimator for one corpus, as plain JSON (never pickle).

Format (``crase bench calibrate`` writes it; :func:`read_calibration` checks every field)::

    {"format": "crase-recall-calibration", "version": 1,
     "corpus": {"source": "local:hepth@fca14e40", "name": "hepth"},   # the trace's ``source`` it is for
     "k": 50,                                  # the list length whose recall it estimates
     "fitted_on": {"benchmarks": [{"name", "hash", "queries"}], "method": "crase", "settings": {...},
                   "backend": {...}, "code": "…", "created": "…"},     # what the runs it learned from were
     "model": {"features": [...], "mean": [...], "scale": [...], "coef": [...], "intercept": …,
               "groups": {"question": {"q_lo", "q_hi", "n"}, …}, "level", "scale_floor", "ridge", "medians"},
     "scores": {...}}                          # its cross-fitted coverage, width, MAE, ρ on those runs

Where a run finds its calibration (:func:`find_calibration`): the file the ``--recall-calibration`` knob names,
else ``recall_calibration.json`` in the local corpus's folder, else the calibrations shipped with Crase
(``crase_core/recall/calibrations/*.json``) — the first whose corpus is the run's. A file that names another
corpus, or that cannot be read, is not used; the run says why.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from crase_core import atomic
from crase_core.bounded import Unreadable, read_regular
from crase_core.errors import InputError
from crase_core.recall.features import FEATURES
from crase_core.recall.model import GroupModel, RecallModel

FORMAT = "crase-recall-calibration"
VERSION = 1
#: the calibration a local corpus folder may hold
CORPUS_FILE = "recall_calibration.json"
#: the shipped calibrations
SHIPPED_DIR = Path(__file__).resolve().parent / "calibrations"
MAX_BYTES = 1 << 20


class CalibrationError(InputError):
    """A calibration file that cannot be used (unreadable, not a calibration, malformed)."""


@dataclass
class Calibration:
    """A fitted estimator and what it was fitted for and on."""

    source: str
    name: str
    k: int
    model: RecallModel
    fitted_on: dict[str, Any] = field(default_factory=dict)
    scores: dict[str, Any] = field(default_factory=dict)
    path: str = ""

    def label(self) -> str:
        """``hepth (2 benchmarks, 220 queries)``: what the words say it was calibrated on."""
        benches = self.fitted_on.get("benchmarks") or []
        n = sum(int(b.get("queries", 0)) for b in benches if isinstance(b, dict))
        what = f"{len(benches)} benchmark{'s' if len(benches) != 1 else ''}, {n} queries" if benches else "?"
        return f"{self.name} ({what})"


def to_json(cal: Calibration) -> dict[str, Any]:
    m = cal.model
    return {"format": FORMAT, "version": VERSION, "corpus": {"source": cal.source, "name": cal.name}, "k": cal.k,
            "fitted_on": cal.fitted_on,
            "model": {"features": m.features, "level": m.level, "scale_floor": m.scale_floor, "ridge": m.ridge,
                      "groups": {g: asdict(v) for g, v in m.groups.items()}},
            "scores": cal.scores}


def write_calibration(path: str | os.PathLike[str], cal: Calibration) -> Path:
    """Write ``cal`` to ``path`` atomically (a folder, symlink or device there is refused)."""
    return atomic.write_text(path, json.dumps(to_json(cal), indent=1, ensure_ascii=False) + "\n")


def _num(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{where} is not a finite number")
    return float(value)


def _nums(value: Any, n: int, where: str) -> list[float]:
    if not isinstance(value, list) or len(value) != n:
        raise ValueError(f"{where} is not a list of {n} numbers")
    return [_num(v, f"{where}[{i}]") for i, v in enumerate(value)]


def from_json(doc: Any, path: str = "") -> Calibration:
    """A :class:`Calibration` from parsed JSON; :class:`ValueError` naming the first bad field."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} file")
    if doc.get("version") != VERSION:
        raise ValueError(f"version {doc.get('version')!r}, this Crase reads version {VERSION}")
    corpus, m = doc.get("corpus"), doc.get("model")
    if not isinstance(corpus, dict) or not isinstance(corpus.get("source"), str) or not isinstance(m, dict):
        raise ValueError("its corpus or model is missing")
    k = doc.get("k")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError("k is not a positive integer")
    features = m.get("features")
    if not isinstance(features, list) or not features or any(f not in FEATURES for f in features):
        raise ValueError(f"model.features must be names among {', '.join(FEATURES)}")
    n = len(features)
    groups = m.get("groups")
    if not isinstance(groups, dict) or not groups:
        raise ValueError("model.groups is missing")
    models: dict[str, GroupModel] = {}
    for g, v in groups.items():
        where = f"model.groups.{g}"
        if not isinstance(v, dict):
            raise ValueError(f"{where} is not an object")
        n_g = v.get("n")
        if isinstance(n_g, bool) or not isinstance(n_g, int) or n_g < 1:
            raise ValueError(f"{where}.n is not a positive integer")
        scale = _nums(v.get("scale"), n, f"{where}.scale")
        if any(s <= 0 for s in scale):
            raise ValueError(f"{where}.scale holds a number ≤ 0")
        models[str(g)] = GroupModel(_nums(v.get("mean"), n, f"{where}.mean"), scale,
                                    _nums(v.get("coef"), n, f"{where}.coef"), _num(v.get("intercept"), f"{where}.intercept"),
                                    _num(v.get("q_lo"), f"{where}.q_lo"), _num(v.get("q_hi"), f"{where}.q_hi"), n_g,
                                    _num(v.get("median", 0.0), f"{where}.median"))
    level = _num(m.get("level"), "model.level")
    if not 0 < level < 1:
        raise ValueError("model.level is not between 0 and 1")
    floor = _num(m.get("scale_floor"), "model.scale_floor")
    if floor <= 0:
        raise ValueError("model.scale_floor is not above 0")
    model = RecallModel([str(f) for f in features], models, level, floor, _num(m.get("ridge", 0.0), "model.ridge"))
    fitted_on = doc.get("fitted_on") if isinstance(doc.get("fitted_on"), dict) else {}
    scores = doc.get("scores") if isinstance(doc.get("scores"), dict) else {}
    return Calibration(str(corpus["source"]), str(corpus.get("name") or corpus["source"]), k, model,
                       fitted_on or {}, scores or {}, path)


def read_calibration(path: str | os.PathLike[str]) -> Calibration:
    """The calibration file ``path``; :class:`CalibrationError` naming the file and the problem."""
    p = Path(path)
    try:
        data = read_regular(p, MAX_BYTES)
    except FileNotFoundError:
        raise CalibrationError(f"{p}: no such recall calibration file") from None
    except (Unreadable, OSError) as e:
        raise CalibrationError(f"recall calibration {p} is unreadable: {getattr(e, 'strerror', None) or e}") from None
    try:
        return from_json(json.loads(data), str(p))
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise CalibrationError(f"recall calibration {p} is unusable: {e}") from None


def _stamp(p: Path) -> tuple[int, int] | None:
    try:
        st = p.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


@lru_cache(maxsize=16)
def _cached(path: str, stamp: tuple[int, int] | None) -> Calibration | CalibrationError:
    try:
        return read_calibration(path)
    except CalibrationError as e:
        return e


def load_cached(path: Path) -> Calibration | CalibrationError:
    """:func:`read_calibration` of ``path``, cached while the file is unchanged; the error instead of raising."""
    return _cached(str(path), _stamp(path))


def shipped() -> list[Path]:
    """The calibrations shipped with Crase, by name."""
    return sorted(SHIPPED_DIR.glob("*.json")) if SHIPPED_DIR.is_dir() else []


@dataclass
class Lookup:
    """The calibration found for a run's source, or why there is none."""

    calibration: Calibration | None
    why_not: str = ""


def find_calibration(source: str, explicit: str | os.PathLike[str] | None = None,
                     corpus_dir: str | os.PathLike[str] | None = None) -> Lookup:
    """The calibration for the run source ``source`` (the trace's ``source``): ``explicit`` (the knob), else
    ``corpus_dir/recall_calibration.json``, else a shipped one for ``source``. An explicit or corpus-folder
    file for another corpus, or unreadable, is not used; :attr:`Lookup.why_not` says why."""
    problems: list[str] = []
    candidates: list[tuple[Path, str]] = []
    if explicit:
        candidates.append((Path(explicit), "the --recall-calibration file"))
    if corpus_dir:
        p = Path(corpus_dir) / CORPUS_FILE
        if p.is_file():
            candidates.append((p, "the corpus folder's calibration"))
    candidates += [(p, "the shipped calibration") for p in shipped()]
    for path, what in candidates:
        got = load_cached(path)
        if isinstance(got, CalibrationError):
            if what != "the shipped calibration":
                problems.append(str(got))
            continue
        if got.source == source:
            return Lookup(got)
        if what != "the shipped calibration":
            problems.append(f"{what} {path} is for the corpus {got.source}, not this run's {source}")
    why = (f"no recall calibration for the corpus {source}: fit one with `crase bench calibrate` on a benchmark "
           f"of this corpus and save it as {CORPUS_FILE} in the corpus folder (or pass --recall-calibration)")
    return Lookup(None, "; ".join([*problems, why]))
