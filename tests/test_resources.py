"""Shipped files: one place resolves them, and pyproject.toml puts every one of them into the wheel.

The wheel itself is built, installed and run from outside the checkout by .ci/install_check.sh.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from crase_core import resources
from crase_core.evaluation.scifact import DEFAULT_PAIRS, load_pairs
from crase_core.llm.prompts import PROMPT_NAMES, default_prompts_dir, load_prompt
from crase_core.store.corpus import DEFAULT_CORPUS_DIR

ROOT = Path(__file__).resolve().parent.parent
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def _files(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def test_checkout_resolves_to_the_top_level_folders(monkeypatch):
    monkeypatch.delenv("CRASE_PROMPTS_DIR", raising=False)
    assert resources.prompts_dir() == ROOT / "prompts"
    assert resources.assets_dir() == ROOT / "assets"
    assert resources.corpus_dir() == DEFAULT_CORPUS_DIR == ROOT / "assets" / "corpora" / "hepth"
    assert resources.scifact_pairs_file() == DEFAULT_PAIRS
    assert (resources.graph_component_dir() / "index.html").is_file()
    assert resources.demo_queries_file().is_file()
    assert [load_prompt(n).name for n in PROMPT_NAMES] == list(PROMPT_NAMES)
    assert len(load_pairs(limit=2)) == 2


def test_prompts_env_override_still_wins(tmp_path, monkeypatch):
    monkeypatch.delenv("CRASE_PROMPTS_DIR", raising=False)
    assert default_prompts_dir() == resources.prompts_dir()
    monkeypatch.setenv("CRASE_PROMPTS_DIR", str(tmp_path))
    assert default_prompts_dir() == tmp_path


def test_installed_layout_is_preferred(tmp_path, monkeypatch):
    package = tmp_path / "site-packages" / "crase_core"
    (package / "_prompts").mkdir(parents=True)
    monkeypatch.setattr(resources, "PACKAGE_DIR", package)
    assert resources.prompts_dir() == package / "_prompts"
    # no _assets inside the package: the folder next to the package (a source checkout's layout)
    assert resources.corpus_dir() == tmp_path / "site-packages" / "assets" / "corpora" / "hepth"


def test_pyproject_lists_every_package():
    folders = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "crase_core").rglob("__init__.py")}
    listed = set(SETUPTOOLS["packages"])
    missing = folders - listed
    assert not missing, f"add {sorted(missing)} to [tool.setuptools] packages in pyproject.toml"
    assert SETUPTOOLS["package-dir"] == {"crase_core._prompts": "prompts", "crase_core._assets": "assets"}
    assert listed - folders == set(SETUPTOOLS["package-dir"])


@pytest.mark.parametrize("package", ["crase_core._prompts", "crase_core._assets"])
def test_package_data_ships_every_file(package):
    folder = ROOT / SETUPTOOLS["package-dir"][package]
    globs = SETUPTOOLS["package-data"][package]
    shipped = {p for g in globs for p in folder.glob(g) if p.is_file()}
    missing = sorted(str(p.relative_to(ROOT)) for p in _files(folder) - shipped)
    assert not missing, f"not in the wheel: {missing}; add a glob to [tool.setuptools.package-data] {package!r}"
