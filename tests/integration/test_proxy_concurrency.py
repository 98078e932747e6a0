"""Many sessions at once, from several threads each running its own event loop."""

import asyncio
import threading

import httpx
import openai
import pytest

from capture.proxy import create_capture_app
from capture.serving import CaptureServer
from capture.settings import CaptureSettings
from workbench.engine.config import EngineConfig
from workbench.engine.runner import EngineServer
from workbench.engine.script import ScriptPolicy

THREADS, SESSIONS_PER_THREAD, CALLS = 4, 16, 10


@pytest.mark.slow
def test_64_sessions_from_4_event_loops_lose_nothing():
    script = ScriptPolicy(rules=[], default="ok")
    with (
        EngineServer(EngineConfig(script=script)) as engine,
        CaptureServer(create_capture_app(CaptureSettings())) as proxy,
    ):
        errors: list[BaseException] = []
        sessions: dict[str, int] = {}
        lock = threading.Lock()

        async def agent(client: httpx.AsyncClient, number: int) -> None:
            created = await client.post(
                f"{proxy.url}/sessions", json={"engine": {"url": engine.url}}
            )
            key = created.json()["session_id"]
            with lock:
                sessions[key] = number
            sdk = openai.AsyncOpenAI(base_url=f"{proxy.url}/v1", api_key=key, http_client=client)
            history = [{"role": "user", "content": f"agent {number} call 0"}]
            for call in range(CALLS):
                reply = await sdk.chat.completions.create(model="m", messages=history)
                history += [
                    {"role": "assistant", "content": reply.choices[0].message.content},
                    {"role": "user", "content": f"agent {number} call {call + 1}"},
                ]

        async def thread_main(first: int) -> None:
            async with httpx.AsyncClient(timeout=120) as client:
                await asyncio.gather(
                    *(agent(client, first + i) for i in range(SESSIONS_PER_THREAD))
                )

        def run(first: int) -> None:
            try:
                asyncio.run(thread_main(first))
            except BaseException as exc:
                errors.append(exc)

        threads = [
            threading.Thread(target=run, args=(t * SESSIONS_PER_THREAD,)) for t in range(THREADS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        assert not errors, errors
        assert len(sessions) == THREADS * SESSIONS_PER_THREAD
        for key, number in sessions.items():
            doc = httpx.get(f"{proxy.url}/sessions/{key}/document", timeout=30).json()
            turns = doc["turns"]
            assert len(turns) == CALLS
            # Each session's graph holds exactly its own calls, as one chain.
            for call, turn in enumerate(turns):
                texts = [m.get("content") for m in turn["messages"] if m["role"] == "user"]
                assert texts[-1] == f"agent {number} call {call}"
            assert [t["parent"] for t in turns] == [None] + [t["id"] for t in turns[:-1]]
