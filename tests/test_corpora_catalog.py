"""The corpora the explorer offers (crase_core.views.corpora): the list, a typed folder, an import's name, and
demo queries from a corpus's own papers (issue 32)."""

from __future__ import annotations

import pytest
from tiny_corpus import TINY_CITATIONS, TINY_PAPERS, write_corpus

from crase_core.errors import InputError
from crase_core.store.corpus_folder import open_or_build
from crase_core.views import corpora


def test_the_list_holds_the_embedded_the_operators_and_every_imported_corpus(tmp_path):
    cache = tmp_path / "cache"
    a = write_corpus(cache / "corpora" / "alpha")
    b = write_corpus(cache / "corpora" / "lab" / "beta")  # one level of grouping
    (cache / "corpora" / "notes").mkdir()  # not a corpus: no papers.jsonl
    (cache / "corpora" / ".upload-x").mkdir()  # an import's temporary folder: never listed
    write_corpus(cache / "corpora" / ".upload-x" / "half")
    mine = write_corpus(tmp_path / "elsewhere" / "mine")
    listed = corpora.available(cache, str(mine))
    assert [c.name for c in listed] == ["mine", "hep-th (embedded)", "alpha", "beta"]
    assert listed[1].embedded and listed[1].corpus_dir == str(corpora.embedded_choice().folder)
    assert [c.folder for c in listed[2:]] == [a.resolve(), b.resolve()]
    assert [c.name for c in corpora.available(cache)] == ["hep-th (embedded)", "alpha", "beta"]


def test_a_typed_folder_opens_only_inside_the_corpora_folder(tmp_path):
    cache = tmp_path / "cache"
    inside = write_corpus(cache / "corpora" / "alpha")
    assert corpora.resolve_choice("alpha", cache).folder == inside.resolve()
    assert corpora.resolve_choice(str(inside), cache).name == "alpha"
    outside = write_corpus(tmp_path / "private")
    with pytest.raises(InputError, match="only corpus folders inside"):
        corpora.resolve_choice(str(outside), cache)
    with pytest.raises(InputError, match="only corpus folders inside"):
        corpora.resolve_choice("../../private", cache)
    (cache / "corpora" / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InputError, match="only corpus folders inside"):
        corpora.resolve_choice("link", cache)  # a link leading out is refused, not followed
    (cache / "corpora" / "empty").mkdir()
    with pytest.raises(InputError, match="not a corpus folder"):
        corpora.resolve_choice("empty", cache)
    with pytest.raises(InputError, match="no such folder"):
        corpora.resolve_choice("nope", cache)
    assert corpora.resolve_choice(str(outside), cache, operator_corpus=str(outside)).folder == outside.resolve()


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden", "-x", "x" * 61, "naïve", "a b"])
def test_an_import_name_is_a_short_slug(tmp_path, name):
    with pytest.raises(InputError):
        corpora.import_folder(name, tmp_path)


def test_an_import_never_overwrites_a_corpus(tmp_path):
    write_corpus(tmp_path / "corpora" / "alpha")
    with pytest.raises(InputError, match="exists already"):
        corpora.import_folder("alpha", tmp_path)
    assert corpora.import_folder("beta-2.v1", tmp_path) == tmp_path / "corpora" / "beta-2.v1"


def test_demo_queries_are_the_titles_of_the_most_cited_papers(tmp_path):
    corpus = open_or_build(write_corpus(tmp_path / "tiny"))
    demos = corpora.demo_queries(corpus, n=3)
    # in-corpus citations: 9801001 ← 2, 9802001 ← 2, 9902001 ← 2, 9901001 ← 1 (ties in file order)
    assert [d.paper_id for d in demos] == ["9801001", "9802001", "9902001"]
    titles = {p: t for p, _, t, _ in TINY_PAPERS}
    assert [d.query for d in demos] == [titles[d.paper_id] for d in demos]
    assert all(len(d.label) <= 38 for d in demos)
    assert len(TINY_CITATIONS) == 8
