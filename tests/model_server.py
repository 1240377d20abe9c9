"""A small OpenAI-compatible HTTP server for budget and failure tests: answers every prompt of the
pipeline (plan, claims, entailment) usably, or with garbage, or with HTTP 500, as the test says.

``mode``: ``good`` (usable answers derived from the prompt), ``garbage`` (HTTP 200 with text that is
not JSON), ``error`` (HTTP 500), or ``flaky`` (every other request HTTP 500). ``requests`` counts every
chat request the server received (each HTTP attempt of the client).
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ModelServer:
    def __init__(self, mode: str = "good"):
        self.mode = mode
        self.requests = 0
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _reply(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                self._reply(200, {"object": "list", "data": [{"id": "test-model", "object": "model"}]})

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with owner.lock:
                    owner.requests += 1
                    n = owner.requests
                mode = owner.mode
                if mode == "error" or (mode == "flaky" and n % 2 == 1):
                    return self._reply(500, {"error": {"message": "server exploded", "type": "server_error"}})
                content = "<html>sorry</html>" if mode == "garbage" else answer(body["messages"])
                self._reply(200, {
                    "id": "x", "object": "chat.completion", "created": 0, "model": body.get("model"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                })

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def answer(messages: list[dict[str, str]]) -> str:
    """A usable answer to the pipeline's prompt in ``messages`` (deterministic)."""
    user = messages[1]["content"]
    if "<query>" in user:
        q = re.search(r"<query>\s*(.*?)\s*</query>", user, re.S)
        words = (q.group(1) if q else "query").split()
        return json.dumps({"subqueries": [" ".join(words[:4])]})
    if "<paper>" in user:
        m = re.search(r"Abstract:\s*(.*?)\s*</paper>", user, re.S)
        abstract = m.group(1) if m else ""
        sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", abstract) if len(s.split()) >= 3] or [abstract]
        claims = [{"type": "EMPIRICAL", "text": f"{s} (claim {i})", "source_phrase": " ".join(s.split()[:4])}
                  for i, s in enumerate((sentences * 4)[:4], 1)]
        return json.dumps({"claims": claims})
    n_u = len(re.findall(r"^A\d+ ", user, re.M))
    blocks = re.findall(r'<cited id="(P\d+)">\n(.*?)\n</cited>', user, re.S)
    if blocks:  # the grouped prompt: one matrix per cited paper
        return json.dumps({k: [[0.9] * len(re.findall(r"^B\d+ ", body, re.M)) for _ in range(n_u)]
                           for k, body in blocks})
    n_v = len(re.findall(r"^B\d+ ", user, re.M))
    return json.dumps({"matrix": [[0.9] * n_v for _ in range(n_u)]})
