"""Semantic Scholar transport faults against the fake Graph API (a real HTTP server on 127.0.0.1).

Each case scripts one fault (``tests/fixtures/s2/fake_api.py``), checks the exact outcome (the
answer after retries, or the one error a user sees, and how long it took), that nothing failed was
cached, and that the same call once the fault is gone gives the clean answer.
"""

from __future__ import annotations

import email.utils
import json
import os
import socket
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "fixtures" / "s2"))
from cli_tools import crase, one_error  # noqa: E402
from fake_api import FakeS2, Fault  # noqa: E402

from crase_core import deadline  # noqa: E402
from crase_core.deadline import DeadlineExceeded  # noqa: E402
from crase_core.errors import SourceError  # noqa: E402
from crase_core.sources import s2_http  # noqa: E402
from crase_core.sources.s2_http import S2Client, S2Settings  # noqa: E402
from crase_core.sources.semantic_scholar import SemanticScholarSource  # noqa: E402

TAIL = ("The run stopped; responses fetched so far are cached on disk, so re-running the query resumes "
        "without fetching them again.")


class Sleeps(list):
    """Records every backoff wait instead of sleeping (the waits are what is checked)."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def source(fake: FakeS2, cache: Path | None, sleep=None, **opts) -> SemanticScholarSource:
    settings = {"base_url": fake.base_url, "rate": 0, "backoff_base": 0.01, "max_retries": 2,
                "cache_dir": str(cache) if cache else None, "use_cache": cache is not None, **opts}
    return SemanticScholarSource(S2Client(S2Settings.from_options(settings), api_key="",
                                          **({"sleep": sleep} if sleep is not None else {})))


def ids(src: SemanticScholarSource, q: str = "transformer") -> list[str]:
    return [h.paper.id for h in src.search(q, 10)]


@pytest.fixture
def expected(fake, tmp_path) -> list[str]:
    got = ids(source(fake, None))
    assert got
    fake.requests.clear()
    return got


def _fails(src: SemanticScholarSource, cls: type[Exception] = SourceError) -> str:
    with pytest.raises(cls) as err:
        ids(src)
    return str(err.value)


def _not_cached_then_right(fake, cache: Path, expected: list[str]) -> None:
    """The rerun after the fault fetches again (nothing failed was cached) and gets the clean answer."""
    n = fake.count("/paper/search")
    assert ids(source(fake, cache)) == expected
    assert fake.count("/paper/search") == n + 1


# ---- retried faults ----------------------------------------------------------------------------------

@pytest.mark.fault_kind("s2-429-retry-after-seconds")
def test_429_with_retry_after_seconds_waits_that_long(fake, tmp_path, expected):
    fake.faults.append(Fault("/paper/search", 429, {"Retry-After": "7"}))
    waits = Sleeps()
    src = source(fake, tmp_path / "c", waits)
    assert ids(src) == expected
    assert waits == [7.0] and src.stats.retries == 1 and fake.count("/paper/search") == 2


@pytest.mark.fault_kind("s2-429-retry-after-date")
def test_429_with_retry_after_http_date_waits_until_then(fake, tmp_path, expected):
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    fake.faults.append(Fault("/paper/search", 429, {"Retry-After": when}))
    waits = Sleeps()
    assert ids(source(fake, tmp_path / "c", waits)) == expected
    assert len(waits) == 1 and 27.0 <= waits[0] <= 30.0


@pytest.mark.fault_kind("s2-429-too-long")
def test_429_asking_for_longer_than_allowed_stops_at_once(fake, tmp_path, expected):
    fake.faults.append(Fault("/paper/search", 429, {"Retry-After": "3600"}))
    msg = _fails(source(fake, tmp_path / "c", Sleeps(), max_retry_after=60))
    assert msg == ("Semantic Scholar: kept answering GET /paper/search with HTTP 429 Too Many Requests; it asks to "
                   "wait 3600 s (Retry-After), more than the 60 s allowed. Wait a minute and re-run, lower the "
                   "request rate (--s2-rate), or set S2_API_KEY for a dedicated limit. " + TAIL)
    assert fake.count("/paper/search") == 1
    _not_cached_then_right(fake, tmp_path / "c", expected)


@pytest.mark.parametrize("status", [500, 502, 503, 504])
@pytest.mark.fault_kind("s2-5xx-once")
def test_server_error_is_retried_then_answers(fake, tmp_path, expected, status):
    fake.faults.append(Fault("/paper/search", status))
    src = source(fake, tmp_path / "c", Sleeps())
    assert ids(src) == expected and src.stats.retries == 1


@pytest.mark.fault_kind("s2-5xx-always")
def test_server_error_that_persists_stops_with_the_attempts_counted(fake, tmp_path, expected):
    fake.faults += [Fault("/paper/search", 503) for _ in range(3)]
    waits = Sleeps()
    msg = _fails(source(fake, tmp_path / "c", waits))
    assert msg == ("Semantic Scholar: failed GET /paper/search with HTTP 503 (3 attempts). The service is having "
                   "trouble; try again later. " + TAIL)
    assert len(waits) == 2 and waits[1] > waits[0] * 0.9  # exponential backoff with jitter
    _not_cached_then_right(fake, tmp_path / "c", expected)


@pytest.mark.fault_kind("s2-drop-mid-body-once")
def test_connection_dropped_mid_body_is_retried(fake, tmp_path, expected):
    body = json.dumps({"data": [{"paperId": "p01"}] * 20}).encode()
    fake.faults.append(Fault("/paper/search", 200, raw=body, cut_after=25))
    src = source(fake, tmp_path / "c", Sleeps())
    assert ids(src) == expected and src.stats.retries == 1


@pytest.mark.fault_kind("s2-drop-mid-body-always")
def test_connection_dropped_every_time_says_so(fake, tmp_path, expected):
    body = json.dumps({"data": [{"paperId": "p01"}] * 20}).encode()
    fake.faults += [Fault("/paper/search", 200, raw=body, cut_after=25) for _ in range(3)]
    msg = _fails(source(fake, tmp_path / "c", Sleeps()))
    assert msg.startswith("Semantic Scholar: broke off its answer to GET /paper/search (RemoteProtocolError: ")
    assert msg.endswith("(3 attempts). The connection or the service is unstable; try again later. " + TAIL)
    _not_cached_then_right(fake, tmp_path / "c", expected)


@pytest.mark.fault_kind("s2-nothing-listening")
def test_nothing_listening_says_it_could_not_be_reached(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    fake = FakeS2()
    fake.base_url = f"http://127.0.0.1:{port}/graph/v1"
    msg = _fails(source(fake, tmp_path / "c", Sleeps(), max_retries=1))
    assert msg.startswith(f"Semantic Scholar: could not be reached at {fake.base_url} (ConnectError: ")
    assert msg.endswith("(2 attempts). Check your internet connection, proxy or --s2-base-url, or run with the "
                        "local corpus (--source local). " + TAIL)


# ---- hangs: a total deadline per call, and the run's deadline ------------------------------------------

@pytest.mark.parametrize("headers_too", [False, True], ids=["body-trickle", "headers-trickle"])
@pytest.mark.fault_kind("s2-trickle")
def test_trickling_server_times_out_at_the_total_deadline(fake, tmp_path, expected, headers_too):
    """One byte every 0.2 s never trips a per-read timeout; the 1 s total deadline of the call does."""
    body = json.dumps({"data": []}).encode() * 4
    fake.faults.append(Fault("/paper/search", 200, raw=body, trickle=0.2, trickle_headers=headers_too))
    t0 = time.monotonic()
    msg = _fails(source(fake, tmp_path / "c", Sleeps(), timeout=1.0, max_retries=0))
    took = time.monotonic() - t0
    assert msg == ("Semantic Scholar: did not answer GET /paper/search within 1 s (1 attempt). Raise the timeout "
                   "(--s2-timeout) or try again later. " + TAIL)
    assert 0.9 <= took < 2.0, took
    _not_cached_then_right(fake, tmp_path / "c", expected)


@pytest.mark.fault_kind("s2-slow-answer-past-deadline")
def test_run_deadline_cuts_a_slow_call_short(fake, tmp_path, expected):
    fake.faults.append(Fault("/paper/search", 200, raw=b'{"data": []}', delay=5.0))
    t0 = time.monotonic()
    with deadline.running(0.8), pytest.raises(DeadlineExceeded) as err:
        ids(source(fake, tmp_path / "c", Sleeps(), timeout=30.0))
    assert time.monotonic() - t0 < 1.5
    assert str(err.value) == ("the run stopped at its deadline of 0.8 s (--deadline) in stage 'start'; work finished "
                              "so far is kept in the cache, so rerunning (with a longer --deadline) resumes from it")
    _not_cached_then_right(fake, tmp_path / "c", expected)


@pytest.mark.fault_kind("s2-backoff-past-deadline")
def test_run_deadline_is_not_slept_past_in_a_backoff(fake, tmp_path, expected):
    fake.faults.append(Fault("/paper/search", 429, {"Retry-After": "20"}))
    waits = Sleeps()
    with deadline.running(5.0), pytest.raises(DeadlineExceeded):
        ids(source(fake, tmp_path / "c", waits))
    assert waits == [] and fake.count("/paper/search") == 1


# ---- answers that are not what the API documents ----------------------------------------------------------

@pytest.mark.parametrize("raw, size", [
    (b"<!DOCTYPE html><html><body>Service Unavailable</body></html>", 60),
    (b'{"data": [\xff\xfe]}', 14),
    (b"[" * 100_000 + b"]" * 100_000, 200_000),
], ids=["html-body", "not-utf8-body", "deeply-nested-json"])
@pytest.mark.fault_kind("s2-200-not-json")
def test_200_that_is_not_json_stops_and_is_not_cached(fake, tmp_path, expected, raw, size):
    fake.faults.append(Fault("/paper/search", 200, raw=raw))
    msg = _fails(source(fake, tmp_path / "c", Sleeps()))
    assert msg == (f"Semantic Scholar: returned a response to GET /paper/search that is not valid JSON ({size} bytes). "
                   "The service may be degraded; try again later or report it if it persists. " + TAIL)
    _not_cached_then_right(fake, tmp_path / "c", expected)


@pytest.mark.fault_kind("s2-answer-over-cap")
def test_answer_larger_than_the_cap_is_not_read(fake, tmp_path, expected, monkeypatch):
    monkeypatch.setattr(s2_http, "MAX_RESPONSE_BYTES", 4096)
    fake.faults.append(Fault("/paper/search", 200, raw=b'{"data": [' + b'{"paperId": "p01"},' * 1000 + b"{}]}"))
    assert _fails(source(fake, tmp_path / "c", Sleeps())) == (
        "Semantic Scholar: sent an answer to GET /paper/search larger than 0 MB; it was not read. " + TAIL)
    monkeypatch.undo()
    _not_cached_then_right(fake, tmp_path / "c", expected)


@pytest.mark.fault_kind("s2-batch-wrong-length")
def test_batch_answer_of_the_wrong_length_stops(fake, tmp_path):
    fake.faults.append(Fault("/paper/batch", 200, raw=b"[null]"))
    with pytest.raises(SourceError) as err:
        source(fake, tmp_path / "c", Sleeps()).get(["p01", "p02"])
    assert str(err.value) == ("Semantic Scholar: returned an answer to POST /paper/batch that does not have the "
                              "documented shape (expected a list of 2 entries (null for unknown ids)). The API may "
                              "have changed or the service is degraded; try again later or report it. " + TAIL)
    assert sorted(source(fake, tmp_path / "c").get(["p01", "p02"])) == ["p01", "p02"]


@pytest.mark.fault_kind("s2-empty-data")
def test_empty_data_is_an_empty_answer(fake, tmp_path, expected):
    fake.faults.append(Fault("/paper/search", 200, raw=b'{"total": 0, "offset": 0, "data": []}'))
    assert ids(source(fake, tmp_path / "c")) == []


@pytest.mark.parametrize("status, key, message", [
    (401, "sk-s2-SECRET", "Semantic Scholar: rejected the API key for GET /paper/search (HTTP 401). Check the key in "
                          "S2_API_KEY (or SEMANTIC_SCHOLAR_API_KEY), or unset it to use the shared keyless limit. "),
    (403, "", "Semantic Scholar: refused GET /paper/search without an API key (HTTP 403). Set S2_API_KEY to a "
              "Semantic Scholar API key (https://www.semanticscholar.org/product/api). "),
], ids=["401-bad-key", "403-no-key"])
@pytest.mark.fault_kind("s2-key-refused")
def test_refused_key_stops_at_once_without_showing_it(fake, tmp_path, status, key, message):
    fake.faults.append(Fault("/paper/search", status))
    client = S2Client(S2Settings(base_url=fake.base_url, rate=0, use_cache=False), api_key=key, sleep=Sleeps())
    with pytest.raises(SourceError) as err:
        SemanticScholarSource(client).search("transformer", 10)
    assert str(err.value) == message + TAIL
    assert fake.count("/paper/search") == 1


@pytest.mark.fault_kind("s2-400")
def test_bad_request_names_the_api_message(fake, tmp_path):
    fake.faults.append(Fault("/paper/search", 400, raw=b'{"error": "Unrecognized or unsupported fields: [x]"}'))
    msg = _fails(source(fake, tmp_path / "c", Sleeps()))
    assert msg == ("Semantic Scholar refused GET /paper/search (HTTP 400: Unrecognized or unsupported fields: [x]). "
                   "This is a bug in the request Crase built or a change of the API; please report it. " + TAIL)


# ---- the response cache folder ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["a-file", "read-only"])
@pytest.mark.fault_kind("s2-cache-dir-unusable")
def test_unusable_cache_folder_runs_without_caching(fake, tmp_path, expected, caplog, kind):
    folder = tmp_path / "s2cache"
    if kind == "a-file":
        folder.write_text("not a folder")
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes through read-only permission bits (covered by the a-file case)")
        folder.mkdir()
        folder.chmod(0o555)
    with caplog.at_level("WARNING"):
        src = source(fake, folder)
        assert ids(src) == expected and ids(src) == expected
    assert fake.count("/paper/search") == 2  # nothing cached: the second search asks again
    assert any("Semantic Scholar response cache" in r.getMessage() and "not usable" in r.getMessage()
               or "unavailable" in r.getMessage() for r in caplog.records), caplog.text
    if kind == "a-file":
        assert folder.read_text() == "not a folder"
        folder.unlink()
    else:
        folder.chmod(0o755)
        assert list(folder.iterdir()) == []
    src = source(fake, folder)  # the fault gone: the cache works again
    assert ids(src) == expected and ids(src) == expected and fake.count("/paper/search") == 3


# ---- the CLI -------------------------------------------------------------------------------------------

@pytest.mark.fault_kind("s2-trickle")
def test_cli_with_a_trickling_api_stops_at_s2_timeout(capsys, fake, tmp_path, tiny_corpus_dir):
    fake.faults.append(Fault("/paper/search", 200, raw=b'{"data": []}' * 4, trickle=0.25))
    t0 = time.monotonic()
    r = crase(capsys, "query", "transformer attention", "--source", "s2", "--s2-base-url", fake.base_url,
              "--s2-timeout", "1", "--s2-max-retries", "0", "--s2-rate", "0", "--s2-cache-dir", tmp_path / "s2",
              "--corpus", tiny_corpus_dir, "--quiet", "--no-cache")
    assert time.monotonic() - t0 < 3.0
    assert one_error(r) == ("Semantic Scholar: did not answer GET /paper/search within 1 s (1 attempt). Raise the "
                            "timeout (--s2-timeout) or try again later. " + TAIL)


@pytest.mark.fault_kind("run-past-deadline")
def test_cli_run_past_its_deadline_names_the_stage(capsys, fake, tmp_path, tiny_corpus_dir):
    fake.faults += [Fault("/paper/search", 200, raw=b'{"data": []}', delay=3.0) for _ in range(3)]
    args = ["query", "transformer attention", "--source", "s2", "--s2-base-url", fake.base_url, "--s2-rate", "0",
            "--s2-cache-dir", tmp_path / "s2", "--corpus", tiny_corpus_dir, "--quiet", "--no-cache",
            "--json", tmp_path / "run.json"]
    t0 = time.monotonic()
    r = crase(capsys, *args, "--deadline", "1")
    assert time.monotonic() - t0 < 2.5
    assert one_error(r) == ("the run stopped at its deadline of 1 s (--deadline) in stage 'seeds'; work finished so "
                            "far is kept in the cache, so rerunning (with a longer --deadline) resumes from it")
    assert not (tmp_path / "run.json").exists()
    fake.faults.clear()  # the fault gone: the same command answers
    ok = crase(capsys, *args, "--deadline", "60")
    assert ok.code == 0, ok.err
    assert "Attention Is All You Need" in ok.out and (tmp_path / "run.json").is_file()
