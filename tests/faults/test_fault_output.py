"""Faults in what is printed, logged and exported: escape sequences, credentials, formulas, bad XML, a bad store."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sqlite3
import threading
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fault_tools import query, run_cli
from tiny_corpus import TINY_CITATIONS, TINY_PAPERS, write_corpus

from crase_core import trace as trace_io
from crase_core.audit.store import AuditStore, verdicts_csv
from crase_core.views.export import to_csv, to_graphml

ESCAPES = "\x1b]0;pwned\x07\x1b[2J"
# any C0 control but newline, DEL, or a C1 control (8-bit CSI/OSC included)
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def _with_title(title: str, at: int = 0):
    papers = list(TINY_PAPERS)
    pid, year, _, abstract = papers[at]
    papers[at] = (pid, year, title, abstract)
    return papers


@pytest.mark.fault_kind("terminal-escape-sequences")
def test_escape_sequences_in_titles_and_queries_never_reach_the_terminal(tmp_path):
    corpus = write_corpus(tmp_path / "tiny", _with_title(f"Black hole {ESCAPES}entropy from D-branes"), TINY_CITATIONS)
    out = tmp_path / "run.json"
    r = query(corpus, tmp_path / "cache", "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert "Black hole entropy from D-branes (1998) — 9801001" in r.stdout
    assert not _CONTROL.search(r.stdout) and "pwned" not in r.stdout
    assert "\x1b" in trace_io.load(out).node("9801001").paper.title  # the trace keeps the data as it is
    shown = run_cli("show", str(out), "--edges", cache_dir=tmp_path / "cache")
    assert shown.returncode == 0 and not _CONTROL.search(shown.stdout) and "pwned" not in shown.stdout
    assert "Black hole entropy from D-branes" in shown.stdout
    hostile_query = run_cli("query", f"black hole {ESCAPES}entropy", "--corpus", str(corpus), "--quiet",
                            cache_dir=tmp_path / "cache")
    assert hostile_query.returncode == 0 and not _CONTROL.search(hostile_query.stdout + hostile_query.stderr)
    clean = write_corpus(tmp_path / "clean")  # the fault gone: the same line, character for character
    ok = query(clean, tmp_path / "cache")
    assert "Black hole entropy from D-branes (1998) — 9801001" in ok.stdout


class _Refuser(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that answers every call with 404 (so the client logs its URL)."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = json.dumps({"error": {"message": "no such model", "type": "not_found"}}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer  # noqa: N815

    def log_message(self, *args) -> None:
        pass


@pytest.mark.fault_kind("logs-credentials")
def test_debug_logs_never_show_credentials(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refuser)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        corpus = write_corpus(tmp_path / "tiny")
        r = run_cli("--debug", "query", "black hole", "--corpus", str(corpus), "--quiet", "--backend", "openai",
                    "--base-url", f"http://alice:PASSWORD123@127.0.0.1:{port}/v1", "--model", "m",
                    cache_dir=tmp_path / "cache", CRASE_API_KEY="sk-SECRETKEY12345678")
    finally:
        server.shutdown()
        server.server_close()
    text = r.stdout + r.stderr
    assert "PASSWORD123" not in text and "alice" not in text and "SECRETKEY12345678" not in text
    assert f"POST http://***@127.0.0.1:{port}/v1/chat/completions" in text  # the request was logged, masked
    assert r.returncode == 2, text[-2000:]


@pytest.mark.fault_kind("csv-formula")
def test_csv_exports_guard_every_text_column(tmp_path):
    store = AuditStore(tmp_path / "audit.sqlite")
    store.record("=run", "+citing", "-cited", "=1+2", "agree", True, note="@SUM(A1)")
    store.record("run2", "a", "b", "Alice", "disagree", False, note="fine")
    rows = list(csv.reader(io.StringIO(verdicts_csv(store.verdicts()))))
    assert rows[1] == ["'=run", "'+citing", "'-cited", "'=1+2", "agree", "kept", "keep", "'@SUM(A1)", rows[1][8]]
    assert rows[2][:8] == ["run2", "a", "b", "Alice", "disagree", "pruned", "keep", "fine"]  # plain text unchanged
    corpus = write_corpus(tmp_path / "tiny", _with_title("=HYPERLINK(\"http://x\")"), TINY_CITATIONS)
    out = tmp_path / "run.json"
    assert query(corpus, tmp_path / "cache", "--json", str(out)).returncode == 0
    for row in csv.reader(io.StringIO(to_csv(trace_io.load(out)))):
        for cell in row[2:4] + row[5:]:
            assert cell[:1] not in ("=", "+", "-", "@"), row


@pytest.mark.fault_kind("graphml-control-characters")
def test_graphml_with_control_characters_is_valid_xml(tmp_path):
    corpus = write_corpus(tmp_path / "tiny", _with_title("Black hole\x01 entropy\x0b from D-branes"), TINY_CITATIONS)
    out = tmp_path / "run.json"
    assert query(corpus, tmp_path / "cache", "--json", str(out)).returncode == 0
    root = ET.fromstring(to_graphml(trace_io.load(out)).encode("utf-8"))
    ns = {"g": "http://graphml.graphdrawing.org/xmlns"}
    keys = {k.get("attr.name"): k.get("id") for k in root.findall("g:key", ns)}
    node = next(n for n in root.iter("{http://graphml.graphdrawing.org/xmlns}node") if n.get("id") == "9801001")
    title = next(d.text for d in node.findall("g:data", ns) if d.get("key") == keys["title"])
    assert title == "Black hole entropy from D-branes"
    clean = tmp_path / "clean.json"  # the fault gone: the same export, same title
    assert query(write_corpus(tmp_path / "clean"), tmp_path / "cache", "--json", str(clean)).returncode == 0
    assert f'<data key="{keys["title"]}">Black hole entropy from D-branes</data>' in to_graphml(trace_io.load(clean))


@pytest.mark.fault_kind("audit-store-random-bytes")
def test_random_bytes_audit_store_is_set_aside_not_lost(tmp_path):
    path = tmp_path / "audit.sqlite"
    junk = os.urandom(4096)
    path.write_bytes(junk)
    store = AuditStore(path)
    assert store.set_aside is not None and store.set_aside.name.startswith("audit.sqlite.unreadable-")
    assert store.set_aside.read_bytes() == junk  # kept, byte for byte
    store.record("r1", "a", "b", "Alice", "agree", True)
    again = AuditStore(path)  # the fault gone: the new store is a normal one
    assert again.set_aside is None and [v.auditor for v in again.verdicts()] == ["Alice"]
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT count(*) FROM verdicts").fetchone()[0] == 1


@pytest.mark.fault_kind("logs-credentials")
def test_secret_filter_masks_in_process_log_records(caplog):
    """The filter the CLI installs, used in-process (as the app can): arguments and tracebacks are masked too."""
    import logging

    from crase_core.redaction import SecretFilter

    log = logging.getLogger("crase.test.secrets")
    caplog.set_level(logging.INFO)
    caplog.handler.addFilter(SecretFilter())
    log.info("calling %s with %s", "https://bob:hunter2@api.example.org/v1?api_key=K123", "Bearer abcdefgh12345")
    try:
        raise RuntimeError("failed for http://bob:hunter2@api.example.org")
    except RuntimeError:
        log.exception("request failed")
    text = caplog.text
    assert "hunter2" not in text and "K123" not in text and "abcdefgh12345" not in text
    assert "calling https://***@api.example.org/v1?api_key=*** with Bearer ***" in text
    assert "RuntimeError: failed for http://***@api.example.org" in text
