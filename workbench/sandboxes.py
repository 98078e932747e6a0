"""The sandbox catalogue: every Harbor environment type plus `local`, usable here or not, and why.

A sandbox is usable only when (1) its class imports, which needs its SDK (Harbor's pip extra),
and (2) Harbor's own `preflight()` for it passes — run here, because `Trial.create` does not.
A type whose class declares no preflight of its own is never reported usable: nothing would
have been checked. Credentials being set is never enough by itself.

Checks block (`docker info`, a bubblewrap probe, SDK imports): a `SandboxCatalogue` (one per
service) caches them for `PREFLIGHT_TTL_S`; the module functions check afresh each call (one-shot
commands). Async callers use the `a*` variants.
"""

import asyncio
import importlib.metadata
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

from harbor.environments.base import BaseEnvironment
from harbor.environments.factory import _ENVIRONMENT_REGISTRY, _load_environment_class
from harbor.models.environment_type import EnvironmentType
from harbor.utils.import_path import import_class
from packaging.requirements import Requirement
from pydantic import BaseModel

from workbench.local_sandbox import IMPORT_PATH as LOCAL_IMPORT_PATH
from workbench.local_sandbox import LocalSandbox

LOCAL = "local"
PREFLIGHT_TTL_S = 30.0
PREFLIGHT_TIMEOUT_S = 20.0


class SandboxInfo(BaseModel):
    name: str
    kind: Literal["type", "import_path"]  # how EnvironmentConfig selects it
    value: str  # the EnvironmentType value or the `module:Class` path
    usable: bool
    reason: str


class SandboxCatalogue:
    """Sandbox verdicts, cached for `ttl_s` per name (thread-safe)."""

    def __init__(self, ttl_s: float = PREFLIGHT_TTL_S):
        self.ttl_s = ttl_s
        self._cache: dict[str, tuple[float, SandboxInfo]] = {}
        self._lock = threading.Lock()

    def get(self, name: str, *, refresh: bool = False) -> SandboxInfo:
        """One sandbox by name (`local`, a Harbor environment type) or `module:Class` path.

        Raises KeyError for a name Harbor does not know; an unusable sandbox is returned with
        `usable=False` and the reason.
        """
        with self._lock:
            hit = self._cache.get(name)
        if hit and not refresh and time.monotonic() - hit[0] < self.ttl_s:
            return hit[1]
        info = _check(name)
        with self._lock:
            self._cache[name] = (time.monotonic(), info)
        return info

    async def aget(self, name: str, *, refresh: bool = False) -> SandboxInfo:
        return await asyncio.to_thread(self.get, name, refresh=refresh)

    def all(self, *, refresh: bool = False) -> list[SandboxInfo]:
        """Every sandbox with its verdict; checks run in parallel (blocking: call off the loop)."""
        with ThreadPoolExecutor(8, thread_name_prefix="preflight") as pool:
            return list(pool.map(lambda n: self.get(n, refresh=refresh), sandbox_names()))

    async def aall(self, *, refresh: bool = False) -> list[SandboxInfo]:
        return await asyncio.to_thread(self.all, refresh=refresh)


def is_local(info: SandboxInfo) -> bool:
    """Whether the sandbox is the local one (or a subclass: the test sandboxes are)."""
    if info.kind != "import_path":
        return False
    try:
        cls = import_class(info.value, base=BaseEnvironment, label="sandbox")
    except (ImportError, ValueError, TypeError):
        return False
    return issubclass(cls, LocalSandbox)


def sandbox_names() -> list[str]:
    """`local` first, then Harbor's environment types, without checking anything."""
    return [LOCAL, *sorted(t.value for t in _ENVIRONMENT_REGISTRY)]


def sandbox_catalogue() -> list[SandboxInfo]:
    """Every sandbox, checked now (blocking: call off the loop)."""
    return SandboxCatalogue().all()


async def asandbox_catalogue() -> list[SandboxInfo]:
    return await SandboxCatalogue().aall()


def get_sandbox(name: str) -> SandboxInfo:
    """One sandbox, checked now; see `SandboxCatalogue.get`."""
    return _check(name)


def _check(name: str) -> SandboxInfo:
    if name == LOCAL or ":" in name:
        value = LOCAL_IMPORT_PATH if name == LOCAL else name
        kind: Literal["type", "import_path"] = "import_path"
        load = lambda: import_class(value, base=BaseEnvironment, label="sandbox")  # noqa: E731
    else:
        try:
            env_type = EnvironmentType(name)
        except ValueError:
            raise KeyError(
                f"No sandbox {name!r}. Known: {', '.join(sandbox_names())}; or give module:Class."
            ) from None
        value, kind = env_type.value, "type"
        load = lambda: _load_environment_class(env_type)  # noqa: E731
        extra = _ENVIRONMENT_REGISTRY[env_type].pip_extra
        missing = _missing_requirements(extra) if extra else []
        if missing:
            return SandboxInfo(
                name=name,
                kind=kind,
                value=value,
                usable=False,
                reason=f"its SDK is not installed ({', '.join(missing)}): "
                f"pip install 'harbor[{extra}]'",
            )

    def verdict(usable: bool, reason: str) -> SandboxInfo:
        return SandboxInfo(name=name, kind=kind, value=value, usable=usable, reason=reason)

    try:
        cls = load()
    except (ImportError, ValueError, TypeError) as exc:
        return verdict(False, f"its class does not import: {_one_line(exc)}")
    if cls.preflight.__func__ is BaseEnvironment.preflight.__func__:
        return verdict(
            False,
            f"Harbor's {name} environment has no preflight check, so nothing can confirm it "
            "works on this machine",
        )
    problem = _preflight(cls)
    if problem:
        return verdict(False, problem)
    return verdict(True, "preflight passed")


def _missing_requirements(extra: str) -> list[str]:
    """The distributions Harbor's pip extra `extra` requires that are not installed."""
    missing = []
    for line in importlib.metadata.requires("harbor") or []:
        requirement = Requirement(line)
        marker = requirement.marker
        if requirement.name == "harbor" or marker is None:
            continue
        if not marker.evaluate({"extra": extra}):
            continue
        try:
            importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(requirement.name)
    return missing


def _preflight(cls: type[BaseEnvironment]) -> str | None:
    """Run `cls.preflight({})` with a time limit; the reason it fails, or None."""
    outcome: list[str | None] = []

    def run() -> None:
        try:
            cls.preflight({})
            outcome.append(None)
        except SystemExit as exc:  # Harbor's preflights exit with the message
            outcome.append(str(exc.code) if exc.code is not None else "preflight exited")
        except Exception as exc:
            outcome.append(f"preflight failed: {_one_line(exc)}")

    # A daemon thread: a preflight that hangs is abandoned, never waited for at exit.
    thread = threading.Thread(target=run, daemon=True, name=f"preflight-{cls.__name__}")
    thread.start()
    thread.join(PREFLIGHT_TIMEOUT_S)
    if not outcome:
        return f"preflight did not finish within {PREFLIGHT_TIMEOUT_S:g} s"
    return outcome[0]


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
