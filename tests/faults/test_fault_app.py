"""Faults in the app: uploads, saved runs, the runs folder, shared caches, the Benchmark page, the audit store.

Every test drives the real pages with Streamlit's AppTest (no browser) over the hostile fixture corpus and
asserts what the page shows, what is (and is not) on disk afterwards, and what a rerun does.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the app side (app_pages/, crase_app/) is not part of the installed package
    sys.path.append(str(ROOT))

HOSTILE = ROOT / "tests" / "fixtures" / "hostile_corpus"
QUERY = "holographic entanglement entropy of BTZ black holes"
OTHER_QUERY = "black hole entropy microstates"
PAGES = ["app_pages/1_Evidence_graph.py", "app_pages/2_Seeds.py", "app_pages/3_Ranking.py", "app_pages/4_Audit.py",
         "app_pages/5_Runs.py"]


@pytest.fixture()
def app_env(tmp_path, monkeypatch):
    import streamlit as st

    runs = tmp_path / "my_runs-folder"  # '_' and '-' are what Markdown escaping would backslash
    monkeypatch.setenv("CRASE_CORPUS", str(HOSTILE))
    monkeypatch.setenv("CRASE_RUNS_DIR", str(runs))
    monkeypatch.setenv("CRASE_EVAL_DIR", str(tmp_path / "eval"))
    monkeypatch.chdir(ROOT)
    st.cache_resource.clear()
    st.cache_data.clear()
    yield runs
    st.cache_resource.clear()
    st.cache_data.clear()


def _app() -> AppTest:
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()


def _go(at: AppTest, page: str) -> AppTest:
    """Switch to a page file; "Search" is the Search page (app_pages/0_Search.py)."""
    return at.switch_page("app_pages/0_Search.py" if page == "Search" else page).run()


def _search(at: AppTest, query: str) -> AppTest:
    _go(at, "Search")
    at.text_area(key="query_text").input(query)
    next(b for b in at.button if b.label == "Search").click()
    at.run()
    assert not at.exception and not at.error
    return at


def _saved(runs: Path) -> list[Path]:
    return sorted(p for p in runs.glob("*.json") if not p.name.endswith(".meta.json"))


def _upload(at: AppTest, data: bytes, name: str = "trace.json") -> AppTest:
    at.switch_page("app_pages/5_Runs.py").run()
    at.file_uploader(key="trace_upload").upload(name, data, "application/json")
    return at.run()


def _forged(original: Path) -> bytes:
    """The saved trace with every title changed but the same run id and time (an attacker's upload)."""
    data = json.loads(original.read_bytes())
    for n in data["nodes"]:
        n["paper"]["title"] = "FORGED " + n["paper"]["title"]
    return json.dumps(data).encode()


def _graph_labels(at: AppTest) -> str:
    at.switch_page("app_pages/1_Evidence_graph.py").run()
    assert not at.exception
    return "\n".join(c.proto.json_args for c in at.get("component_instance"))


@pytest.mark.fault_kind("app-upload-forged-run-id")
def test_upload_with_an_existing_run_id_never_overwrites_and_caches_follow_content(app_env):
    a = _search(_app(), QUERY)
    [original] = _saved(app_env)
    before = original.read_bytes()
    assert "FORGED" not in _graph_labels(a)  # session A fills the shared graph cache

    forged = _forged(original)
    assert json.loads(forged)["run_id"] == json.loads(before)["run_id"]
    b = _upload(_app(), forged)
    assert original.read_bytes() == before  # nothing overwritten
    assert len(_saved(app_env)) == 2
    assert not b.exception and not b.error
    assert any("saved as a new run (no saved run was changed)" in i.value for i in b.info)
    assert any(m.value == "#### Saved runs (2)" for m in b.markdown)
    assert b.session_state["trace"].run_id != a.session_state["trace"].run_id

    # the shared graph cache is keyed by content: each session sees its own trace's labels
    labels_b = _graph_labels(b)
    assert "FORGED" in labels_b
    assert "FORGED" not in _graph_labels(a)

    # uploading the same file again reopens the saved copy and writes nothing
    mtimes = {p: p.stat().st_mtime_ns for p in _saved(app_env)}
    c = _upload(_app(), forged)
    assert any("already saved: the saved run is reopened (nothing was overwritten)" in i.value for i in c.info)
    assert {p: p.stat().st_mtime_ns for p in _saved(app_env)} == mtimes


@pytest.mark.fault_kind("app-malformed-sidecar")
def test_one_malformed_sidecar_does_not_hide_the_other_runs(app_env):
    at = _search(_app(), QUERY)
    _search(at, OTHER_QUERY)
    first, second = _saved(app_env)
    (app_env / f"{first.stem}.meta.json").write_text(json.dumps({"query": 1, "counts": 5}))
    (app_env / f"{second.stem}.meta.json").write_text("[1, 2]")
    (app_env / "20260101T000000Z-0000.json").write_text("{not json")
    at.switch_page("app_pages/5_Runs.py").run()
    assert not at.exception and not at.error
    assert any(m.value == "#### Saved runs (2)" for m in at.markdown)
    assert sorted(at.dataframe[0].value["query"]) == sorted([QUERY, OTHER_QUERY])
    damaged = [m.value for m in at.markdown if m.value.startswith("- `20260101T000000Z-0000.json`")]
    assert damaged and "not a JSON trace" in damaged[0]
    # the sidecars were rebuilt from the traces
    assert json.loads((app_env / f"{first.stem}.meta.json").read_text())["query"] in (QUERY, OTHER_QUERY)


@pytest.mark.fault_kind("app-identical-reruns")
def test_rerunning_the_same_query_reopens_the_saved_run(app_env):
    at = _search(_app(), QUERY)
    first = at.session_state["trace"]
    [saved] = _saved(app_env)
    at = _search(at, QUERY)
    assert _saved(app_env) == [saved]  # no duplicate
    assert at.session_state["trace"].run_id == first.run_id
    assert at.session_state["run_name"] == saved.stem
    assert any("that saved run is reopened (no copy was saved)" in i.value for i in at.info)
    at = _search(at, OTHER_QUERY)  # a different request is a new run
    assert len(_saved(app_env)) == 2
    assert not any("saved run is reopened" in i.value for i in at.info)


@pytest.mark.fault_kind("app-runs-path-escapes")
def test_runs_folder_path_is_shown_literally(app_env):
    at = _app()
    at.switch_page("app_pages/5_Runs.py").run()
    assert not at.exception
    expected = f"Runs folder: `{app_env}` (set CRASE_RUNS_DIR to change it)"
    assert [c.value for c in at.caption if c.value.startswith("Runs folder")] == [expected]


def _bad_trace(runs: Path) -> bytes:
    data = json.loads(_saved(runs)[0].read_bytes())
    data["results"][0]["paper_id"] = "nope"
    data["created_at"] = "2030-01-01T00:00:00+00:00"
    return json.dumps(data).encode()


@pytest.mark.fault_kind("app-result-not-a-node")
def test_a_trace_whose_result_is_not_a_node_is_a_clear_error_on_every_page(app_env):
    at = _search(_app(), QUERY)
    good = at.session_state["trace"]
    bad = _bad_trace(app_env)
    n_saved = len(_saved(app_env))

    # uploaded: refused with the reason, nothing saved, the open run stays open
    at = _upload(at, bad)
    assert [e.value for e in at.error] == [
        "Could not open the uploaded trace: not a valid Crase trace: results.0: paper 'nope' is not among the nodes"]
    assert len(_saved(app_env)) == n_saved
    for page in ["Search", *PAGES]:
        _go(at, page)
        assert not at.exception, page
        assert at.session_state["trace"].run_id == good.run_id

    # copied into the runs folder by hand: listed as unreadable, never opened
    (app_env / "20300101T000000Z-bad.json").write_bytes(bad)
    at.switch_page("app_pages/5_Runs.py").run()
    assert not at.exception
    from crase_app.display import md_escape

    reason = md_escape("not a valid Crase trace: results.0: paper 'nope' is not among the nodes")
    assert f"- `20300101T000000Z-bad.json`: {reason}" in [m.value for m in at.markdown]

    # already in a session (however it got there): every page says so instead of raising
    from crase_core import trace as trace_io

    broken = trace_io.loads(json.dumps(trace_io.to_dict(good)))
    broken.results[0].paper_id = "nope"
    fresh = _app()
    fresh.session_state["trace"] = broken
    for page in ["Search", *PAGES]:
        _go(fresh, page)
        assert not fresh.exception, page
        expected = "The open run cannot be shown: " + md_escape("result 1 ('nope') is not among the run's papers")
        assert any(e.value.startswith(expected) for e in fresh.error), (page, [e.value for e in fresh.error])


@pytest.mark.fault_kind("app-audit-store-damaged")
def test_audit_store_set_aside_is_announced_with_its_path(app_env):
    at = _search(_app(), QUERY)
    junk = os.urandom(4096)
    (app_env / "audit.sqlite").write_bytes(junk)
    at.switch_page("app_pages/4_Audit.py").run()
    assert not at.exception
    aside = sorted(app_env.glob("audit.sqlite.unreadable-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == junk  # kept, unchanged
    notes = [w.value for w in at.warning if "audit store was not a readable database" in w.value]
    assert notes and f"`{aside[0]}`" in notes[0]
    at.run()  # still said on the next visit
    assert any(f"`{aside[0]}`" in w.value for w in at.warning)


@pytest.mark.fault_kind("app-secrets-in-logs")
def test_app_installs_the_secret_log_filter(app_env, caplog):
    from crase_core.redaction import SecretFilter

    runs_page = AppTest.from_file(str(ROOT / "app_pages" / "5_Runs.py"), default_timeout=60).run()  # opened directly
    assert not runs_page.exception
    root = logging.getLogger()
    assert root.handlers and all(any(isinstance(f, SecretFilter) for f in h.filters) for h in root.handlers)
    with caplog.at_level(logging.WARNING):
        logging.getLogger("crase.app").warning("calling http://user:hunter2pass@example.org/v1 key=sk-abcdefghijkl")
    assert "hunter2pass" not in caplog.text and "sk-abcdefghijkl" not in caplog.text
    assert "http://***@example.org/v1" in caplog.text


# --- the Benchmark page ---------------------------------------------------------------------------------------
def _bench(env_eval: Path) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app_pages" / "7_Benchmark.py"), default_timeout=60).run()
    assert not at.exception
    return at


def _summary_run(folder: Path, name: str = "crase", recall: float = 0.5) -> None:
    from crase_core.evaluation.run_file import write_run

    summary = {f"{m}@{k}": recall for m in ("recall", "map") for k in (5, 10, 20, 30, 40, 50)}
    summary.update(queries=3, job={"method": name, "bench": "b.jsonl", "settings": {}})
    write_run(folder, {"method": name}, summary, [{"qid": "q1"}])


def _gz_doc(summary_json: str) -> bytes:
    """A run file whose summary is the JSON text ``summary_json`` (valid or not)."""
    import gzip

    return gzip.compress(('{"format": "crase-eval-run", "version": 1, "config": {}, "rows": [], "summary": '
                          + summary_json + "}").encode())


@pytest.mark.fault_kind("app-benchmark-path")
def test_benchmark_page_reads_only_the_allowed_roots(app_env, tmp_path):
    outside = tmp_path / "outside"
    _summary_run(outside / "secret" / "OUTSIDE-SECRET")
    _summary_run(outside / "OUTSIDE-SECRET-RUN")
    ev = tmp_path / "eval"
    _summary_run(ev / "study" / "mine")
    (ev / "link_out").symlink_to(outside / "secret", target_is_directory=True)
    (ev / "linked").mkdir()
    (ev / "linked" / "run").symlink_to(outside / "OUTSIDE-SECRET-RUN", target_is_directory=True)
    deep = ev.joinpath(*[f"d{i}" for i in range(8)])
    _summary_run(deep / "too deep")
    at = _bench(ev)
    assert not at.text_input  # no free-text path
    options = at.selectbox(key="bench_report").options
    mine = [o for o in options if "(your eval folder)" in o]
    assert mine == ["Retrieval comparison — study (your eval folder)"]
    for option in options:
        at.selectbox(key="bench_report").select(option).run()
        assert not at.exception
        shown = "\n".join(m.value for m in at.markdown) + "\n".join(
            " ".join(map(str, d.value["run"].tolist())) for d in at.dataframe if "run" in d.value)
        assert "OUTSIDE-SECRET" not in shown and "too deep" not in shown, option


@pytest.mark.fault_kind("app-benchmark-broken-summary")
def test_benchmark_page_survives_broken_summaries(app_env, tmp_path):
    import gzip

    ev = tmp_path / "eval" / "bench"
    _summary_run(ev / "crase")
    files = {name: _gz_doc(text) for name, text in (
        ("broken", "{not json"), ("nan", '{"recall@5": NaN}'), ("deep", "[" * 100_000),
        ("strings", '{"recall@5": "0.9", "queries": "x"}'), ("list", "[1, 2]"))}
    files["not-gzip"] = b'{"recall@5": 0.9}'
    files["cut-short"] = _gz_doc('{"recall@5": 0.9}')[:-12]
    files["other-format"] = gzip.compress(b'{"format": "something-else", "summary": {"recall@5": 0.9}}')
    files["huge"] = b"\x1f\x8b" + b" " * (9 << 20)  # over the size limit as stored
    files["bomb"] = gzip.compress(b'{"format": "crase-eval-run", "version": 1, "pad": "' + b" " * (65 << 20) + b'"}')
    for name, data in files.items():
        (ev / name).mkdir()
        (ev / name / "run.json.gz").write_bytes(data)
    if hasattr(os, "mkfifo"):
        (ev / "fifo").mkdir()
        os.mkfifo(ev / "fifo" / "run.json.gz")
    at = _bench(tmp_path / "eval")
    label = "Retrieval comparison — bench (your eval folder)"
    at.selectbox(key="bench_report").select(label).run()
    assert not at.exception
    runs = [d.value for d in at.dataframe]
    assert [r["run"].tolist() for r in runs] == [["crase"]]  # the unreadable ones are left out, not shown wrong


@pytest.mark.fault_kind("app-benchmark-path")
def test_benchmark_page_scan_is_bounded(app_env, tmp_path):
    ev = tmp_path / "eval"
    ev.mkdir()
    for i in range(6000):
        (ev / f"f{i:05d}").touch()
    at = _bench(ev)
    assert any("were looked at" in w.value and "your eval folder" in w.value for w in at.warning)


@pytest.mark.fault_kind("app-benchmark-default-report")
def test_benchmark_page_opens_on_the_retrieval_comparison_with_tables(app_env, tmp_path):
    _summary_run(tmp_path / "eval" / "newest")  # a newer run of the user's: the dev comparison still comes first
    at = _bench(tmp_path / "eval")
    assert at.selectbox(key="bench_report").value == "Retrieval comparison — hepth_litsearch_dev (project results)"
    assert not [m.value for m in at.markdown if m.value.lstrip().startswith("|")]  # tables are tables
    quality = at.dataframe[0].value
    assert list(quality.columns[:4]) == ["run", "what it is", "Recall@5", "Recall@20"] and quality["run"].tolist()[:2] == [
        "crase", "bm25"]
    assert quality["Recall@5"].dtype.kind == "f"
    scifact = next(o for o in at.selectbox(key="bench_report").options if o.startswith("Entailment scorer"))
    at.selectbox(key="bench_report").select(scifact).run()
    shown = "\n".join(m.value for m in at.markdown)
    assert "{'" not in shown and "919 claim–abstract pairs (NEI 355, CONTRADICT 194, SUPPORT 370)" in shown


# --- the dense baseline's embedding cache ----------------------------------------------------------------------
@pytest.mark.fault_kind("app-dense-cache-concurrent-writers")
def test_dense_embedding_cache_concurrent_first_writers(tmp_path, monkeypatch):
    """Two first runs at once wrote the same ``.tmp.npy``; one rename then failed (FileNotFoundError)."""
    import threading
    from types import SimpleNamespace

    import numpy as np

    from crase_core.evaluation import dense

    class Model:
        def encode(self, texts, **kw):
            return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)

    barrier = threading.Barrier(2, timeout=10)
    real_save = np.save

    def save_then_wait(file, arr, *a, **kw):  # both writers finish writing before either renames
        real_save(file, arr, *a, **kw)
        barrier.wait()

    monkeypatch.setenv("CRASE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(dense, "_load_model", Model)
    monkeypatch.setattr(np, "save", save_then_wait)
    papers = [SimpleNamespace(id=f"p{i}", text="x" * i) for i in range(5)]
    source = SimpleNamespace(corpus=SimpleNamespace(papers=papers, name="c", fingerprint="f" * 32))
    errors: list[BaseException] = []

    def build():
        try:
            dense.DenseIndex(source, progress=False)
        except BaseException as e:  # noqa: BLE001 - recorded and asserted below
            errors.append(e)

    threads = [threading.Thread(target=build) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    folder = tmp_path / "cache" / "dense"
    assert [p.name for p in folder.iterdir()] == [f"c-{'f' * 16}-{dense.MODEL_NAME}.npy"]  # no temp file left
    monkeypatch.setattr(np, "save", real_save)
    again = dense.DenseIndex(source, progress=False)
    assert again.emb.tolist() == [[float(i), 1.0] for i in range(5)]


@pytest.mark.fault_kind("app-model-endpoint-down")
def test_a_model_endpoint_that_is_down_says_what_to_do_here_and_hides_the_earlier_results(app_env, tmp_path,
                                                                                            monkeypatch):
    """The endpoint nobody listens on: the message names what to do in the app (not the CLI's --base-url),
    and the results of the run opened before are not drawn under this failed search."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # closed again: nothing listens there
    settings = tmp_path / "settings.toml"
    settings.write_text(f'[llm]\nbase_url = "http://127.0.0.1:{dead}/v1"\nmodel = "m"\ntimeout = 2\nmax_retries = 0\n')
    monkeypatch.setenv("CRASE_SETTINGS", str(settings))
    at = _search(_app(), QUERY)  # the offline default: a run with results is open
    assert [c for c in at.caption if "Why it is here" in c.value]
    at.selectbox(key="rt_backend").set_value("openai").run()
    at.text_area(key="query_text").input(OTHER_QUERY)
    next(b for b in at.button if b.label == "Search").click()
    at.run(timeout=120)
    assert not at.exception
    errors = " ".join(e.value for e in at.error)
    assert "cannot reach the model endpoint" in errors.lower()
    assert "--base-url" not in errors and "Run settings → Model backend" in errors
    assert not [c for c in at.caption if "Why it is here" in c.value]  # no card of the earlier run
    assert not [s for s in at.subheader if s.value == "Results"]
    assert any("No results for this search" in c.value and QUERY in c.value for c in at.caption)
    assert at.session_state["trace"].query == QUERY  # that run stays open for the other pages


@pytest.mark.fault_kind("app-corpus-path-escapes")
def test_the_corpus_path_box_opens_nothing_outside_the_corpora_folder(app_env, tmp_path, monkeypatch):
    """A typed corpus folder outside <cache>/corpora (absolute, ../, or a link leading out) is refused with a
    one-line message; the chosen corpus stays what it was and nothing of the folder is read."""
    sys.path.insert(0, str(ROOT / "tests"))
    from tiny_corpus import write_corpus

    cache = tmp_path / "cache"
    monkeypatch.setenv("CRASE_CACHE_DIR", str(cache))
    private = write_corpus(tmp_path / "private" / "secret-corpus")
    (cache / "corpora").mkdir(parents=True)
    (cache / "corpora" / "leak").symlink_to(private, target_is_directory=True)
    at = _app()
    before = at.selectbox(key="corpus_pick").value
    for typed in (str(private), "../../private/secret-corpus", "leak", "/etc"):
        at.text_input(key="corpus_path").input(typed).run()
        assert not at.exception
        errors = [e.value for e in at.error]
        assert len(errors) == 1 and "\n" not in errors[0], typed
        assert at.selectbox(key="corpus_pick").value == before
        assert all("secret-corpus" not in o for o in at.selectbox(key="corpus_pick").options)
