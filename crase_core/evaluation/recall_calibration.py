"""``crase bench calibrate``: fit the recall estimator for a corpus from evaluation runs of its benchmarks.

Contract: ``crase bench calibrate SRC [SRC …] --out FILE`` where each SRC is a ``crase eval`` run folder of the
default method (its rows carry ``recall_features``, :func:`crase_core.evaluation.methods.recall_stats`) or a
benchmark file (``.jsonl``), which is first evaluated with the default method into ``--runs DIR/<name>`` (default:
``<name>.runs`` beside it; resumable, like ``crase eval``). Every run must be of one corpus. Writes the calibration (JSON,
:mod:`crase_core.recall.calibration`) atomically to FILE, with what it was fitted on (benchmarks and their
hashes, the method, the pipeline settings, the backend, the Crase version and commit) and its cross-fitted
scores; prints those scores, and with ``--report DIR`` writes ``DIR/recall_calibration.md`` and the
calibration plot. A run becomes a corpus's estimate once FILE is ``recall_calibration.json`` in the corpus
folder, or is passed as ``--recall-calibration FILE``.

Cross-fitting (:func:`cross_fitted`): the rows are dealt into 10 folds spread over benchmark and group; each
fold's rows are estimated by a calibration fitted (conformal scores included) on the other nine, so no query
is scored by an estimator that saw it.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crase_core import atomic
from crase_core.errors import InputError
from crase_core.evaluation.recall_report import (
    ESTIMATE,
    INTERVAL,
    calibration_plot,
    estimate_scores,
    measured_recall,
    scores_table,
)
from crase_core.evaluation.run_file import RunFileError, is_run, read_run
from crase_core.recall.calibration import CORPUS_FILE, Calibration, write_calibration
from crase_core.recall.model import FOLDS, MIN_GROUP, cross_fit, fit

Row = dict[str, Any]


@dataclass
class RunSet:
    """The usable rows of one evaluation run and what it was run with."""

    bench: str
    config: dict[str, Any]
    rows: list[Row]
    kinds: dict[str, str] = field(default_factory=dict)


def usable(row: Mapping[str, Any]) -> bool:
    """A row the estimator can learn from: features, a measured recall, no error."""
    return (isinstance(row.get("recall_features"), dict) and not row.get("error")
            and measured_recall(row) is not None)


def load_runset(folder: str | Path, kinds: Mapping[str, str] | None = None) -> RunSet:
    """The run folder ``folder`` as a :class:`RunSet`; :class:`InputError` when it is not a run of the default
    method with recall features."""
    try:
        run = read_run(folder)
    except RunFileError as e:
        raise InputError(str(e)) from None
    method = run.config.get("method")
    if method != "crase":
        raise InputError(f"{folder} is a run of the {method} method; the recall estimator is fitted on runs of the "
                         "default method (crase)")
    rows = [r for r in run.rows if usable(r)]
    if not rows:
        raise InputError(f"{folder}: no row carries the run's recall features (runs from before recall estimates "
                         "do not); rerun it with crase eval --fresh")
    return RunSet(str(run.config.get("bench") or Path(folder).name), run.config, rows, dict(kinds or {}))


def _strata(sets: Sequence[RunSet]) -> tuple[list[Row], list[float], list[str]]:
    rows = [r for s in sets for r in s.rows]
    y = [float(measured_recall(r) or 0.0) for r in rows]
    strata = [f"{s.bench}/{r.get('recall_group', '')}" for s in sets for r in s.rows]
    return rows, y, strata


def cross_fitted(sets: Sequence[RunSet], **kw: Any) -> list[list[Row]]:
    """Each set's rows with ``estimated_recall@50`` and its interval replaced by cross-fitted ones (see the
    module docstring); a row whose group the fold's calibration lacks gets none."""
    rows, y, strata = _strata(sets)
    got = cross_fit([r["recall_features"] for r in rows], y, strata, **kw)
    out: list[list[Row]] = []
    i = 0
    for s in sets:
        mine: list[Row] = []
        for r in s.rows:
            row = {k: v for k, v in r.items() if k not in (ESTIMATE, INTERVAL)}
            if got[i] is not None:
                mu, lo, hi = got[i]  # type: ignore[misc]
                row[ESTIMATE], row[INTERVAL] = round(mu, 4), [round(lo, 4), round(hi, 4)]
            mine.append(row)
            i += 1
        out.append(mine)
    return out


def score_groups(sets: Sequence[RunSet], estimated: Sequence[Sequence[Row]]) -> dict[str, list[Row]]:
    """label → rows: each set, each set's groups (title / question), and each set's kinds where known."""
    groups: dict[str, list[Row]] = {}
    for s, rows in zip(sets, estimated, strict=True):
        groups[s.bench] = list(rows)
        by: dict[str, list[Row]] = {}
        for r in rows:
            by.setdefault(f"{s.bench} / {r.get('recall_group') or '?'} form", []).append(r)
            kind = s.kinds.get(str(r.get("qid")))
            if kind:
                by.setdefault(f"{s.bench} / {kind}", []).append(r)
        if len([k for k in by if k.endswith(" form")]) > 1:
            groups.update({k: v for k, v in by.items() if k.endswith(" form")})
        groups.update({k: v for k, v in by.items() if not k.endswith(" form")})
    return groups


def scores_json(groups: Mapping[str, Sequence[Row]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, rows in groups.items():
        s = estimate_scores(rows)
        if s is not None:
            out[label] = {"queries": s.n, "coverage": round(s.coverage, 4), "mean_width": round(s.mean_width, 4),
                          "mae": round(s.mae, 4), "constant_mae": round(s.constant_mae, 4),
                          "spearman": None if s.spearman is None else round(s.spearman, 4),
                          "mean_estimate_covered": s.mean_estimate_covered, "mean_estimate_missed": s.mean_estimate_missed}
    return out


def code_version() -> str:
    """The installed Crase's version, and the commit of its checkout where it is one (``0.x+g1234abc``, with
    ``.dirty`` when crase_core/ holds uncommitted changes besides the shipped calibrations)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("crase-explorer")
    except PackageNotFoundError:
        v = "unknown"
    here = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=here, capture_output=True,
                                text=True, timeout=5, check=False).stdout.strip()
        # the library's code differs from the commit (the shipped calibrations themselves aside)
        dirty = commit and subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "..", ":!../recall/calibrations"],
                                          cwd=here, capture_output=True, timeout=5, check=False).returncode == 1
    except (OSError, subprocess.SubprocessError):
        commit, dirty = "", False
    return (f"{v}+g{commit}" + (".dirty" if dirty else "")) if commit else v


def fit_calibration(sets: Sequence[RunSet], name: str | None = None, **kw: Any) -> Calibration:
    """The calibration fitted on every row of ``sets`` (one corpus), with its cross-fitted scores."""
    rows, y, strata = _strata(sets)
    if len(rows) < MIN_GROUP:
        raise InputError(f"{len(rows)} usable queries; the recall estimator needs at least {MIN_GROUP} (make a larger "
                         "benchmark: crase bench make DIR --n 150)")
    sources = {str(r.get("recall_source")) for s in sets for r in s.rows}
    if len(sources) != 1:
        raise InputError("the runs are of different corpora (" + ", ".join(sorted(sources)) + "); calibrate each "
                         "corpus on its own runs")
    settings = [s.config.get("settings") for s in sets]
    if any(x != settings[0] for x in settings):
        raise InputError("the runs were made with different pipeline settings; calibrate on runs of one "
                         "configuration")
    model = fit([r["recall_features"] for r in rows], y, strata, **kw)
    estimated = cross_fitted(sets, **kw)
    source = sources.pop()
    cfg = sets[0].config
    fitted_on = {
        "benchmarks": [{"name": s.bench, "hash": s.config.get("bench_hash"), "queries": len(s.rows)} for s in sets],
        "method": "crase", "settings": settings[0], "backend": cfg.get("backend"),
        "runtime": {k: v for k, v in (cfg.get("runtime") or {}).items() if k != "corpus_dir"},
        "code": code_version(), "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "cross_fitting": f"{FOLDS}-fold over the queries, folds spread over benchmark and group",
    }
    corpus_name = source.split(":", 1)[-1].split("@", 1)[0]
    return Calibration(source, name or corpus_name, 50, model, fitted_on,
                       scores_json(score_groups(sets, estimated)))


def _sources(args: argparse.Namespace) -> list[RunSet]:
    from crase_core.evaluation.benchmark import load_benchmark
    from crase_core.evaluation.harness import EvalJob, run_eval
    from crase_core.settings.config import settings_from_args

    sets: list[RunSet] = []
    for src in args.sources:
        p = Path(src)
        if p.is_dir():
            if not is_run(p):
                raise InputError(f"{p} holds no evaluation run (run.json.gz); give a crase eval --out folder or a "
                                 "benchmark file")
            sets.append(load_runset(p))
        elif p.is_file():
            queries = load_benchmark(str(p))
            kinds = {q.qid: str(q.extra.get("kind", "")) for q in queries if q.extra.get("kind")}
            settings = settings_from_args(args)
            folder = Path(args.runs) / p.stem if args.runs else p.parent / f"{p.stem}.runs"
            run_eval(EvalJob(bench=str(p), out=str(folder), settings=settings.pipeline, runtime=settings.runtime,
                             workers=args.workers), fresh=args.fresh)
            sets.append(load_runset(folder, kinds))
        else:
            raise InputError(f"{p}: no such run folder or benchmark file")
    return sets


def cmd_bench_calibrate(args: argparse.Namespace) -> int:
    atomic.check_writable(args.out)
    sets = _sources(args)
    cal = fit_calibration(sets, args.name)
    write_calibration(args.out, cal)
    crossed = cross_fitted(sets)
    table = scores_table(score_groups(sets, crossed), n_resamples=args.resamples)
    print(f"{args.out}: the recall estimator for {cal.source}, fitted on {cal.label()}")
    print("cross-fitted (no query scored by an estimator fitted on it):")
    print(table)
    if args.report:
        report = Path(args.report)
        report.mkdir(parents=True, exist_ok=True)
        plot = calibration_plot(report / "recall_calibration.png", {s.bench: rows for s, rows in
                                                                   zip(sets, crossed, strict=True)},
                                title=f"recall@50 estimate, cross-fitted ({cal.source})")
        parts = [f"# Recall estimate: {cal.source}", "",
                 f"Fitted on {cal.label()} ({cal.fitted_on['code']}); 80 % intervals, cross-fitted; brackets: 95 % "
                 "bootstrap intervals over queries; gain: the constant guess's MAE less the estimate's.", "", table,
                 ""]
        if plot is not None:
            parts += ["![calibration](recall_calibration.png)", ""]
        atomic.write_text(report / "recall_calibration.md", "\n".join(parts))
        print(f"report: {report / 'recall_calibration.md'}")
    print(f"use it: save it as {CORPUS_FILE} in the corpus folder, or pass --recall-calibration {args.out}")
    return 0


def add_calibrate_parser(bsub: Any) -> None:
    """Register ``crase bench calibrate`` on the ``crase bench`` sub-parsers."""
    from crase_core.settings.config import add_arguments

    c = bsub.add_parser("calibrate", help="fit the recall estimate for a corpus from its benchmarks (eval runs of "
                        "the default, or benchmark files to run first)", description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("sources", nargs="+", metavar="SRC", help="crase eval run folders of the default method, or "
                   "benchmark files (.jsonl) to evaluate first")
    c.add_argument("--out", required=True, help="the calibration file to write (JSON)")
    c.add_argument("--runs", default=None, metavar="DIR", help="where benchmark files are evaluated (DIR/NAME "
                   "for NAME.jsonl; resumable; default: NAME.runs beside each benchmark file)")
    c.add_argument("--fresh", action="store_true", help="evaluate benchmark files afresh (discard earlier runs "
                   "in their folders: after the default changed)")
    c.add_argument("--report", default=None, metavar="DIR", help="also write DIR/recall_calibration.md and its plot")
    c.add_argument("--name", default=None, help="the corpus's name in the words (default: from the runs)")
    c.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples of the printed intervals "
                   "(0: none; default: %(default)s)")
    c.add_argument("--workers", type=int, default=1, help="parallel worker processes for benchmark files")
    add_arguments(c)
    c.set_defaults(func=cmd_bench_calibrate)


def eval_sections(folder: str | Path, bench: str, rows: Sequence[Row],
                  kinds: Mapping[str, str]) -> list[tuple[str, str]]:
    """The ``crase eval`` report's recall-estimate sections for one run of the default: the estimates as the
    run made them (with the calibration it found), the same estimator cross-fitted on this run's own rows
    (when it has enough), both by kind, and the calibration plot ``folder/recall_calibration.png``. [] when
    no row carries recall features."""
    from crase_core.evaluation.recall_report import grouped

    usable_rows = [r for r in rows if usable(r)]
    if not usable_rows:
        return []
    out: list[tuple[str, str]] = []
    plots: dict[str, Sequence[Row]] = {}
    as_run = [r for r in usable_rows if ESTIMATE in r]
    notes = sorted({str(r.get("recall_note")) for r in usable_rows if r.get("recall_note") and ESTIMATE not in r})
    body = []
    if as_run:
        body.append(scores_table(grouped(as_run, kinds, bench)))
        plots["as run"] = as_run
    if notes:
        body.append("Not estimated for " + f"{len(usable_rows) - len(as_run)} queries: " + "; ".join(notes[:3]))
    out.append(("Recall estimate as run (80 % intervals; measured recall@50 = hits@50 / relevant)",
                "\n\n".join(body) + "\n\nWhere the calibration was fitted on this benchmark's own queries these "
                "numbers are in-sample; the cross-fitted ones below are not."))
    if len(usable_rows) >= 2 * MIN_GROUP:
        sets = [RunSet(bench, {}, usable_rows, dict(kinds))]
        crossed = cross_fitted(sets)[0]
        out.append((f"Recall estimate cross-fitted on this run ({FOLDS}-fold: no query scored by an estimator "
                    "fitted on it)", scores_table(grouped(crossed, kinds, bench))))
        plots["cross-fitted"] = crossed
    plot = calibration_plot(Path(folder) / "recall_calibration.png", plots, title=f"recall@50 estimate: {bench}")
    if plot is not None:
        out.append(("Recall estimate against measured recall", "![recall calibration](recall_calibration.png)"))
    return out
