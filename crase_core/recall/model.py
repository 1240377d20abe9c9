"""The recall estimator: a fractional-logit point estimate and conformal intervals. Pure numpy.

Point estimate (Papke & Wooldridge 1996): μ(x) = σ(b + zᵀβ) with z the features standardised on the fitting
set, fitted by Newton's method to minimise the mean Bernoulli deviance of the measured recall y ∈ [0, 1] plus
``ridge``·|β|² (the intercept is not penalised). The deviance is a proper loss for a mean in [0, 1], so μ
estimates E[recall | x] whether y is a share of 25 references or a single hit or miss.

Interval (split-conformal, Mondrian by group): with the scale s(μ) = √(μ(1 − μ) + c) the conformity scores
are r = (y − μ)/s(μ) of queries the model was *not* fitted on (K-fold out-of-fold predictions). Per group g
(a rule on the features, :func:`group_of`) the lower and upper ends are μ + q_lo·s and μ + q_hi·s, q_lo the
⌊(n + 1)·α/2⌋-th smallest and q_hi the ⌈(n + 1)(1 − α/2)⌉-th smallest score of the group's n (Vovk et al.
2005; Romano et al. 2019 for the two-sided form), clipped to [0, 1]: with exchangeable queries each end misses
at most α/2 of the time, so the interval covers with probability ≥ 1 − α. Recall is never above 1, so the
one-sided [μ + q·s, 1] with q the ⌊(n + 1)α⌋-th smallest score is valid too; a group takes whichever of the
two is narrower on its own scores (the questions' recall is 1 for almost every query: there a two-sided
interval ending at 0.99 would miss every query it should hold). A query whose form is ambiguous (it reads as a
title only by a symbol's capital, ``title_form`` 0.5) is of one kind or the other: it trains neither group's model,
and takes the title model's estimate and the span of both groups' intervals, which covers whenever the interval
of its own kind would.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from crase_core.recall.features import FEATURES

#: the interval's nominal coverage
LEVEL = 0.8
#: c of the scale s(μ) = √(μ(1 − μ) + c): keeps an interval open where μ is near 0 or 1
SCALE_FLOOR = 0.02
#: L2 penalty on the standardised coefficients: of 1, 2, 5, 10, 20 on the dev sets' cross-fitted scores, 5 (at 1
#: one fold's question model, ~60 runs nearly all of recall 1, fitted its few partial ones so hard that it
#: estimated held-out hits near 0)
RIDGE = 5.0
#: folds of the out-of-fold predictions the conformal scores come from
FOLDS = 10
#: an open end of an interval (its quantile where there is none: the end is clipped to 0 or 1)
OPEN = 1e3
#: the fewest calibration queries of a group that get a model of their own
MIN_GROUP = 20


def group_of(features: Mapping[str, float]) -> str:
    """The Mondrian group of a run: ``title`` for a query that reads as a paper title
    (:func:`~crase_core.recall.features.title_form`), ``question`` for a question or a typed phrase."""
    return "title" if features.get("title_form", 0.0) >= 0.5 else "question"


def ambiguous(features: Mapping[str, float]) -> bool:
    """Whether the run's query form is ambiguous (``title_form`` strictly between 0 and 1: see
    :func:`~crase_core.recall.features.form_value`)."""
    return 0.0 < features.get("title_form", 0.0) < 1.0


@dataclass
class GroupModel:
    """One group's estimator: standardisation, coefficients, conformal quantiles of its ``n`` queries, and
    their median measured recall (the best constant guess)."""

    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    q_lo: float
    q_hi: float
    n: int
    median: float = 0.0


@dataclass
class RecallModel:
    """A fitted estimator: the features it reads and one :class:`GroupModel` per group (``all`` when the
    calibration had too few queries of some group to fit it alone)."""

    features: list[str]
    groups: dict[str, GroupModel]
    level: float = LEVEL
    scale_floor: float = SCALE_FLOOR
    ridge: float = RIDGE

    def group(self, features: Mapping[str, float]) -> tuple[str, GroupModel] | None:
        """The group a run falls in and its model (``all`` when the calibration fitted one for every run);
        None when the calibration has no model for it."""
        name = group_of(features)
        if name in self.groups:
            return name, self.groups[name]
        return ("all", self.groups["all"]) if "all" in self.groups else None

    def point(self, features: Mapping[str, float]) -> float | None:
        """μ(x), the estimated recall (None: see :meth:`group`)."""
        found = self.group(features)
        return None if found is None else _eta_mu(found[1], self.features, features)

    def interval(self, features: Mapping[str, float]) -> tuple[float, float, float] | None:
        """(μ, lo, hi), the estimate and its interval at :attr:`level`; None when the calibration has no model
        for the run's group."""
        found = self.group(features)
        if found is None:
            return None
        mu, lo, hi = self._own_interval(found[1], features)
        if ambiguous(features) and "question" in self.groups and found[0] == "title":
            _, lo2, hi2 = self._own_interval(self.groups["question"], features)
            lo, hi = min(lo, lo2), max(hi, hi2)
        return mu, lo, hi

    def _own_interval(self, g: GroupModel, features: Mapping[str, float]) -> tuple[float, float, float]:
        mu = _eta_mu(g, self.features, features)
        s = float(_scale(mu, self.scale_floor))
        hi = min(1.0, max(0.0, mu + g.q_hi * s))
        return mu, min(hi, max(0.0, mu + g.q_lo * s)), hi

    def contributions(self, features: Mapping[str, float]) -> dict[str, float]:
        """Each feature's term in the run's linear predictor (coefficient × standardised value)."""
        found = self.group(features)
        if found is None:
            return {}
        g = found[1]
        return {f: c * (features.get(f, 0.0) - m) / s
                for f, m, s, c in zip(self.features, g.mean, g.scale, g.coef, strict=True)}


def _eta_mu(g: GroupModel, names: Sequence[str], features: Mapping[str, float]) -> float:
    z = [(features.get(f, 0.0) - m) / s for f, m, s in zip(names, g.mean, g.scale, strict=True)]
    return _sigmoid(g.intercept + sum(c * v for c, v in zip(g.coef, z, strict=True)))


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def _scale(mu: float | np.ndarray, floor: float) -> float | np.ndarray:
    return np.sqrt(mu * (1.0 - mu) + floor)


def _matrix(rows: Sequence[Mapping[str, float]], names: Sequence[str]) -> np.ndarray:
    return np.array([[float(r.get(n, 0.0)) for n in names] for r in rows], dtype=float).reshape(len(rows), len(names))


def fit_point(x: np.ndarray, y: np.ndarray, ridge: float = RIDGE, iters: int = 50) -> tuple[np.ndarray, float]:
    """(β, b) minimising mean Bernoulli deviance of y under σ(b + xβ) + ridge·|β|²/n (Newton, x standardised)."""
    n, d = x.shape
    a = np.hstack([np.ones((n, 1)), x])
    w = np.zeros(d + 1)
    ybar = float(np.clip(y.mean(), 1e-3, 1 - 1e-3))
    w[0] = math.log(ybar / (1 - ybar))
    pen = np.full(d + 1, 2.0 * ridge)
    pen[0] = 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-np.clip(a @ w, -30.0, 30.0)))
        grad = a.T @ (p - y) + pen * w
        hess = (a * (p * (1 - p))[:, None]).T @ a + np.diag(pen) + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.max(np.abs(step))) < 1e-10:
            break
    return w[1:], float(w[0])


def _standardise(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = x.mean(axis=0) if len(x) else np.zeros(x.shape[1])
    sd = x.std(axis=0) if len(x) else np.ones(x.shape[1])
    return mean, np.where(sd > 1e-9, sd, 1.0)


def _fit_core(x: np.ndarray, y: np.ndarray, ridge: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    mean, sd = _standardise(x)
    coef, b = fit_point((x - mean) / sd, y, ridge)
    return mean, sd, coef, b


def _predict_core(x: np.ndarray, mean: np.ndarray, sd: np.ndarray, coef: np.ndarray, b: float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(b + ((x - mean) / sd) @ coef, -30.0, 30.0)))


def folds_of(keys: Sequence[str], n_folds: int) -> list[int]:
    """A fold per item: items sorted by key (a stratum then a qid, say) dealt round-robin, so each fold holds
    every stratum in proportion; deterministic."""
    order = sorted(range(len(keys)), key=lambda i: keys[i])
    fold = [0] * len(keys)
    for j, i in enumerate(order):
        fold[i] = j % n_folds
    return fold


def conformal_quantiles(scores: Sequence[float], level: float) -> tuple[float, float]:
    """q_lo, q_hi: the ⌊(n + 1)α/2⌋-th and ⌈(n + 1)(1 − α/2)⌉-th smallest of ``scores`` (α = 1 − level),
    −∞/+∞ (clipped to ∓1e3) where n is too small for that rank."""
    s = sorted(scores)
    n = len(s)
    alpha = 1.0 - level
    lo_rank = math.floor((n + 1) * alpha / 2 + 1e-9)  # 1e-9: 1 − 0.8 is 0.19999… in binary
    hi_rank = math.ceil((n + 1) * (1 - alpha / 2) - 1e-9)
    q_lo = s[lo_rank - 1] if 1 <= lo_rank <= n else -OPEN
    q_hi = s[hi_rank - 1] if 1 <= hi_rank <= n else OPEN
    return float(q_lo), float(q_hi)


def fit_group(x: np.ndarray, y: np.ndarray, strata: Sequence[str], *, level: float, ridge: float,
              scale_floor: float, n_folds: int) -> GroupModel:
    """One group's model on its rows ``x`` (features) and recalls ``y``: the coefficients on all of them, the
    conformal quantiles from K-fold out-of-fold scores (folds spread over ``strata``)."""
    keys = [f"{s}\x00{i:06d}" for i, s in enumerate(strata)]
    k = max(2, min(n_folds, len(y)))
    fold = np.array(folds_of(keys, k))
    oof = np.empty(len(y))
    for f in range(k):
        test = fold == f
        train = ~test
        oof[test] = _predict_core(x[test], *_fit_core(x[train], y[train], ridge))
    scale = _scale(oof, scale_floor)
    scores = ((y - oof) / scale).tolist()
    q_lo, q_hi = conformal_quantiles(scores, level)
    lower = lower_quantile(scores, level)  # the one-sided form [μ + q·s, 1]: recall is never above 1

    def width(lo_q: float, hi_q: float) -> float:
        return float(np.mean(np.clip(oof + hi_q * scale, 0, 1) - np.clip(oof + lo_q * scale, 0, 1)))

    if width(lower, OPEN) < width(q_lo, q_hi):  # the narrower of the two on the group's own scores
        q_lo, q_hi = lower, OPEN
    mean, sd, coef, b = _fit_core(x, y, ridge)
    return GroupModel(mean.tolist(), sd.tolist(), coef.tolist(), b, q_lo, q_hi, len(y), float(np.median(y)))


def lower_quantile(scores: Sequence[float], level: float) -> float:
    """q of the one-sided interval [μ + q·s, 1]: the ⌊(n + 1)α⌋-th smallest score (−∞ where n is too small)."""
    s = sorted(scores)
    rank = math.floor((len(s) + 1) * (1.0 - level) + 1e-9)
    return float(s[rank - 1]) if 1 <= rank <= len(s) else -OPEN


def fit(rows: Sequence[Mapping[str, float]], y: Sequence[float], strata: Sequence[str] | None = None, *,
        features: Sequence[str] = FEATURES, level: float = LEVEL, ridge: float = RIDGE,
        scale_floor: float = SCALE_FLOOR, n_folds: int = FOLDS, min_group: int = MIN_GROUP) -> RecallModel:
    """Fit on ``rows`` (feature dicts) with measured recalls ``y``: one model per group of :func:`group_of`
    with at least ``min_group`` rows of an unambiguous form (:func:`ambiguous`), and ``all`` (every row) when
    some group has fewer. ``strata`` (a label per row, e.g. benchmark and kind) spread the conformal folds
    evenly."""
    if len(rows) < min_group or len(rows) != len(y):
        raise ValueError(f"fitting the recall estimator needs at least {min_group} runs, each with its measured "
                         f"recall (got {len(rows)})")
    x = _matrix(rows, features)
    yy = np.clip(np.asarray(y, dtype=float), 0.0, 1.0)
    st = list(strata) if strata is not None else [""] * len(rows)
    names = [None if ambiguous(r) else group_of(r) for r in rows]  # an ambiguous form trains neither group
    members = {g: [i for i, n in enumerate(names) if n == g] for g in sorted({n for n in names if n})}
    kw = {"level": level, "ridge": ridge, "scale_floor": scale_floor, "n_folds": n_folds}
    groups = {g: fit_group(x[idx], yy[idx], [st[i] for i in idx], **kw)  # type: ignore[arg-type]
              for g, idx in members.items() if len(idx) >= min_group}
    if len(groups) < len(members) or not groups:
        groups["all"] = fit_group(x, yy, st, **kw)  # type: ignore[arg-type]
    return RecallModel(list(features), groups, level, scale_floor, ridge)


def cross_fit(rows: Sequence[Mapping[str, float]], y: Sequence[float], strata: Sequence[str], *,
              n_folds: int = FOLDS, **kw: object) -> list[tuple[float, float, float] | None]:
    """(μ, lo, hi) for every row from a model fitted (:func:`fit`, conformal scores included) without it:
    K-fold over the rows, folds spread over ``strata``. What the dev-set numbers are scored on."""
    keys = [f"{s}\x00{i:06d}" for i, s in enumerate(strata)]
    fold = folds_of(keys, max(2, min(n_folds, len(rows))))
    out: list[tuple[float, float, float] | None] = [None] * len(rows)
    for f in sorted(set(fold)):
        train = [i for i in range(len(rows)) if fold[i] != f]
        model = fit([rows[i] for i in train], [y[i] for i in train], [strata[i] for i in train],
                    n_folds=n_folds, **kw)  # type: ignore[arg-type]
        for i in range(len(rows)):
            if fold[i] == f:
                out[i] = model.interval(rows[i])
    return out
