"""Where the data shipped with Crase lives: prompt files, the embedded corpus, SciFact pairs, UI assets.

Every path to a file the project ships is resolved here, and only here.

The files are kept in the top-level ``prompts/`` and ``assets/`` folders of the
source tree. A wheel (``pip install .``) carries them *inside* the package:
``pyproject.toml`` maps ``prompts/`` to ``crase_core/_prompts/`` and ``assets/``
to ``crase_core/_assets/``. A source checkout (``pip install -e .``,
``PYTHONPATH=.``) has no such folders inside ``crase_core/``, so the
functions fall back to the top-level folders next to it. Either way the
answer is a plain directory on disk (wheels install unzipped).

The environment overrides (``$CRASE_PROMPTS_DIR``, ``$CRASE_CORPUS``) are read
by the modules that read them today; these functions give the shipped defaults.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# (folder inside the installed package, folder in the source checkout); keep in sync with pyproject.toml
_PROMPTS = ("_prompts", "prompts")
_ASSETS = ("_assets", "assets")


def _shipped(where: tuple[str, str]) -> Path:
    inside, checkout = where
    packaged = PACKAGE_DIR / inside
    return packaged if packaged.is_dir() else PACKAGE_DIR.parent / checkout


def prompts_dir() -> Path:
    """The shipped prompt templates (``plan.txt``, ``claims.txt``, ``entailment.txt``)."""
    return _shipped(_PROMPTS)


def assets_dir() -> Path:
    """The shipped assets folder (``corpora/``, ``embeddings/``, ``scifact/``, ``ui/``)."""
    return _shipped(_ASSETS)


def corpus_dir(name: str = "hepth") -> Path:
    """An embedded corpus folder (``papers.jsonl.gz`` + ``citations.tsv.gz``); default: the hep-th corpus."""
    return assets_dir() / "corpora" / name


def embeddings_dir() -> Path:
    """Shipped corpus embeddings (``<corpus>-<fingerprint>-<model>.f16.npy``; see ``SOURCES.md`` there)."""
    return assets_dir() / "embeddings"


def scifact_pairs_file() -> Path:
    """The SciFact claim–abstract pairs used by the entailment-scorer evaluation."""
    return assets_dir() / "scifact" / "claim_doc_pairs.jsonl.gz"


def ui_assets_dir() -> Path:
    """Assets of the Streamlit front end (graph component, demo queries)."""
    return assets_dir() / "ui"


def graph_component_dir() -> Path:
    """The evidence-graph Streamlit component (``index.html`` + vis-network)."""
    return ui_assets_dir() / "graph_component"


def page_icon_file() -> Path:
    """The explorer's page icon (a PNG shipped with it: no icon is fetched from a font or emoji server)."""
    return ui_assets_dir() / "page_icon.png"


def demo_queries_file() -> Path:
    """The demo queries the Search page offers (JSON list of ``{"label", "query", "source"}``)."""
    return ui_assets_dir() / "demo_queries.json"
