"""The paper's benchmark where the network exists: LitSearch's questions (benchmarks/data/litsearch/, gold =
Semantic Scholar corpus ids) through ``crase eval --source s2``, here against the fake Graph API (real HTTP on
127.0.0.1) serving three of the questions' gold papers under their real corpus ids."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "faults"))
from cli_tools import crase  # noqa: E402

from crase_core.evaluation.benchmark import load_benchmark  # noqa: E402
from crase_core.evaluation.run_file import read_run  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "litsearch"


def test_the_shipped_litsearch_files_hold_every_question():
    every = load_benchmark(DATA / "litsearch.jsonl")
    manual = load_benchmark(DATA / "litsearch_manual.jsonl")
    assert len(every) == 597 and len(manual) == 246
    assert sum(q.extra["kind"] == "specific" for q in every) == 442  # the source's specificity counts
    assert {q.extra["query_set"] for q in manual} == {"manual_acl", "manual_iclr"}
    assert sum(q.extra["query_set"] == "manual_acl" for q in manual) == 155
    assert all(r.startswith("CorpusId:") and r[9:].isdigit() for q in every for r in q.relevant)
    assert sum(len(q.relevant) > 1 for q in every) == 34 and all(q.paper_id is None for q in every)
    source = [json.loads(line) for line in (Path(__file__).resolve().parents[2] / "shared" / "data" / "litsearch" /
                                          "litsearch_queries.jsonl").open()] if (
        Path(__file__).resolve().parents[2] / "shared" / "data" / "litsearch").is_dir() else None
    if source is not None:  # the copy is the source file's questions and gold, in order
        assert [q.query for q in every] == [r["query"] for r in source]
        assert [list(q.relevant) for q in every] == [[f"CorpusId:{c}" for c in r["corpusids"]] for r in source]


def test_crase_eval_runs_litsearch_questions_against_semantic_scholar(capsys, fake, tmp_path):
    questions = load_benchmark(DATA / "litsearch.jsonl")
    picked = {q.qid: q for q in questions if q.qid in ("litsearch-inline_acl-001", "litsearch-inline_acl-002",
                                                       "litsearch-inline_acl-005")}
    # the fake serves each question's (first) gold paper as one of its transformer papers, under its corpus id
    serve = dict(zip(sorted(picked), ("p02", "p03", "p07"), strict=True))
    for qid, pid in serve.items():
        fake.papers[pid].setdefault("externalIds", {})["CorpusId"] = int(picked[qid].relevant[0].split(":")[1])
    bench = tmp_path / "ls.jsonl"
    bench.write_text("".join(json.dumps({"qid": q.qid, "query": q.query, "relevant": list(q.relevant),
                                         **q.extra}) + "\n" for q in picked.values()))
    for method in ("crase", "bm25"):
        out = tmp_path / method
        r = crase(capsys, "eval", bench, "--out", out, "--method", method, "--source", "s2", "--s2-base-url",
                  fake.base_url, "--s2-rate", "0", "--s2-cache-dir", tmp_path / "s2")
        assert r.code == 0, r.err
        run = read_run(out)
        rows = {row["qid"]: row for row in run.rows}
        assert set(rows) == set(picked) and not any(row.get("error") for row in rows.values())
        for qid, row in rows.items():
            gold = picked[qid].relevant
            # every ranked Semantic Scholar paper is scored as its corpus id; the gold one counts as a hit
            assert len(row["ranked"]) == len(row["source_ids"])
            for sid, cid in zip(row["source_ids"], row["ranked"], strict=True):
                want = fake.papers[sid].get("externalIds", {}).get("CorpusId")
                assert cid == (f"CorpusId:{want}" if want else sid)
            hit = serve[qid] in row["source_ids"][:50]
            assert row["hits@50"] == sum(g in row["ranked"][:50] for g in gold) == int(hit)
        summary = run.summary
        assert summary["queries"] == 3 and summary["errors"] == 0
        total = sum(len(picked[q].relevant) for q in picked)
        assert summary["recall@50"] == sum(r["hits@50"] for r in rows.values()) / total
    assert any(rows[q]["hits@50"] for q in rows)  # the fixture makes at least one gold paper findable
