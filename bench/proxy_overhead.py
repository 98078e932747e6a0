"""Capture-proxy overhead: the same requests sent straight to the reference engine and through the
proxy, interleaved in one run, at 1, 16 and 64 concurrent sessions.

    .venv/bin/python bench/proxy_overhead.py [--calls 40] [--concurrency 1 16 64]

The engine and the proxy each run in their own process (as in production); this process is the
client. Completions are 1-4 tokens so the engine is not the bottleneck. Budget (DESIGN.md §10):
<= 1 ms p50 and <= 3 ms p99 added at 64 sessions, >= 500 calls/s through one proxy process.

Printed per concurrency: direct and proxied latency p50/p99, the added latency (p50/p99 of the
per-pair differences: each proxied call minus its interleaved direct twin), calls/s of each path
alone at that concurrency, the ratio proxy/direct, and where the proxy's time goes (engine time
measured inside the proxy vs what the client saw).
"""

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import threading
import time

import httpx

from capture.proxy import create_capture_app
from capture.serving import CaptureServer
from capture.settings import CaptureSettings
from capture.shaping import shape_chat_body
from capture.upstream import Upstream

MODEL = "workbench-ref"


def serve_engine(urls: "multiprocessing.Queue[str]") -> None:
    from workbench.engine.config import EngineConfig
    from workbench.engine.runner import EngineServer
    from workbench.engine.script import ScriptPolicy

    # A scripted one-word answer: short, and identical for both paths.
    with EngineServer(EngineConfig(script=ScriptPolicy(rules=[], default="ok"))) as engine:
        urls.put(engine.url)
        threading.Event().wait()


def serve_proxy(urls: "multiprocessing.Queue[str]") -> None:
    with CaptureServer(create_capture_app(CaptureSettings(max_tokens_ceiling=4))) as proxy:
        urls.put(proxy.url)
        threading.Event().wait()


def start(target) -> tuple[multiprocessing.Process, str]:
    urls: multiprocessing.Queue[str] = multiprocessing.Queue()
    process = multiprocessing.Process(target=target, args=(urls,), daemon=True)
    process.start()
    return process, urls.get(timeout=120)


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process, all threads (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def request(i: int) -> dict:
    return {
        "model": "any",
        "messages": [{"role": "user", "content": f"Ping {i}."}],
        "max_tokens": 4,
        "seed": i,
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def timed(upstream: Upstream, body: dict) -> float:
    """Latency of one chat call in ms (the client is the proxy's own lean one: httpx would cost
    this process more CPU than the proxy spends, on the same two cores)."""
    payload = json.dumps(body).encode()
    start = time.perf_counter()
    reply = await upstream.request(
        "POST", "/v1/chat/completions", payload, timeout_s=120, connect_s=10
    )
    elapsed = (time.perf_counter() - start) * 1000.0
    if reply.status != 200:
        raise RuntimeError(f"{upstream.host}:{upstream.port}: {reply.status} {reply.body[:300]}")
    return elapsed


async def run_level(
    engine: str, proxy: str, sessions: int, calls: int, pids: dict[str, int]
) -> dict:
    async with httpx.AsyncClient(timeout=120) as control:
        ids = []
        for _ in range(sessions):
            created = await control.post(f"{proxy}/sessions", json={"engine": {"url": engine}})
            ids.append(created.json()["session_id"])
        tier = (await control.get(f"{proxy}/sessions/{ids[0]}")).json()["tier"]
        direct = [Upstream(engine, {}) for _ in ids]
        proxied = [Upstream(proxy, {"authorization": f"Bearer {sid}"}) for sid in ids]

        def upstream(i: int) -> dict:  # exactly what the proxy sends for request(i)
            return shape_chat_body(
                request(i), tier=tier, served_model=MODEL, max_tokens_ceiling=4
            ).body

        direct_ms: list[float] = []
        proxy_ms: list[float] = []
        added_ms: list[float] = []  # per pair: proxied minus its direct twin

        async def interleaved(w: int) -> None:
            for k in range(calls):
                i = w * calls + k
                pair = [(direct[w], upstream(i)), (proxied[w], request(i))]
                # Alternate which path goes first so neither always sees the warmer engine.
                order = pair if k % 2 else pair[::-1]
                took = {id(client): await timed(client, body) for client, body in order}
                direct_ms.append(took[id(direct[w])])
                proxy_ms.append(took[id(proxied[w])])
                added_ms.append(proxy_ms[-1] - direct_ms[-1])

        await asyncio.gather(*(interleaved(w) for w in range(sessions)))

        cpu_ms: dict[str, float] = {}

        async def alone(through_proxy: bool) -> float:
            async def worker(w: int) -> None:
                for k in range(calls):
                    i = w * calls + k
                    if through_proxy:
                        await timed(proxied[w], request(i))
                    else:
                        await timed(direct[w], upstream(i))

            path = "proxy" if through_proxy else "direct"
            before = {name: cpu_seconds(pid) for name, pid in pids.items()}
            start = time.perf_counter()
            await asyncio.gather(*(worker(w) for w in range(sessions)))
            rate = sessions * calls / (time.perf_counter() - start)
            for name, pid in pids.items():
                after = cpu_seconds(pid)
                for part, used in zip(("user", "sys"), after, strict=True):
                    spent = used - before[name][part == "sys"]
                    cpu_ms[f"{path}_{name}_{part}"] = spent * 1000.0 / (sessions * calls)
            return rate

        direct_rate, proxy_rate = await alone(False), await alone(True)
        upstream_ms, inside_ms = [], []
        for sid in ids:
            doc = (await control.get(f"{proxy}/sessions/{sid}/document")).json()
            upstream_ms += [t["timings"]["upstream_ms"] for t in doc["turns"]]
            inside_ms += [t["timings"]["proxy_ms"] for t in doc["turns"]]
        for client in (*direct, *proxied):
            await client.aclose()
    return {
        "sessions": sessions,
        "tier": tier,
        "direct_p50": percentile(direct_ms, 0.5),
        "direct_p99": percentile(direct_ms, 0.99),
        "proxy_p50": percentile(proxy_ms, 0.5),
        "proxy_p99": percentile(proxy_ms, 0.99),
        "added_p50": percentile(added_ms, 0.5),
        "added_p99": percentile(added_ms, 0.99),
        "direct_rate": direct_rate,
        "proxy_rate": proxy_rate,
        "upstream_p50": statistics.median(upstream_ms),
        "inside_p50": percentile(inside_ms, 0.5),
        "inside_p99": percentile(inside_ms, 0.99),
        "proxy_user_ms": cpu_ms["proxy_proxy_user"],
        "proxy_sys_ms": cpu_ms["proxy_proxy_sys"],
        "engine_cpu_ms": cpu_ms["direct_engine_user"] + cpu_ms["direct_engine_sys"],
    }


def report(rows: list[dict]) -> None:
    print(f"cores: {os.cpu_count()}  load average: {os.getloadavg()}")
    print(
        f"{'sessions':>8} {'direct p50/p99':>15} {'proxy p50/p99':>15} {'added p50/p99':>15} "
        f"{'in-proxy p50/p99':>16} {'direct/s':>8} {'proxy/s':>8} {'ratio':>5} "
        f"{'proxy CPU/call':>14} {'engine CPU/call':>15}"
    )
    for r in rows:
        added50, added99 = r["added_p50"], r["added_p99"]
        proxy_cpu = r["proxy_user_ms"] + r["proxy_sys_ms"]
        print(
            f"{r['sessions']:>8} {r['direct_p50']:>7.2f}/{r['direct_p99']:<7.2f} "
            f"{r['proxy_p50']:>7.2f}/{r['proxy_p99']:<7.2f} {added50:>7.2f}/{added99:<7.2f} "
            f"{r['inside_p50']:>8.3f}/{r['inside_p99']:<7.3f} "
            f"{r['direct_rate']:>8.0f} {r['proxy_rate']:>8.0f} "
            f"{r['proxy_rate'] / r['direct_rate']:>5.2f} {proxy_cpu:>11.2f} ms "
            f"{r['engine_cpu_ms']:>12.2f} ms"
        )
    print(
        "Latencies in ms. added = p50/p99 of (proxied - direct) over pairs of interleaved twin "
        "calls\n(on a loaded box still noisy: the engine's queueing differs between the two); "
        "in-proxy = the proxy's\nown time before the commit, engine excluded, as recorded in "
        "each turn (timings.proxy_ms);\nCPU/call = CPU "
        "seconds of the proxy process per proxied call\nand of the engine process per direct "
        "call: 1000 / proxy CPU ms is what one free core pushes\nthrough the proxy. Clock "
        "ticks are 10 ms: use --calls >= 20."
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40, help="calls per session and path")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    args = parser.parse_args(argv)
    multiprocessing.set_start_method("spawn")
    engine_process, engine = start(serve_engine)
    proxy_process, proxy = start(serve_proxy)
    pids = {"proxy": proxy_process.pid, "engine": engine_process.pid}
    try:
        rows = [
            asyncio.run(run_level(engine, proxy, n, args.calls, pids)) for n in args.concurrency
        ]
    finally:
        for process in (proxy_process, engine_process):
            process.terminate()
            process.join(timeout=10)
    print(f"tier: {rows[0]['tier']}, {args.calls} calls per session and path")
    report(rows)


if __name__ == "__main__":
    main()
