"""Throughput of the model client against a fast local fake endpoint (issue 12, item 4).

Starts the fake endpoint ``crase_core.testing.fake_openai`` in its own process (answers after
``--latency`` seconds, 5 ms by default), then, for each concurrency, runs the real
client path — ``LLMEntailmentScorer.score_many`` over distinct claim pairs: prompt
rendering, JSON request, keep-alive HTTP, parsing and validation of the matrix —
in a fresh child process, and prints calls/s, p50/p95 latency per item, peak RSS
of the child, client CPU per call, the 429/503 answers seen, how far the
adaptive limit was cut, and the connections opened.

    .venv/bin/python benchmarks/llm_throughput.py                       # 1, 4, 16, 64, 128
    .venv/bin/python benchmarks/llm_throughput.py --inject-rate 0.05 --inject 429,503
    .venv/bin/python benchmarks/llm_throughput.py --capacity 8           # server with 8 slots, 429 beyond
    .venv/bin/python benchmarks/llm_throughput.py --compare-transports   # openai SDK vs httpx vs the client's

``--json FILE`` writes the rows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

FAKE = "crase_core.testing.fake_openai"  # run as a module: ``python -m crase_core.testing.fake_openai``


def start_fake(args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", FAKE, "--latency", str(args.latency), "--inject-rate", str(args.inject_rate),
           "--inject", args.inject, "--retry-after", args.retry_after, "--seed", "0"]
    if args.capacity:
        cmd += ["--capacity", str(args.capacity), "--capacity-retry-after", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening "):
        proc.kill()
        raise SystemExit(f"the fake endpoint did not start: {line!r}")
    return proc, line.split()[1]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(base_url: str, concurrency: int, n: int, max_retries: int) -> dict:
    """One measurement in this (fresh) process: n entailment items at ``concurrency``."""
    from crase_core.llm.client import Endpoint
    from crase_core.llm.components import LLMEntailmentScorer, _transient
    from crase_core.records import Claim
    from crase_core.settings.llm import LLMSettings

    settings = LLMSettings(base_url=base_url, model="fake-model", concurrency=concurrency, max_retries=max_retries,
                           timeout=30)
    endpoint = Endpoint(settings)
    scorer = LLMEntailmentScorer(settings, endpoint)
    words = ["gauge", "anomaly", "string", "brane", "entropy", "horizon", "duality", "moduli", "flux", "tachyon"]

    def claims(i: int, side: str) -> list[Claim]:
        return [Claim(f"c{k}", "THEORETICAL", f"{side} claim {i} {k}: {words[(i + k) % 10]} {words[(i * 3 + k) % 10]} "
                      f"relates to {words[(i + 2 * k) % 10]}", "x") for k in range(1, 4)]

    pairs = [(claims(i, "citing"), claims(i, "cited")) for i in range(n)]
    latencies: list[float] = []

    async def timed(session: Any, pair: Any) -> Any:
        t = time.perf_counter()
        result = await scorer._score_one(session, pair)
        latencies.append(time.perf_counter() - t)
        return result

    cpu0, t0 = _cpu(), time.perf_counter()
    results = endpoint.run_batch(pairs, timed, _transient)
    wall = time.perf_counter() - t0
    cpu = _cpu() - cpu0
    calls = sum(r.usage.calls for r in results)
    failed = [r.error for r in results if r.error]
    lat = sorted(latencies)
    st = endpoint.last_stats
    return {
        "concurrency": concurrency, "items": n, "calls": calls, "wall_s": round(wall, 3),
        "calls_per_s": round(calls / wall, 1), "items_per_s": round(n / wall, 1),
        "p50_ms": round(1000 * statistics.median(lat), 2), "p95_ms": round(1000 * lat[int(0.95 * (len(lat) - 1))], 2),
        "client_cpu_ms_per_call": round(1000 * cpu / max(1, calls), 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "overloaded_answers": st.overloaded, "limit_cuts": st.cuts, "lowest_limit": round(st.lowest, 1),
        "final_limit": round(st.final, 1), "connections": endpoint.connections_opened, "failed": len(failed),
        "first_failure": failed[0] if failed else None,
    }


def compare_transports(base_url: str, n: int, concurrency: int) -> list[dict]:
    """Client CPU per call and calls/s of the bare request loop: openai SDK, httpx, and the client's transport."""
    import httpx
    import openai

    from crase_core.llm.transport import ConnectionPool

    messages = [{"role": "user", "content": "<claims_a>\nA1 [EMPIRICAL] gauge anomalies cancel\n</claims_a>\n"
                 "<claims_b>\nB1 [EMPIRICAL] anomalies cancel\n</claims_b>\nReturn {\"matrix\": ...}"}]
    payload = {"model": "fake-model", "messages": messages, "max_tokens": 64}

    async def sdk() -> None:
        http = httpx.AsyncClient(limits=httpx.Limits(max_connections=concurrency,
                                                     max_keepalive_connections=concurrency))
        client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0,
                                    http_client=http)  # type: ignore[arg-type]  # (the SDK's httpx build)
        await _loop(lambda: client.chat.completions.create(**payload), n, concurrency)  # type: ignore[call-overload]
        await client.close()

    async def plain_httpx() -> None:
        client = httpx.AsyncClient(base_url=base_url, headers={"Authorization": "Bearer x"},
                                   limits=httpx.Limits(max_connections=concurrency,
                                                       max_keepalive_connections=concurrency))

        async def one() -> None:
            r = await client.post("/chat/completions", content=json.dumps(payload).encode(),
                                  headers={"Content-Type": "application/json"})
            json.loads(r.content)["choices"][0]["message"]["content"]

        await _loop(one, n, concurrency)
        await client.aclose()

    async def builtin() -> None:
        pool = ConnectionPool(base_url, {"Authorization": "Bearer x"}, max_idle=concurrency)

        async def one() -> None:
            r = await pool.request("POST", "/chat/completions", json.dumps(payload).encode())
            json.loads(r.body)["choices"][0]["message"]["content"]

        await _loop(one, n, concurrency)
        await pool.close()

    rows = []
    for name, fn in (("openai SDK (AsyncOpenAI, shared httpx pool)", sdk), ("httpx.AsyncClient, keep-alive", plain_httpx),
                     ("crase transport (aiohttp, keep-alive)", builtin)):
        cpu0, t0 = _cpu(), time.perf_counter()
        asyncio.run(fn())
        wall = time.perf_counter() - t0
        rows.append({"transport": name, "concurrency": concurrency, "calls": n, "calls_per_s": round(n / wall, 1),
                     "client_cpu_ms_per_call": round(1000 * (_cpu() - cpu0) / n, 3)})
    return rows


async def _loop(make: Callable[[], Awaitable[object]], n: int, concurrency: int) -> None:
    todo = iter(range(n))

    async def worker() -> None:
        for _ in todo:
            await make()

    await asyncio.gather(*[worker() for _ in range(concurrency)])


def main() -> None:
    p = argparse.ArgumentParser(description="calls/s of the model client against a fast local fake endpoint")
    p.add_argument("--concurrency", default="1,4,16,64,128", help="comma-separated concurrencies")
    p.add_argument("--items", type=int, default=3000, help="items per concurrency (concurrency 1: a tenth)")
    p.add_argument("--latency", type=float, default=0.005)
    p.add_argument("--inject-rate", type=float, default=0.0)
    p.add_argument("--inject", default="429,503")
    p.add_argument("--retry-after", default="0")
    p.add_argument("--capacity", type=int, default=0)
    p.add_argument("--max-retries", type=int, default=2)
    p.add_argument("--compare-transports", action="store_true")
    p.add_argument("--json", default=None)
    p.add_argument("--child", nargs=4, metavar=("URL", "C", "N", "RETRIES"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        url, c, n, retries = args.child
        print(json.dumps(child(url, int(c), int(n), int(retries))))
        return
    proc, url = start_fake(args)
    rows: list[dict] = []
    try:
        if args.compare_transports:
            rows = compare_transports(url, args.items, 16)
            for r in rows:
                print(f"{r['transport']:<48} c={r['concurrency']:<4} {r['calls_per_s']:>8.1f} calls/s  "
                      f"{r['client_cpu_ms_per_call']:.3f} ms client CPU per call")
        else:
            print(f"fake endpoint: latency {args.latency * 1000:g} ms, inject {args.inject_rate:g} of {args.inject} "
                  f"(Retry-After {args.retry_after}), capacity {args.capacity or 'unlimited'}; "
                  f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
            print("| concurrency | items | calls | calls/s | p50 ms | p95 ms | client CPU ms/call | peak RSS MiB | "
                  "429/503 seen | limit cuts (lowest→final) | connections | failed |")
            print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
            for c in (int(x) for x in args.concurrency.split(",")):
                n = max(50, args.items // 10) if c == 1 else args.items
                out = subprocess.run([sys.executable, __file__, "--child", url, str(c), str(n), str(args.max_retries)],
                                     capture_output=True, text=True, check=True)
                r = json.loads(out.stdout.strip().splitlines()[-1])
                rows.append(r)
                print(f"| {c} | {r['items']} | {r['calls']} | {r['calls_per_s']} | {r['p50_ms']} | {r['p95_ms']} | "
                      f"{r['client_cpu_ms_per_call']} | {r['peak_rss_mib']} | {r['overloaded_answers']} | "
                      f"{r['limit_cuts']} ({r['lowest_limit']}→{r['final_limit']}) | {r['connections']} | "
                      f"{r['failed']} |", flush=True)
                if r["first_failure"]:
                    print(f"  first failure: {r['first_failure']}")
    finally:
        proc.terminate()
        proc.wait(10)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
