"""The evaluation harness: run one method over a benchmark, resumably, and summarise.

Contract (``crase eval``): a run's folder ``DIR`` ends holding one file, ``DIR/run.json.gz``
(:mod:`.run_file`): the pin, the summary and one row per query. The pin is everything that changes the
numbers (:meth:`EvalJob.fingerprint`: benchmark, method, resolved pipeline settings, source and corpus
fingerprint, backend with its model, endpoint and prompt versions, the source filter protocol), so a rerun
into the same DIR with anything else different is refused, naming what differs, instead of mixing results;
``--fresh`` starts over. The summary holds ``recall@k``/``map@k`` for k in 5…50, ``queries``, medians of
|V|, |E|, model calls and wall time. While the run goes, each finished query's row is appended and flushed
to ``DIR/journal.jsonl`` (its first line the pin), so a crash or Ctrl-C loses nothing and a rerun skips the
qids already done; the journal is folded into the run file when the run ends (or is interrupted). A folder
of the older form (``config.json``, ``summary.json``, ``per_query.jsonl``) is resumed the same way and ends
as the one file. One eval at a time writes a DIR (an exclusive lock on the folder itself); a second is
refused at once. A benchmark line that cannot be run (:attr:`BenchQuery.problem`) gets an error row.

Each query runs against ``build_engine(config, source_filter=…)``: for a query
taken from paper P the filter hides P and every paper after P's month. With
``age_reference="query"`` ages are measured from the query's year (paper
Table 3 ablation); by default from the current year. Queries run in worker
processes when ``workers > 1`` (the offline backend is CPU-bound; each worker
shares the parent's corpus copy-on-write).
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from crase_core import atomic
from crase_core.cache import stable_hash
from crase_core.errors import CraseError, InputError
from crase_core.evaluation.benchmark import BenchQuery, load_benchmark, query_filter
from crase_core.evaluation.gold import in_gold_space
from crase_core.evaluation.methods import METHODS, run_method
from crase_core.evaluation.metrics import KS, aggregate_rows, per_query_metrics
from crase_core.evaluation.run_file import (
    LEGACY_FILES,
    RUN_FILE,
    RunFileError,
    legacy_rows,
    read_run,
    write_run,
)
from crase_core.paper_source import PaperSource
from crase_core.pipeline import Engine
from crase_core.runtime import SOURCE_FACTORIES, RuntimeConfig, build_engine, local_source
from crase_core.settings.llm import redact_url
from crase_core.settings.pipeline import PipelineSettings

CORRUPTIONS = ("lexical", "random")
#: the journal of a run in progress (first line: the pin; then one row per finished query)
JOURNAL = "journal.jsonl"
#: version of what a run pins (a folder pinned by an older Crase must be started --fresh).
PIN_VERSION = 2
#: how the harness hides papers from each query (part of the pin: changing it changes every number).
SOURCE_FILTER = "per query with a paper_id: hide that paper and every paper of a later month"


@dataclass
class EvalJob:
    """Everything that determines the numbers of one evaluation run."""

    bench: str
    out: str
    method: str = "crase"
    settings: PipelineSettings = field(default_factory=PipelineSettings)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    age_reference: str = "current"  # "current" (paper default) or "query" (the query's year)
    corrupt_seeds: str | None = None  # None, "lexical" or "random" (paper App. K)
    workers: int = 1
    limit: int | None = None
    retry_errors: bool = False
    variant: str | None = None  # an evaluation-only stage replacement (crase_core.evaluation.variants)
    rankings: bool = True  # the run file keeps each query's ranked list (False: metrics and costs only)

    def fingerprint(self, queries: list[BenchQuery], engine: Engine | None = None) -> dict[str, Any]:
        """Everything that changes the numbers; ``engine`` (built from ``runtime``) adds the source's
        corpus fingerprint and the backend's component identities (model, prompt version and hash)."""
        rt = self.runtime
        fp: dict[str, Any] = {
            "pin": PIN_VERSION,
            "bench": os.path.basename(self.bench),
            "bench_hash": stable_hash([[q.qid, q.query, list(q.relevant), q.paper_id, q.year] for q in queries]),
            "method": self.method,
            "settings": asdict(self.settings),
            "runtime": rt.describe(),
            "age_reference": self.age_reference,
            "corrupt_seeds": self.corrupt_seeds,
            "source_filter": SOURCE_FILTER,
            **({"variant": self.variant} if self.variant else {}),
        }
        if rt.backend == "openai":  # the endpoint without credentials, and what shapes the answers
            fp["llm"] = rt.llm.answer_settings()  # what the result cache keys name too (cache_identity)
        if rt.source == "s2":
            fp["s2"] = {"endpoint": redact_url(rt.s2.base_url), "max_neighbor_pages": rt.s2.max_neighbor_pages,
                        "on_neighbor_error": rt.s2.on_neighbor_error}
        if rt.source == "openalex":
            fp["openalex"] = {"endpoint": redact_url(rt.openalex.base_url), "page_size": rt.openalex.page_size,
                              "max_neighbor_pages": rt.openalex.max_neighbor_pages,
                              "on_neighbor_error": rt.openalex.on_neighbor_error}
        if engine is not None:
            corpus = getattr(engine.source, "corpus", None)
            fp["source"] = {"name": engine.source.name, "corpus": getattr(corpus, "fingerprint", None)}
            fp["backend"] = engine.backend.describe()
        return fp


def unfiltered_source(runtime: RuntimeConfig) -> PaperSource:
    """The run's paper source without any filter: where the leakage filter reads a query paper's date."""
    return SOURCE_FACTORIES[runtime.source](runtime) if runtime.source in SOURCE_FACTORIES else build_engine(runtime).source


def settings_for(job: EvalJob, q: BenchQuery) -> PipelineSettings:
    if job.age_reference == "query" and q.year is not None:
        return job.settings.replace(age_reference_year=q.year)
    return job.settings


def evaluate_query(job: EvalJob, q: BenchQuery, dense: Any = None) -> dict[str, Any]:
    """One per-query row: metrics, top-k ids, costs; ``error`` instead of raising on a CraseError."""
    t0 = time.perf_counter()
    row: dict[str, Any] = {"qid": q.qid, "method": job.method, "n_relevant": len(q.relevant)}
    try:
        if q.problem:
            raise InputError(q.problem)
        engine = build_engine(job.runtime, source_filter=query_filter(q, unfiltered_source(job.runtime)))
        settings = settings_for(job, q)
        if job.corrupt_seeds:
            from crase_core.evaluation.stress import corrupted_run

            out = corrupted_run(q, engine, settings, job.corrupt_seeds)
        else:
            kw: dict[str, Any] = {}
            if job.variant:
                from crase_core.evaluation.variants import apply_variant

                engine, kw["seeding"] = apply_variant(job.variant, engine, local_source(job.runtime))
            out = run_method(job.method, q, engine, settings, dense=dense, **kw)
        ranked = out.ranked[: settings.k]
        stats = dict(out.stats)
        mapped = in_gold_space(ranked, q.relevant, engine.source)  # LitSearch: gold = Semantic Scholar corpus ids
        if mapped is not None:
            stats["source_ids"], ranked = ranked, mapped
    except CraseError as e:
        ranked, stats = [], {"error": str(e)}
    row.update(per_query_metrics(ranked, q.relevant, KS))
    row.update(stats)
    row["ranked"] = ranked
    row["wall_s"] = round(time.perf_counter() - t0, 4)
    return row


# ---- worker processes ---------------------------------------------------------------------------------
_JOB: EvalJob | None = None
_DENSE: Any = None


def _init_worker(job: EvalJob, dense: Any) -> None:
    global _JOB, _DENSE
    _JOB, _DENSE = job, dense


def _work(q: BenchQuery) -> dict[str, Any]:
    assert _JOB is not None
    return evaluate_query(_JOB, q, _DENSE)


# ---- files ----------------------------------------------------------------------------------------------
def _journal_pin(path: Path) -> Any:
    """The pin on a journal's first line; None when there is no journal or no readable first line."""
    try:
        with open(path, encoding="utf-8") as f:
            head = json.loads(f.readline())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    return head["pin"] if isinstance(head, dict) and "pin" in head else None


def _unwritable(journal: Path, e: OSError, done: int) -> InputError:
    """The one line for a journal that cannot be written (read-only, full disk, file-size limit)."""
    return InputError(f"cannot write {journal}: {e.strerror or e}; what was done is kept ({done:,} queries): make "
                      "room (free disk space, lift a file-size limit, make the folder writable) and rerun the same "
                      "command to resume")


def _drop_torn_tail(path: Path) -> None:
    """Cut a half-written last line (a crash mid-write) so that new rows start on a fresh line."""
    if not path.is_file():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        os.truncate(path, data.rfind(b"\n") + 1)  # in place: the lines before are never rewritten


def _median(values: Iterable[float | int | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return float(statistics.median(vals)) if vals else None


def summarize(rows: list[dict[str, Any]], job_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """A run's summary: the contract keys plus medians and error count (``job_info`` as its ``job``)."""
    summary: dict[str, Any] = dict(aggregate_rows(rows, KS))
    summary["queries"] = len(rows)
    for key in ("n_nodes", "n_edges", "n_kept_nodes", "n_kept_edges", "model_calls", "entailment_calls",
                "wall_s", "hub_degree@10", "hub_degree@50"):
        summary[f"median_{key}"] = _median(r.get(key) for r in rows)
    summary["total_wall_s"] = round(sum(r.get("wall_s", 0.0) for r in rows), 3)
    summary["errors"] = sum(1 for r in rows if r.get("error"))
    if job_info:
        summary["job"] = job_info
    return summary


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def differences(old: Any, new: Any, path: str = "") -> list[str]:
    """``key: old → new`` for every leaf that differs between two pins (dotted keys, sorted)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for k in sorted(set(old) | set(new)):
            where = f"{path}.{k}" if path else str(k)
            if k not in old:
                out.append(f"{where}: not pinned → {_short(new[k])}")
            elif k not in new:
                out.append(f"{where}: {_short(old[k])} → not pinned")
            else:
                out += differences(old[k], new[k], where)
        return out
    return [] if old == new else [f"{path or 'pin'}: {_short(old)} → {_short(new)}"]


def _check_pin(out: Path, where: str, old: Any, new: dict[str, Any]) -> None:
    """Refuse to add to ``out`` when the pin ``old`` (read from its file ``where``) differs from ``new``."""
    if old == new:
        return
    if not isinstance(old, dict):
        what = f"{where} is unreadable"
    elif old.get("pin") != PIN_VERSION:
        what = "it was pinned by an older Crase that did not record everything that changes results"
    else:
        diff = differences(old, new)
        what = "differs in " + "; ".join(diff[:6]) + (f"; and {len(diff) - 6} more" if len(diff) > 6 else "")
    raise InputError(f"{out} holds results of a different configuration ({what}); use another --out "
                     "folder or pass --fresh to start over")


_UNREADABLE = object()


def _resume(out: Path, pin: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The rows ``out`` already holds, by qid — from its run file (or a folder of the older form), then the
    journal an interrupted run left — each checked to be of the pin ``pin``."""
    rows: dict[str, dict[str, Any]] = {}
    pins: list[tuple[str, Any]] = []
    if (out / RUN_FILE).exists():
        try:
            run = read_run(out / RUN_FILE)
        except RunFileError:
            pins.append((RUN_FILE, _UNREADABLE))
        else:
            pins.append((RUN_FILE, run.config))
            rows.update((str(r["qid"]), r) for r in run.rows)
    elif (out / "config.json").exists():  # the older form
        try:
            old = json.loads((out / "config.json").read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            old = _UNREADABLE
        pins.append(("config.json", old))
        rows.update((str(r["qid"]), r) for r in legacy_rows(out / "per_query.jsonl"))
    journal_pin = _journal_pin(out / JOURNAL)
    if journal_pin is not None:  # an interrupted run's rows (a torn last line is skipped)
        pins.append((JOURNAL, journal_pin))
        rows.update((str(r["qid"]), r) for r in legacy_rows(out / JOURNAL))
    for where, old in pins:
        _check_pin(out, where, old, pin)
    return rows


def _json_line(row: dict[str, Any]) -> str:
    """One journal line (UTF-8 safe: text that is not valid Unicode is written escaped)."""
    line = json.dumps(row, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(row)
    return line + "\n"


@contextlib.contextmanager
def _exclusive(out: Path) -> Any:
    """Hold a lock on the folder ``out`` itself for the run; another eval writing ``out`` is refused with an
    InputError."""
    def refuse() -> None:
        raise InputError(f"another crase eval is writing {out}; wait for it to finish, or use another --out folder")

    with atomic.folder_lock(out, "the --out folder", refuse):
        yield


def run_eval(job: EvalJob, *, fresh: bool = False, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run (or resume) ``job``; return the summary (also in ``out/run.json.gz`` with the pin and the rows)."""
    if job.method not in METHODS:
        raise InputError(f"unknown method {job.method!r}; choose one of {', '.join(METHODS)}")
    if job.age_reference not in ("current", "query"):
        raise InputError(f"age reference must be current or query (got {job.age_reference!r})")
    if job.corrupt_seeds not in (None, *CORRUPTIONS):
        raise InputError(f"seed corruption must be lexical or random (got {job.corrupt_seeds!r})")
    if job.corrupt_seeds and job.method != "crase":
        raise InputError("seed corruption applies to the crase method only")
    queries = load_benchmark(job.bench, job.limit)
    out = Path(job.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create the --out folder {out}: {e.strerror or e}") from None
    try:
        atomic.check_writable(out / RUN_FILE)  # a read-only folder is said now, before any query runs
    except InputError as e:
        raise InputError(f"{e}: the --out folder must be writable (its results so far are kept as they are)") from None
    with _exclusive(out):
        return _run_locked(job, queries, out, fresh, progress)


def _run_locked(job: EvalJob, queries: list[BenchQuery], out: Path, fresh: bool,
                progress: Callable[[str], None] | None) -> dict[str, Any]:
    journal = out / JOURNAL
    if fresh:
        for name in (RUN_FILE, JOURNAL, *LEGACY_FILES):
            (out / name).unlink(missing_ok=True)
    fp = json.loads(json.dumps(job.fingerprint(queries, build_engine(job.runtime))))
    done_rows = _resume(out, fp)
    if job.retry_errors:
        done_rows = {k: r for k, r in done_rows.items() if not r.get("error")}
    todo = [q for q in queries if q.qid not in done_rows]
    say = progress or (lambda s: print(s, file=sys.stderr, flush=True))
    say(f"{job.method}: {len(queries)} queries, {len(queries) - len(todo)} already done, {len(todo)} to run")
    dense = None
    if job.method == "dense" and todo:
        from crase_core.evaluation.dense import DenseIndex

        dense = DenseIndex(build_engine(job.runtime).source)
    t_start = time.perf_counter()
    workers = max(1, min(job.workers, len(todo)))
    interrupted = False
    try:
        if _journal_pin(journal) is None:  # a new journal (or one whose first line never got written)
            journal.write_text(_json_line({"pin": fp}), encoding="utf-8")
        _drop_torn_tail(journal)
        f = open(journal, "ab", buffering=0)  # noqa: SIM115 (closed below, after the queries)
    except OSError as e:
        raise _unwritable(journal, e, len(done_rows)) from None
    with f:
        def record(row: dict[str, Any], i: int) -> None:
            try:  # unbuffered: a failed write leaves nothing behind to fail again when the file is closed
                line = memoryview(_json_line(row).encode("utf-8"))
                while line:
                    line = line[f.write(line) or 0 :]
            except OSError as e:  # a full disk, a file-size limit: the rows before are kept (a torn line is cut)
                raise _unwritable(journal, e, len(done_rows)) from None
            done_rows[row["qid"]] = row
            el = time.perf_counter() - t_start
            eta = el / i * (len(todo) - i)
            err = f" ERROR {row['error']}" if row.get("error") else ""
            say(f"[{i}/{len(todo)}] {row['qid']}: hits@50 {row['hits@50']}/{row['n_relevant']}, "
                f"ap@50 {row['ap@50']:.3f}, {row['wall_s']:.1f}s (eta {eta:.0f}s){err}")

        try:
            if workers == 1:
                if todo:
                    build_engine(job.runtime)  # load corpus + index before the clock matters
                for i, q in enumerate(todo, 1):
                    record(evaluate_query(job, q, dense), i)
            else:
                build_engine(job.runtime)  # load once in the parent; workers share it copy-on-write
                ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
                with ctx.Pool(workers, initializer=_init_worker, initargs=(job, dense)) as pool:
                    try:
                        for i, row in enumerate(pool.imap_unordered(_work, todo), 1):
                            record(row, i)
                    except KeyboardInterrupt:
                        pool.terminate()
                        raise
        except KeyboardInterrupt:
            interrupted = True
    rows = [done_rows[q.qid] for q in queries if q.qid in done_rows]
    summary = summarize(rows, {"method": job.method, "bench": os.path.basename(job.bench),
                               "age_reference": job.age_reference, "corrupt_seeds": job.corrupt_seeds,
                               "settings": asdict(job.settings), "complete": len(rows) == len(queries)})
    try:
        path = write_run(out, fp, summary, rows, rankings=job.rankings)
    except InputError as e:
        raise InputError(f"{e}; the {len(rows)} rows done are kept in {journal}: make room (free disk space, "
                         "lift a file-size limit) and rerun the same command to write the run file") from None
    for name in (JOURNAL, *LEGACY_FILES):  # folded into the run file (a folder of the older form too)
        (out / name).unlink(missing_ok=True)
    if interrupted:
        say(f"interrupted: {len(rows)} of {len(queries)} queries saved in {path}; rerun the same command to resume")
        raise KeyboardInterrupt
    return summary
