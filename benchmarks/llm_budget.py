"""What the per-query model budget buys (issue 12, "Numbers to report"; prints tables, not a test).

    python benchmarks/llm_budget.py [--n 20] [--budgets 50,200,1000] [--json OUT.json] [--data DIR]
                                    [--scorer group|edge] [--compare edge] [--offset 0]

For the first ``--n`` dev questions (hepth_litsearch_dev) and ``--n`` citation queries (hepth_refs_dev,
leakage-free), runs the default pipeline on the embedded corpus with a deterministic fake model
(``crase_core/testing/fake_model.py``: the offline scores shifted per cell by a fixed hash, so it disagrees with the
offline scorer near θ) behind the cascade, at each budget, at the default budget (calls and tokens),
unlimited, and with no model at all (the offline backend), and reports per budget: model calls, prompt and completion tokens, edges the model decided,
(``--scorer``: the grouped entailment prompt, the default, or one call per edge; ``--compare edge`` adds the
default budget with the other scorer; both scorers give the same matrices, so the unlimited run is one),
the pipeline's measured wall time, the model time under a latency model (below), and how close the
budgeted ranking is to the unlimited one (top-10 overlap, Kendall τ-b over the unlimited top 50).

Latency model (a 7–8B instruct model on one GPU behind vLLM, 8 requests in flight): one call takes
0.03 s + prompt/4000 s + completion/60 s; the model's wall time is the sum over calls divided by 8.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from scipy.stats import kendalltau

from crase_core.backends import offline_backend
from crase_core.evaluation.benchmark import load_benchmark, query_filter
from crase_core.pipeline import Engine, run_query
from crase_core.records import Usage
from crase_core.runtime import RuntimeConfig, local_source
from crase_core.settings.pipeline import DEFAULT_LLM_BUDGET, DEFAULT_LLM_TOKEN_BUDGET, PipelineSettings
from crase_core.store.termstats import TermStats
from crase_core.testing.fake_group_model import FakeGroupModel
from crase_core.testing.fake_model import FakeModel, fake_backend

LATENCY = (0.03, 4000.0, 60.0)  # fixed s, prompt tokens/s, completion tokens/s per request
IN_FLIGHT = 8


class TimedFake(FakeModel):
    """The fake model, adding each call's modelled latency to ``seconds``."""

    seconds = 0.0

    def _charge(self, usage: Usage) -> None:
        # a grouped call's usage is shared among its edges, the call on the first: the fixed latency once
        self.seconds += LATENCY[0] * usage.calls + usage.prompt_tokens / LATENCY[1] + usage.completion_tokens / LATENCY[2]

    def plan(self, query, max_subqueries, meter=None):  # type: ignore[no-untyped-def]
        p = super().plan(query, max_subqueries, meter)
        self._charge(p.usage)
        return p

    def extract_many(self, papers, meter=None):  # type: ignore[no-untyped-def]
        out = super().extract_many(papers, meter)
        for cs in out:
            self._charge(cs.usage)
        return out

    def score_many(self, pairs, meter=None):  # type: ignore[no-untyped-def]
        out = super().score_many(pairs, meter)
        for em in out:
            self._charge(em.usage)
        return out


class TimedGroupFake(TimedFake, FakeGroupModel):
    """The grouped fake model with the same latency model."""


def ranking_of(trace) -> list[str]:  # type: ignore[no-untyped-def]
    return [n.paper.id for n in sorted((n for n in trace.nodes if n.rank is not None), key=lambda n: n.rank)]


def closeness(budgeted: list[str], unlimited: list[str]) -> tuple[float, float]:
    """(top-10 overlap, Kendall τ-b of the unlimited top 50's positions in both rankings)."""
    overlap = len(set(budgeted[:10]) & set(unlimited[:10])) / max(1, min(10, len(unlimited)))
    top = unlimited[:50]
    pos = {p: i for i, p in enumerate(budgeted)}
    a = list(range(len(top)))
    b = [pos.get(p, len(budgeted) + 1) for p in top]
    tau = kendalltau(a, b).statistic if len(top) > 1 else 1.0
    return overlap, float(tau)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--budgets", default="50,200,1000")
    ap.add_argument("--prompt-designs", action="store_true", help="only measure the tokens of prompt designs")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--scorer", choices=("group", "edge"), default="group", help="entailment prompt of the budgeted runs")
    ap.add_argument("--compare", choices=("group", "edge", ""), default="edge",
                    help="also run the default budget with this scorer ('' for none)")
    ap.add_argument("--offset", type=int, default=0, help="skip the first OFFSET queries of each benchmark")
    ap.add_argument("--kinds", default="dev,citation", help="which benchmarks: dev, citation or both")
    ap.add_argument("--tables", type=Path, nargs="+", default=None,
                    help="only print the tables of these --json files (merged, in order)")
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parent / "data",
                    help="folder of hepth_litsearch_dev.jsonl and hepth_refs_dev.jsonl")
    args = ap.parse_args(argv)
    if args.prompt_designs:
        prompt_designs()
        return 0
    if args.tables:
        print_tables([r for f in args.tables for r in json.loads(f.read_text(encoding="utf-8"))])
        return 0

    source = local_source(RuntimeConfig())
    stats = TermStats.from_index(source.text_index)
    off = args.offset
    kinds = set(args.kinds.split(","))
    queries = [("dev", q) for q in load_benchmark(args.data / "hepth_litsearch_dev.jsonl", off + args.n)[off:]
               if "dev" in kinds]
    queries += [("citation", q) for q in load_benchmark(args.data / "hepth_refs_dev.jsonl", off + args.n)[off:]
                if "citation" in kinds]
    budgets: list[tuple[str, int, int | None]] = [(f"{b} calls", b, None) for b in map(int, args.budgets.split(","))]
    default = f"default ({DEFAULT_LLM_BUDGET} calls, {DEFAULT_LLM_TOKEN_BUDGET // 1000}K tokens)"
    budgets.append((default, DEFAULT_LLM_BUDGET, DEFAULT_LLM_TOKEN_BUDGET))
    budgets = [(f"{label}, {args.scorer}", c, t) for label, c, t in budgets]
    if args.compare and args.compare != args.scorer:
        budgets.append((f"{default}, {args.compare}", DEFAULT_LLM_BUDGET, DEFAULT_LLM_TOKEN_BUDGET))
    rows: list[dict[str, Any]] = []
    for i, (kind, q) in enumerate(queries, 1):
        filt = query_filter(q, source) if kind == "citation" else None
        src = source.restricted(filt) if filt is not None and filt.active else source
        runs: dict[str, dict[str, Any]] = {}
        ref: list[str] = []
        for label, calls, tokens in [("unlimited", 0, 0), ("no model (offline only)", -1, 0), *budgets]:
            backend, _ = fake_backend(stats)
            grouped = label == "unlimited" or label.endswith(", group")  # same matrices either way
            model = TimedGroupFake(stats) if grouped else TimedFake(stats)
            backend.planner = backend.extractor = backend.scorer = model
            if calls < 0:  # the offline backend: the keyword plan (the fake model's too), no model at all
                backend, calls = offline_backend(stats), 0
            settings = PipelineSettings(llm_budget=calls, llm_token_budget=tokens)
            t0 = time.perf_counter()
            trace = run_query(q.query, Engine(src, backend, None), settings)
            wall = time.perf_counter() - t0
            c = trace.counters
            ranking = ranking_of(trace)
            if label == "unlimited":
                ref = ranking
            overlap, tau = closeness(ranking, ref)
            runs[label] = {"calls": c.model_calls if backend.fallback is not None else 0, "prompt": c.prompt_tokens, "completion": c.completion_tokens,
                           "edges": len(trace.edges), "model_edges": c.model_edges, "nodes": len(trace.nodes),
                           "pipeline_s": wall, "model_s": model.seconds / IN_FLIGHT, "overlap10": overlap,
                           "tau50": tau, "limit_calls": calls or None, "limit_tokens": tokens or None,
                           "est_calls": trace.budget.planned_calls,
                           "est_tokens": trace.budget.est_prompt_tokens + trace.budget.est_completion_tokens}
            assert not calls or c.model_calls <= calls, (label, c.model_calls)
            if backend.fallback is None:
                c.prompt_tokens = c.completion_tokens = 0  # the offline backend's "calls" cost nothing
            assert not tokens or c.prompt_tokens + c.completion_tokens <= tokens, (label, c.prompt_tokens)
        rows.append({"kind": kind, "qid": q.qid, "runs": runs})
        u = runs["unlimited"]
        print(f"[{i}/{len(queries)}] {kind} {q.qid}: |V| {u['nodes']} |E| {u['edges']} unlimited {u['calls']} calls; "
              + "; ".join(f"{k}: {r['calls']} calls {r['prompt'] + r['completion']} tok ov {r['overlap10']:.2f} "
                          f"τ {r['tau50']:.2f}" for k, r in runs.items() if k != "unlimited"), flush=True)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
    print_tables(rows)
    return 0


def print_tables(rows: list[dict[str, Any]]) -> None:
    """Per benchmark and overall: medians of cost, mean / median / worst (with its query) of tokens, overlap
    and τ."""
    labels = list(rows[0]["runs"])
    for kind in ("dev", "citation", "all"):
        sel = [r for r in rows if kind in ("all", r["kind"])]
        if not sel:
            continue
        print(f"\n{kind} ({len(sel)} queries; calls, edges, times: medians; tokens: median / mean / worst; "
              "overlap and τ: mean / median / worst, with the worst query)")
        print("| budget | calls | prompt tok | compl tok | tokens median / mean / max | model-decided edges | "
              "pipeline s | model s (latency model) | top-10 overlap | Kendall τ top 50 |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
        for label in labels:
            rs = [(r["qid"], r["runs"][label]) for r in sel if label in r["runs"]]

            def med(key: str, rs: list[tuple[str, dict[str, Any]]] = rs) -> float:
                return statistics.median(x[key] for _, x in rs)

            def spread(key: str, rs: list[tuple[str, dict[str, Any]]] = rs) -> str:
                vals = [(x[key], q) for q, x in rs]
                worst = min(vals)
                return (f"{statistics.mean(v for v, _ in vals):.3f} / {statistics.median(v for v, _ in vals):.3f} / "
                        f"{worst[0]:.2f} ({worst[1]})")
            tok = [x["prompt"] + x["completion"] for _, x in rs]
            print(f"| {label} | {med('calls'):,.0f} | {med('prompt'):,.0f} | {med('completion'):,.0f} | "
                  f"{statistics.median(tok):,.0f} / {statistics.mean(tok):,.0f} / {max(tok):,} | "
                  f"{med('model_edges'):,.0f} of {med('edges'):,.0f} | {med('pipeline_s'):.1f} | {med('model_s'):,.0f} | "
                  f"{spread('overlap10')} | {spread('tau50')} |")


def prompt_designs(query: str = "black hole entropy from string microstates") -> None:
    """Tokens per edge decision of the entailment prompts on one default query's graph (offline claims as the
    claim sets), counted with SmolLM2's tokenizer when llama-cpp-python is installed (else characters/4).
    Every design returns the full n_u × n_v matrix of every edge.

    * per-edge (``entailment``, entail-v1): one call per edge, both claim lists with their [TYPE] tags;
    * grouped (``entailment_group``, entail-group-v1, the shipped default): one call per citing paper for
      up to 8 cited papers (:func:`crase_core.llm.components.group_pairs`), its claims sent once, each cited
      paper's claims as a ``<cited id="Pk">`` block; rendered exactly as the scorer sends it;
    * grouped + compact (measured only): as grouped, without the [TYPE] tags, claims cut to 25 words.

    Completion: 6 tokens per score + framing (a real answer's size); the cap sent is also reported.
    """
    from crase_core.backends import offline_backend as _offline
    from crase_core.llm.components import format_claims, group_max_tokens, group_pairs
    from crase_core.llm.prompts import load_prompt
    from crase_core.pipeline import build_graph

    source = local_source(RuntimeConfig())
    engine = Engine(source, _offline(TermStats.from_index(source.text_index)), None)
    build = build_graph(query, engine, PipelineSettings())
    papers, edges = build.expansion.papers, build.expansion.graph.edges
    claims = {cs.paper_id: cs.claims for cs in engine.backend.extractor.extract_many(list(papers.values()))}
    try:
        import llama_cpp

        from crase_core.llm.localserver import find_smollm2_gguf
        vocab = llama_cpp.Llama(str(find_smollm2_gguf()), vocab_only=True, verbose=False)

        def count(text: str) -> int:
            return len(vocab.tokenize(text.encode("utf-8"), add_bos=False))
        how = "SmolLM2 tokenizer"
    except Exception:  # noqa: BLE001 - any failure: fall back to the character estimate
        def count(text: str) -> int:
            return len(text) // 4
        how = "characters/4"
    rows: list[tuple[str, int, int, int, int, int]] = []  # design, calls, prompt, completion, chars/4, cap
    t = load_prompt("entailment")
    calls = prompt = completion = quarter = cap = 0
    for u, v in edges:
        msgs = t.render(claims_a=format_claims(claims[u], "A"), claims_b=format_claims(claims[v], "B"),
                        n_u=len(claims[u]), n_v=len(claims[v]))
        prompt += sum(count(m["content"]) for m in msgs)
        quarter += sum(len(m["content"]) for m in msgs) // 4
        completion += 6 * len(claims[u]) * len(claims[v]) + 6
        cap += 512
        calls += 1
    rows.append(("per-edge (`entailment`, entail-v1)", calls, prompt, completion, quarter, cap))

    def compact(cs: list[Any], letter: str) -> str:
        return "\n".join(f"{letter}{i} {' '.join(c.text.split()[:25])}" for i, c in enumerate(cs, 1))

    scorer_template = load_prompt("entailment_group")
    from crase_core.llm.components import format_cited_blocks
    from crase_core.llm.parse import block_id
    pairs = [(claims[u], claims[v]) for u, v in edges]
    groups = group_pairs(pairs)
    for name in ("grouped (`entailment_group`, entail-group-v1, default)", "grouped + compact (not shipped)"):
        calls = prompt = completion = quarter = cap = 0
        for g in groups:
            citing, cited = pairs[g[0]][0], [pairs[i][1] for i in g]
            if "compact" in name:
                blocks = "\n".join(f'<cited id="{block_id(k)}">\n{compact(c, "B")}\n</cited>'
                                   for k, c in enumerate(cited, 1))
                a = compact(citing, "A")
            else:
                blocks, a = format_cited_blocks(cited), format_claims(citing, "A")
            msgs = scorer_template.render(claims_a=a, cited_blocks=blocks, n_u=len(citing),
                                          shapes=", ".join(f"{block_id(k)}: {len(citing)} × {len(c)}"
                                                           for k, c in enumerate(cited, 1)),
                                          trusted=frozenset({"cited_blocks"}))
            prompt += sum(count(m["content"]) for m in msgs)
            quarter += sum(len(m["content"]) for m in msgs) // 4
            completion += sum(6 * len(citing) * len(c) + 10 for c in cited) + 4
            cap += group_max_tokens(len(citing), [len(c) for c in cited])
            calls += 1
        rows.append((name, calls, prompt, completion, quarter, cap))
    n = len(edges)
    print(f"\nPrompt designs on one default query ({n:,} edges, {len({u for u, _ in edges}):,} citing papers; {how}):")
    print("| design | calls | prompt tokens | completion tokens | tokens per edge decision | prompt chars/4 | "
          "completion cap sent |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, calls, p, c, q, cap in rows:
        print(f"| {name} | {calls:,} | {p:,} | {c:,} | {(p + c) / n:.0f} | {q:,} | {cap:,} |")


if __name__ == "__main__":
    raise SystemExit(main())
