"""Concurrency limits shared by several event loops (asyncio.Semaphore binds to one loop)."""

import asyncio
import threading

from workbench.service import Slots


def test_slots_limit_holds_across_event_loops():
    slots = Slots(2)
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}

    async def hold() -> None:
        async with slots:
            with lock:
                state["now"] += 1
                state["peak"] = max(state["peak"], state["now"])
            await asyncio.sleep(0.05)
            with lock:
                state["now"] -= 1

    async def loop_body() -> None:
        await asyncio.gather(*(hold() for _ in range(3)))

    threads = [threading.Thread(target=asyncio.run, args=(loop_body(),)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert state["peak"] == 2
    assert slots.in_use == 0


def test_cancelled_waiter_gives_its_slot_back():
    slots = Slots(1)

    async def main() -> None:
        await slots.acquire()
        waiter = asyncio.create_task(slots.acquire())
        await asyncio.sleep(0.01)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        slots.release()
        # The cancelled waiter must not have swallowed the slot.
        await asyncio.wait_for(slots.acquire(), timeout=1)
        slots.release()

    asyncio.run(main())
    assert slots.in_use == 0


def test_waiter_on_another_loop_is_woken_by_release():
    slots = Slots(1)
    held, trying = threading.Event(), threading.Event()
    order: list[str] = []

    async def holder() -> None:
        await slots.acquire()
        held.set()
        await asyncio.to_thread(trying.wait, 5)
        await asyncio.sleep(0.05)  # let the waiter block on the slot
        order.append("released")
        slots.release()

    async def waiter() -> None:
        await asyncio.to_thread(held.wait, 5)
        trying.set()
        await slots.acquire()  # only a release on the other loop can wake this
        order.append("acquired")
        slots.release()

    a = threading.Thread(target=asyncio.run, args=(holder(),))
    b = threading.Thread(target=asyncio.run, args=(waiter(),))
    a.start(), b.start()
    a.join(5), b.join(5)
    assert order == ["released", "acquired"] and slots.in_use == 0
