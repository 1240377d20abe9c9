"""ComponentCache: the planner, extractor and scorer behind the result cache, with one set of counters."""

from __future__ import annotations

import math

import pytest

from crase_core.backends import ModelBackend
from crase_core.cache import ResultCache
from crase_core.component_cache import (
    ComponentCache,
    claims_digest,
    claims_key,
    graph_matrices_from_cache,
    graph_matrices_key,
    graph_matrices_to_cache,
    is_output_failure,
    matrix_from_cache,
    matrix_key,
    plan_key,
)
from crase_core.records import Claim, ClaimSet, Counters, EdgeMatrix, Paper, PlanResult, Usage
from crase_core.settings.pipeline import PipelineSettings
from crase_core.stages.planning import plan_query

A = Paper("a", "Black hole entropy", "We count microstates. The entropy agrees.", 1998)
B = Paper("b", "Holography", "String theory is dual to a field theory.", 1999)
C = Paper("c", "Glueballs", "We simulate glueballs.", 2000)


def _claims(paper: Paper) -> list[Claim]:
    sentences = [s.strip() + "." for s in paper.abstract.split(".") if s.strip()]
    return [Claim(f"c{i}", "EMPIRICAL", s, s) for i, s in enumerate(sentences, 1)]


class FakePlanner:
    identity = "fake-planner/v1"

    def __init__(self, subqueries: list[str], error: str | None = None, notes: list[str] | None = None):
        self.subqueries, self.error, self.notes, self.calls = subqueries, error, notes or [], 0

    def plan(self, query: str, max_subqueries: int) -> PlanResult:
        self.calls += 1
        return PlanResult(query, list(self.subqueries), self.identity, error=self.error, notes=list(self.notes),
                          usage=Usage(2, 100, 20))


class FakeExtractor:
    identity = "fake-extractor/v1"

    def __init__(self, errors: dict[str, str] | None = None, repaired: set[str] | None = None):
        self.errors, self.repaired, self.calls = errors or {}, repaired or set(), 0

    def extract_many(self, papers):
        self.calls += len(papers)
        out = []
        for p in papers:
            if p.id in self.errors:
                out.append(ClaimSet(p.id, [], self.identity, error=self.errors[p.id], usage=Usage(3, 50, 0)))
            else:
                notes = ["repaired: took the JSON value out of surrounding text"] if p.id in self.repaired else []
                out.append(ClaimSet(p.id, _claims(p), self.identity, notes=notes, usage=Usage(1, 40, 10)))
        return out


class FakeScorer:
    """Every score 0.5; an edge whose cited paper's first claim starts with a key of ``errors`` fails."""

    identity = "fake-scorer/v1"

    def __init__(self, errors: dict[str, str] | None = None):
        self.errors, self.calls = errors or {}, 0

    def score_many(self, pairs):
        self.calls += len(pairs)
        out = []
        for citing, cited in pairs:
            error = next((e for k, e in self.errors.items() if cited[0].text.startswith(k)), None)
            if error:
                out.append(EdgeMatrix([], self.identity, error=error))
            else:
                out.append(EdgeMatrix([[0.5] * len(cited) for _ in citing], self.identity, usage=Usage(1, 7, 3)))
        return out


def backend(planner=None, extractor=None, scorer=None) -> ModelBackend:
    return ModelBackend("fake", planner or FakePlanner(["black hole", "entropy"]), extractor or FakeExtractor(),
                        scorer or FakeScorer())


def test_keys_are_byte_identical_to_earlier_versions():
    """Existing caches stay valid: these strings were computed by the pipeline before the refactor."""
    p = Paper("9801001", "Black hole entropy", "We count microstates. Entropy agrees.", 1998)
    a = [Claim("c1", "EMPIRICAL", "We count microstates.", "We count microstates.")]
    b = [Claim("c1", "EMPIRICAL", "Entropy agrees.", "Entropy agrees."),
         Claim("c2", "CONTEXTUAL", "Black holes.", "Black holes.")]
    assert plan_key("keyword-planner/v1", "black hole entropy", 5) == "plan|keyword-planner/v1|4232827bc9bbde91e7f2d1a40e9f651d"
    assert claims_key("extractive-claims/v1", p) == "claims|extractive-claims/v1|906b49c47ca4bb914367e174f038beba"
    assert claims_digest(b) == "40a5fd2317f25bd47ae89e89fe42ee5d"
    assert matrix_key("lexical/v1", a, b) == (
        "matrix|lexical/v1|cc59c8c9f18cd49de192fa86d41b3ab7|40a5fd2317f25bd47ae89e89fe42ee5d")
    assert matrix_key("lexical/v1", (), (), digests=(claims_digest(a), claims_digest(b))) == matrix_key("lexical/v1", a, b)


def test_output_failure_versus_transport_failure():
    assert is_output_failure("model output: matrix has 3 rows, expected 4")
    assert not is_output_failure("timeout after 3 tries")
    assert not is_output_failure(None) and not is_output_failure("") and not is_output_failure(5)


def test_plan_miss_then_hit(tmp_path):
    planner = FakePlanner(["a", "b", "c"], notes=["repaired: dropped 1 empty sub-query"])
    cache = ResultCache(tmp_path / "rc")
    cold = ComponentCache(backend(planner), cache)
    plan = cold.plan("q", 2)
    assert plan.subqueries == ["a", "b"] and not plan.cached
    # a plan's repairs are not counted (as before the refactor); its calls and tokens are
    assert cold.counters == Counters(model_calls=2, prompt_tokens=100, completion_tokens=20, cache_misses=1)
    warm = ComponentCache(backend(planner), ResultCache(tmp_path / "rc"))  # from disk
    again = warm.plan("q", 2)
    assert planner.calls == 1 and again.cached and again.subqueries == ["a", "b"]
    assert again.notes == ["repaired: dropped 1 empty sub-query"]
    assert warm.counters == Counters(cache_hits=1)
    assert ComponentCache(backend(planner), cache).plan("q", 3).subqueries == ["a", "b", "c"]  # L is in the key


def test_claims_and_matrices_miss_then_hit(tmp_path):
    extractor, scorer = FakeExtractor(repaired={"b"}), FakeScorer()
    cold = ComponentCache(backend(extractor=extractor, scorer=scorer), ResultCache(tmp_path / "rc"))
    assert cold.cached_claims([A, B]) == {}
    claims = {cs.paper_id: cs for cs in cold.extract([A, B])}
    assert cold.cached_matrices(claims, [("a", "b")]) == {}
    [em] = cold.score(claims, [("a", "b")])
    assert em.matrix == [[0.5], [0.5]]
    assert cold.counters == Counters(model_calls=3, prompt_tokens=87, completion_tokens=23, cache_misses=3, repairs=1)

    warm = ComponentCache(backend(extractor=extractor, scorer=scorer), ResultCache(tmp_path / "rc"))
    cached = warm.cached_claims([A, B, C])
    assert set(cached) == {"a", "b"} and all(cs.cached for cs in cached.values())
    assert [c.text for c in cached["a"].claims] == [c.text for c in claims["a"].claims]
    matrices = warm.cached_matrices(cached, [("a", "b"), ("b", "a")])
    assert list(matrices) == [("a", "b")] and matrices[("a", "b")].matrix == [[0.5], [0.5]]
    assert matrices[("a", "b")].cached
    assert warm.counters == Counters(cache_hits=3)
    assert extractor.calls == 2 and scorer.calls == 1


def test_without_a_cache_everything_is_a_miss():
    components = ComponentCache(backend(), None)
    components.plan("q", 5)
    claims = {cs.paper_id: cs for cs in components.extract([A, B])}
    components.score(claims, [("a", "b"), ("b", "a")])
    assert components.cached_claims([A]) == {} and components.cached_matrices(claims, [("a", "b")]) == {}
    c = components.counters
    assert (c.cache_hits, c.cache_misses, c.model_calls) == (0, 5, 6)


@pytest.mark.parametrize("bad", [
    "not a dict", {"garbage": True}, {"claims": []}, {"claims": [["c1", "BOGUS", "x", "x", True]]},
    {"claims": [["c1", "EMPIRICAL", 5, "x", True]]}, {"claims": [["c1", "EMPIRICAL"]]},
])
def test_corrupt_claims_entry_is_a_miss_and_is_overwritten(tmp_path, bad):
    cache = ResultCache(tmp_path / "rc")
    components = ComponentCache(backend(), cache)
    key = claims_key(FakeExtractor.identity, A)
    cache.set_many({key: bad})
    assert components.cached_claims([A]) == {}
    assert components.counters.cache_hits == 0
    components.extract([A])
    assert ComponentCache(backend(), ResultCache(tmp_path / "rc")).cached_claims([A])["a"].claims == _claims(A)


@pytest.mark.parametrize("bad", [
    "not a matrix", [[0.5]], [[0.5], [0.5, 0.5]], [[0.5], [1.5]], [[0.5], [-0.1]], [[0.5], [math.nan]],
    [[0.5], ["x"]], {"error": "timeout"}, {"error": 5},
])
def test_corrupt_matrix_entry_is_a_miss(tmp_path, bad):
    cache = ResultCache(tmp_path / "rc")
    components = ComponentCache(backend(), cache)
    claims = {cs.paper_id: cs for cs in components.extract([A, B])}  # a: 2 claims, b: 1
    cache.set_many({matrix_key(FakeScorer.identity, claims["a"].claims, claims["b"].claims): bad})
    assert components.cached_matrices(claims, [("a", "b")]) == {}
    assert components.counters.cache_hits == 0


def test_a_matrix_checked_once_in_a_process_is_not_checked_again_unless_replaced(tmp_path):
    """In a long-lived process a cached matrix is checked when first read; the next run takes the same object
    without checking it again (issue 31). A value replaced under the same key — another object — is checked
    again, and refused when corrupt. (Edge b→a is never cached, so these reads go edge by edge.)"""
    cache = ResultCache(tmp_path / "rc")
    components = ComponentCache(backend(), cache)
    claims = {cs.paper_id: cs for cs in components.extract([A, B])}  # a: 2 claims, b: 1
    key = matrix_key(FakeScorer.identity, claims["a"].claims, claims["b"].claims)
    good = [[0.5], [0.25]]
    cache.set_many({key: good})
    edges = [("a", "b"), ("b", "a")]
    first = components.cached_matrices(claims, edges)
    assert first[("a", "b")].matrix is good and cache.is_checked(key, good)
    again = ComponentCache(backend(), cache).cached_matrices(claims, edges)
    assert again[("a", "b")].matrix is good and again[("a", "b")].cached
    cache.set_many({key: [[0.5], [7.0]]})  # replaced in memory by a corrupt value: checked, refused
    assert ComponentCache(backend(), cache).cached_matrices(claims, edges) == {}
    assert not cache.is_checked(key, good)
    cache.clear()
    assert not cache.is_checked(key, good)


def test_a_graph_whose_matrices_were_all_found_is_read_whole_next_time(tmp_path):
    """Once a read finds every edge's matrix, they are kept together too (issue 31: a cached run reads its
    thousands of matrices in one go): the next process gets the same matrices and counts from that one entry,
    even with the edge-by-edge entries gone."""
    scorer = FakeScorer()
    cold = ComponentCache(backend(scorer=scorer), ResultCache(tmp_path / "rc"))
    claims = {cs.paper_id: cs for cs in cold.extract([A, B, C])}
    edges = [("a", "b"), ("b", "c"), ("c", "a")]
    cold.score(claims, edges)
    digests = [(claims_digest(claims[u].claims), claims_digest(claims[v].claims)) for u, v in edges]
    together = graph_matrices_key(FakeScorer.identity, digests)
    assert ResultCache(tmp_path / "rc").get_many([together]) == {}  # scored, not yet read back whole
    warm = ComponentCache(backend(scorer=scorer), ResultCache(tmp_path / "rc"))
    by_edge = warm.cached_matrices(claims, edges)
    assert warm.counters == Counters(cache_hits=3)
    kept = ResultCache(tmp_path / "rc").get_many([together])
    assert list(kept) == [together]
    ResultCache(tmp_path / "only-whole").set_many(kept)  # a cache holding that entry and no edge's own
    whole = ComponentCache(backend(scorer=scorer), ResultCache(tmp_path / "only-whole"))
    found = whole.cached_matrices(claims, edges)
    assert {e: em.matrix for e, em in found.items()} == {e: em.matrix for e, em in by_edge.items()}
    assert list(found) == edges and all(em.cached and not em.error for em in found.values())
    assert whole.counters == Counters(cache_hits=3) and scorer.calls == 3
    assert whole.cached_matrices(claims, edges[:2]) == {}  # another list of edges: another entry (none here)


def test_a_graph_with_a_missing_or_failed_matrix_is_not_kept_whole(tmp_path):
    scorer = FakeScorer(errors={"We simulate": "model output: no JSON"})  # edges citing c fail (cached failure)
    cold = ComponentCache(backend(scorer=scorer), ResultCache(tmp_path / "rc"))
    claims = {cs.paper_id: cs for cs in cold.extract([A, B, C])}
    cold.score(claims, [("a", "b"), ("a", "c")])
    for edges in ([("a", "b"), ("a", "c")], [("a", "b"), ("b", "a")]):  # a cached failure; a miss
        ComponentCache(backend(scorer=scorer), ResultCache(tmp_path / "rc")).cached_matrices(claims, edges)
        digests = [(claims_digest(claims[u].claims), claims_digest(claims[v].claims)) for u, v in edges]
        together = graph_matrices_key(FakeScorer.identity, digests)
        assert ResultCache(tmp_path / "rc").get_many([together]) == {}


def test_graph_matrices_round_trip_exactly():
    matrices = [[[0.1, 1.0], [0.0, 1 / 3]], [[]], [], [[2 ** -1074, 0.7]]]
    shapes = [(2, 2), (1, 0), (0, 5), (1, 2)]
    assert graph_matrices_from_cache(graph_matrices_to_cache(matrices), shapes) == matrices


@pytest.mark.parametrize("bad", [
    "not a dict", {}, {"float64": 5}, {"float64": "not base64!"}, {"float64": "AAAA"},  # 3 bytes: not float64s
    graph_matrices_to_cache([[[0.5, 0.5]]]),  # 2 values, 3 expected
    graph_matrices_to_cache([[[0.5, 0.5, 1.5]]]), graph_matrices_to_cache([[[0.5, -0.1, 0.5]]]),
    graph_matrices_to_cache([[[0.5, math.nan, 0.5]]]), graph_matrices_to_cache([[[0.5, math.inf, 0.5]]]),
])
def test_corrupt_graph_matrices_are_refused(bad):
    assert graph_matrices_from_cache(bad, [(1, 3)]) is None


def test_corrupt_plan_entry_is_a_miss(tmp_path):
    cache = ResultCache(tmp_path / "rc")
    planner = FakePlanner(["x"])
    for bad in ("plan", {"subqueries": "x"}, {"subqueries": [1]}, {"subqueries": []},
                {"subqueries": [], "error": "timeout"}, {"subqueries": ["x"], "notes": "n"}):
        cache.set_many({plan_key(planner.identity, "q", 5): bad})
        assert not ComponentCache(backend(planner), cache).plan("q", 5).cached
    assert planner.calls == 6


def test_output_failures_are_cached_transport_failures_are_not(tmp_path):
    extractor = FakeExtractor(errors={"b": "model output: 2 claims, expected 4-5", "c": "timeout after 3 tries"})
    scorer = FakeScorer(errors={"We count": "model output: matrix has 3 rows, expected 4", "String": "HTTP 503"})
    cold = ComponentCache(backend(extractor=extractor, scorer=scorer), ResultCache(tmp_path / "rc"))
    claims = {cs.paper_id: cs for cs in cold.extract([A, B, C])}
    claims["d"] = ClaimSet("d", _claims(C), "fake")
    cold.score(claims, [("d", "a"), ("a", "d")])
    cold.score({"a": claims["a"], "b2": ClaimSet("b2", _claims(B), "fake")}, [("a", "b2")])
    assert cold.counters.failures == 4 and cold.counters.model_calls == 1 + 3 + 3 + 3  # at least one call each

    warm = ComponentCache(backend(extractor=extractor, scorer=scorer), ResultCache(tmp_path / "rc"))
    cached = warm.cached_claims([A, B, C])
    assert set(cached) == {"a", "b"}  # c's transport failure was not cached: asked again next time
    assert cached["b"].error == "model output: 2 claims, expected 4-5" and cached["b"].claims == []
    matrices = warm.cached_matrices(claims | {"b2": ClaimSet("b2", _claims(B), "fake")},
                                    [("d", "a"), ("a", "d"), ("a", "b2")])
    assert set(matrices) == {("d", "a"), ("a", "d")}  # the HTTP 503 was not cached
    assert matrices[("d", "a")].error == "model output: matrix has 3 rows, expected 4"
    assert matrices[("d", "a")].matrix == [] and matrices[("d", "a")].cached
    # cached output failures count as failures again (the trace's counters say what the answer holds)
    assert warm.counters == Counters(cache_hits=4, failures=2)


def test_planner_failures_cached_only_for_model_output(tmp_path):
    for error, cached in (("model output: not JSON", True), ("timeout", False)):
        planner = FakePlanner([], error=error)
        ComponentCache(backend(planner), ResultCache(tmp_path / error)).plan("q", 5)
        again = ComponentCache(backend(planner), ResultCache(tmp_path / error))
        plan = again.plan("q", 5)
        assert plan.cached is cached and plan.error == error and plan.subqueries == []
        assert planner.calls == (1 if cached else 2) and again.counters.failures == 1


def test_a_cached_plan_failure_reads_back_the_same_in_the_same_process(tmp_path):
    """The planning stage adds a note to a failed plan; that must not leak into the cached value."""
    cache = ResultCache(tmp_path / "rc")  # in-memory LRU in front of the disk
    planner = FakePlanner([], error="model output: not JSON", notes=["attempt 1 was not JSON"])
    settings = PipelineSettings(L=3)
    first = plan_query("black holes", ComponentCache(backend(planner), cache), settings)
    second = plan_query("black holes", ComponentCache(backend(planner), cache), settings)
    assert second.plan.cached and planner.calls == 1
    assert second.plan.notes == first.plan.notes == [
        "attempt 1 was not JSON", "no sub-queries were planned; the query itself is the only sub-query"]
    assert second.plan.subqueries == ["black holes"]
    assert first.warnings == ["planner failed: model output: not JSON"]
    assert second.warnings == ["planner failed (cached answer): model output: not JSON"]


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(("value", "n_u", "n_v"), [
    ([[0.5, NAN]], 1, 2), ([[NAN, 0.5]], 1, 2), ([[INF, 0.0]], 1, 2), ([[1.5, 0.0]], 1, 2), ([[-0.1, 0.0]], 1, 2),
    ([["a", "b"]], 1, 2), ([[0.5, "x"]], 1, 2), ([[None]], 1, 1), ([[[1]]], 1, 1), ([[{}]], 1, 1),
    ([[{"1": 0.5}]], 1, 1), (["ab", "cd"], 2, 2), ([(0.5,)], 1, 1), ([{"a": 1}], 1, 1),
    ([[0.5], [0.2, 0.3]], 2, 1), ([[0.5, 0.1], [0.2]], 2, 2), ([[0.5]], 2, 1), ("ab", 2, 1), (7, 1, 1),
])
def test_a_corrupt_cached_matrix_is_refused(value, n_u, n_v):
    """A cached matrix is used only when it is n_u lists of n_v numbers in [0, 1]: anything else is a miss."""
    assert matrix_from_cache(value, n_u, n_v, "scorer") is None


@pytest.mark.parametrize(("value", "n_u", "n_v"), [
    ([[0.5, 1.0], [0, True]], 2, 2), ([[0.2, 0.3]], 1, 2), ([[]], 1, 0), ([], 0, 3), ([[0.0]], 1, 1),
])
def test_a_sound_cached_matrix_is_used(value, n_u, n_v):
    em = matrix_from_cache(value, n_u, n_v, "scorer")
    assert em is not None and em.matrix == value and em.cached and not em.error
