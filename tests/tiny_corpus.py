"""A tiny corpus whose every number can be checked by hand (shared by tests)."""

from __future__ import annotations

import json
from pathlib import Path

# A tiny corpus whose every number can be checked by hand. Months come from the ids (YYMM###).
TINY_PAPERS = [
    ("9801001", 1998, "Black hole entropy from D-branes",
     "We count the microstates of extremal black holes with D-branes. The entropy agrees with the "
     "Bekenstein-Hawking area law. We show that the counting extends to near-extremal black holes. "
     "The degeneracy is computed in string perturbation theory."),
    ("9802001", 1998, "Anti-de Sitter space and holography",
     "We propose that string theory on anti-de Sitter space is dual to a conformal field theory. "
     "Correlation functions are computed from the supergravity action. We show that black hole "
     "entropy is reproduced by the conformal field theory. The duality relates strong and weak coupling."),
    ("9901001", 1999, "Black hole microstates in anti-de Sitter space",
     "We study black hole microstates in anti-de Sitter space using holography. "
     "We show that the black hole entropy is reproduced by counting D-brane states. "
     "The conformal field theory computes the degeneracy of microstates. "
     "We derive the area law from the dual field theory."),
    ("9902001", 1999, "Lattice simulation of gauge theory glueballs",
     "We simulate pure gauge theory on the lattice. The glueball spectrum is measured numerically. "
     "Finite volume effects are estimated with Monte Carlo data. The results agree with earlier estimates."),
    ("0001001", 2000, "Holographic entanglement and black hole microstates",
     "We show that black hole microstates in anti-de Sitter space are counted by the dual conformal field theory. "
     "The entropy of the black hole follows from D-brane state counting. "
     "We derive corrections to the area law. Holography relates the two descriptions."),
    ("0002001", 2000, "A paper nobody cites about glueballs",
     ""),
]
# citing, cited
TINY_CITATIONS = [
    ("9802001", "9801001"),
    ("9901001", "9801001"),
    ("9901001", "9802001"),
    ("0001001", "9901001"),
    ("0001001", "9802001"),
    ("0001001", "9902001"),
    ("0002001", "9902001"),
    ("0001001", "0001001"),  # a self-loop: dropped by the loader
]


def write_corpus(folder: Path, papers=TINY_PAPERS, citations=TINY_CITATIONS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "papers.jsonl", "w", encoding="utf-8") as f:
        for pid, year, title, abstract in papers:
            f.write(json.dumps({"id": pid, "year": year, "title": title, "authors": "A. Author and B. Writer",
                                "abstract": abstract}) + "\n")
    with open(folder / "citations.tsv", "w", encoding="utf-8") as f:
        for u, v in citations:
            f.write(f"{u}\t{v}\n")
    return folder


# A second hand-built corpus for the end-to-end check of the paper's configuration (tests/test_paper_preset.py).
# "quasinormal" is only in S1 = 0101001 and "bootstrap" only in S2 = 0102001, so one-word sub-queries pick them.
PRESET_PAPERS = [
    ("0101001", 2001, "Quasinormal modes of rotating black holes",
     "We compute the quasinormal spectrum of rotating black holes."),
    ("0102001", 2001, "Conformal bootstrap bounds on black hole spectra",
     "The bootstrap bounds the spectrum of black hole states."),
    ("9901001", 1999, "Ringdown of perturbed horizons", "Perturbed horizons ring down."),
    ("9801001", 1998, "Black hole perturbation theory", "Linear perturbations of black holes are stable."),
    ("0201001", 2002, "Spectral bounds revisited", "We revisit bounds on spectra."),
    ("9601001", 1996, "Early notes on horizons", "Horizons have area."),
    ("9701001", 1997, "Horizon thermodynamics", "Horizons carry entropy."),
]
# citing, cited. S1 → A, B; S2 → B, S1, X; C → S2; A → B (an edge among neighbours: 1.5 hops); A → D (D is
# two steps from every seed, so it stays out of the 1.5-hop graph).
PRESET_CITATIONS = [
    ("0101001", "9901001"),
    ("0101001", "9801001"),
    ("0102001", "9801001"),
    ("0102001", "0101001"),
    ("0201001", "0102001"),
    ("0102001", "9601001"),
    ("9901001", "9801001"),
    ("9901001", "9701001"),
]
