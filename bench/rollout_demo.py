"""Demo rollouts end to end: terminus-2 + scripted reference engine + local sandbox + capture.

    python bench/rollout_demo.py [N]

Runs N rollouts of each demo task one after another, then the same N x tasks at once (limits 4
rollouts / 2 sandbox creations), in one process, and prints seconds per rollout side by side.
Budget (DESIGN.md §10): Run -> reward <= 20 s on 2 cores for the offline demo.
"""

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from workbench.datasets import resolve_dataset
from workbench.harnesses import get_harness
from workbench.rollout import RolloutRequest, RolloutResult
from workbench.service import WorkbenchService
from workbench.settings import Settings

BUDGET_S = 20.0


async def _timed(service: WorkbenchService, request: RolloutRequest) -> tuple[float, RolloutResult]:
    started = time.perf_counter()
    result = await service.run(request)
    return time.perf_counter() - started, result


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    get_harness("terminus-2")  # pay Harbor's agent imports (litellm) before timing
    with tempfile.TemporaryDirectory() as home:
        service = WorkbenchService(Settings(home=Path(home), max_rollouts=4, max_sandbox_creates=2))
        engine = service.start_embedded_engine()
        service.serve_proxy()
        requests = [
            RolloutRequest(
                dataset="demo", task=t.name, harness="terminus-2", sandbox="local", engine=engine
            )
            for t in resolve_dataset("demo").tasks
            for _ in range(n)
        ]
        try:
            asyncio.run(service.run(requests[0]))  # warm-up: engine weights, first tmux

            async def sequential() -> list[tuple[float, RolloutResult]]:
                return [await _timed(service, r) for r in requests]

            async def concurrent() -> tuple[float, list[tuple[float, RolloutResult]]]:
                started = time.perf_counter()
                out = await asyncio.gather(*(_timed(service, r) for r in requests))
                return time.perf_counter() - started, list(out)

            one_by_one = asyncio.run(sequential())
            wall, together = asyncio.run(concurrent())
        finally:
            service.close()

    every = one_by_one + together
    failed = [r.error for _, r in every if not r.ok]
    seq = [s for s, _ in one_by_one]
    print(f"demo rollouts: {len(requests)} sequential, then {len(requests)} concurrent")
    print(f"  ok: {len(every) - len(failed)}/{len(every)}  {failed[:3] if failed else ''}")
    print(f"  sequential  p50 {statistics.median(seq):5.2f} s   max {max(seq):5.2f} s / rollout")
    print(
        f"  concurrent  wall {wall:5.2f} s for {len(together)}  -> {wall / len(together):5.2f} s "
        f"/ rollout  (ratio to sequential p50: {wall / len(together) / statistics.median(seq):.2f})"
    )
    phases = [r.document.get("timings", {}) for _, r in one_by_one]
    for name in ("booting", "agent_setup", "agent", "verifying"):
        values = [p[name] for p in phases if p.get(name) is not None]
        if values:
            print(f"  phase {name:<11} p50 {statistics.median(values):5.2f} s")
    print(f"  budget: Run -> reward <= {BUDGET_S:.0f} s: max sequential {max(seq):.2f} s")


if __name__ == "__main__":
    main()
