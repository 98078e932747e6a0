"""Text of single token ids, asked of the engine's `/detokenize` and cached.

vLLM's `/detokenize` turns a list of ids into one string, so per-token text takes one call per
unique id; the calls run concurrently (bounded) and every answer is cached per engine, so a
turn's view costs only the ids not seen before. `/detokenize` has no API-key check in vLLM.
"""

import asyncio
from collections.abc import Iterable

import httpx


class TokenTexts:
    """Per-engine cache of id → text. `lookup` never raises: a failure becomes a note."""

    def __init__(self, *, max_concurrency: int = 16, timeout_s: float = 5.0) -> None:
        self._cache: dict[tuple[str, str], dict[int, str]] = {}
        self._max_concurrency = max_concurrency
        self._timeout_s = timeout_s

    async def lookup(
        self, engine_url: str, model: str, ids: Iterable[int]
    ) -> tuple[dict[int, str], str | None]:
        """Texts for `ids` (as many as could be had) and a note saying why any are missing."""
        cache = self._cache.setdefault((engine_url.rstrip("/"), model), {})
        missing = sorted({int(i) for i in ids} - cache.keys())
        note = None
        if missing:
            try:
                cache.update(await self._fetch(engine_url.rstrip("/"), model, missing))
            except (httpx.HTTPError, ValueError, KeyError) as exc:
                note = (
                    f"token text unavailable from {engine_url}/detokenize "
                    f"({type(exc).__name__}: {exc}); token ids are shown instead"
                )
        return cache, note

    async def _fetch(self, base: str, model: str, ids: list[int]) -> dict[int, str]:
        limit = asyncio.Semaphore(self._max_concurrency)
        async with httpx.AsyncClient(timeout=self._timeout_s) as client:

            async def one(token_id: int) -> tuple[int, str]:
                async with limit:
                    r = await client.post(
                        f"{base}/detokenize", json={"model": model, "tokens": [token_id]}
                    )
                    r.raise_for_status()
                    return token_id, r.json()["prompt"]

            return dict(await asyncio.gather(*(one(i) for i in ids)))
