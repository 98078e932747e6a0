"""Dataset specs -> lists of Harbor tasks.

A spec is one string:

- `demo`                              the bundled demo dataset (`workbench/demo/`)
- `path/to/tasks` | `path/to/task`    a directory of task dirs, or one task dir
- `path/registry.json[::name[@ver]]`  a local Harbor registry file (name optional if it has one)
- `https://github.com/org/repo[/tree/ref/sub][::name[@ver]]`, `git@host:org/repo`,
  `huggingface.co/datasets/org/repo`  a git (or Hugging Face) dataset repo, through Harbor's git
  client: its `registry.json` when a name is given, else its `tasks/` dir (needs the network)
- `name[@version]` | `org/name[@ref]` a Harbor registry dataset (legacy / package registry; needs
  the network; offline this fails fast with a clear error, it never hangs)

Remote tasks are downloaded as real files (never symlinks) under the cache directory. Resolved
task lists are cached in memory: local ones until a task file changes, remote ones for
`REMOTE_TTL_S`. Remote task lists are also saved on disk, so a dataset downloaded once still
resolves later when its registry is unreachable.
"""

import asyncio
import concurrent.futures
import functools
import hashlib
import shutil
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from harbor.models.task.id import GitTaskId, LocalTaskId, PackageTaskId
from harbor.models.task.task import Task
from pydantic import BaseModel

from workbench.settings import Settings

DEMO_DIR = Path(__file__).resolve().parent / "demo"
DEMO_SPEC = "demo"
PREVIEW_CHARS = 200
REMOTE_TTL_S = 600.0
PROBE_TIMEOUT_S = 3.0
REMOTE_TIMEOUT_S = 300.0
GIT_PREFIXES = ("https://", "http://", "ssh://", "git://", "git@")
GIT_HOSTS = ("github.com/", "gitlab.com/", "huggingface.co/", "hf.co/")


class DatasetError(Exception):
    """A dataset spec that cannot be resolved; the message says why and what to do."""


class RegistryUnreachable(DatasetError):
    """The registry or repository behind a remote spec cannot be reached from here."""


class TaskInfo(BaseModel):
    name: str
    path: Path
    instruction: str
    instruction_preview: str
    agent_timeout_s: float | None
    verifier_timeout_s: float
    network: bool  # False when the task's network policy is "no-network"
    network_mode: str  # Harbor's [environment].network_mode: public | allowlist | no-network
    source: str


class Dataset(BaseModel):
    name: str
    source: str
    tasks: list[TaskInfo]

    def task(self, name: str) -> TaskInfo:
        """A task by its name or its directory name."""
        for task in self.tasks:
            if name in (task.name, task.path.name):
                return task
        names = ", ".join(t.name for t in self.tasks) or "none"
        raise DatasetError(f"No task {name!r} in dataset {self.name!r} (tasks: {names}).")


def task_info(path: Path, source: str) -> TaskInfo:
    """Read one task directory with Harbor's own parser."""
    try:
        task = Task(path)
    except Exception as exc:
        raise DatasetError(f"{path} is not a readable Harbor task: {exc}") from exc
    config = task.config
    instruction = task.instruction.strip()
    preview = " ".join(instruction.split())
    if len(preview) > PREVIEW_CHARS:
        preview = preview[: PREVIEW_CHARS - 1] + "…"
    mode = config.environment.network_mode
    mode = getattr(mode, "value", str(mode))
    return TaskInfo(
        name=task.name,
        path=path.resolve(),
        instruction=instruction,
        instruction_preview=preview,
        agent_timeout_s=config.agent.timeout_sec,
        verifier_timeout_s=config.verifier.timeout_sec,
        network=mode != "no-network",
        network_mode=mode,
        source=source,
    )


@dataclass
class _Cached:
    dataset: Dataset
    fingerprint: tuple
    expires: float


class DatasetResolver:
    """Resolves specs to datasets and caches the task lists.

    cache_dir: remote tasks are downloaded to `cache_dir/tasks`; the task list of every
    resolved remote spec is kept in `cache_dir/lists`, so a dataset downloaded once still
    resolves when its registry is unreachable later (offline).
    """

    def __init__(self, cache_dir: Path) -> None:
        self.tasks_dir = cache_dir / "tasks"
        self.lists_dir = cache_dir / "lists"
        self._cache: dict[str, _Cached] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_home(cls, home: Path) -> "DatasetResolver":
        """The resolver of a workbench home: its cache is `home/cache/datasets`."""
        return cls(home / "cache" / "datasets")

    def resolve(self, spec: str, *, refresh: bool = False) -> Dataset:
        spec = spec.strip()
        if not spec:
            raise DatasetError("Empty dataset spec: give `demo`, a task directory or a name.")
        with self._lock:
            cached = self._cache.get(spec)
        now = time.monotonic()
        fresh = cached and not refresh and now < cached.expires
        if fresh and cached.fingerprint == self._fingerprint(cached.dataset):
            return cached.dataset
        try:
            dataset = self._resolve(spec)
        except RegistryUnreachable:
            dataset = self._recall(spec)
            if dataset is None:
                raise
        remote = any(not _is_local(t.source) for t in dataset.tasks)
        if remote:
            self._remember(spec, dataset)
        entry = _Cached(
            dataset=dataset,
            fingerprint=self._fingerprint(dataset),
            expires=now + REMOTE_TTL_S if remote else float("inf"),
        )
        with self._lock:
            self._cache[spec] = entry
        return dataset

    def _list_path(self, spec: str) -> Path:
        return self.lists_dir / f"{hashlib.sha256(spec.encode()).hexdigest()[:24]}.json"

    def _remember(self, spec: str, dataset: Dataset) -> None:
        self.lists_dir.mkdir(parents=True, exist_ok=True)
        path = self._list_path(spec)
        partial = path.with_suffix(".tmp")
        partial.write_text(dataset.model_dump_json())
        partial.replace(path)  # atomic: a reader never sees half a list

    def _recall(self, spec: str) -> Dataset | None:
        """The task list saved when `spec` last resolved, if all its tasks are still on disk."""
        try:
            dataset = Dataset.model_validate_json(self._list_path(spec).read_text())
        except (OSError, ValueError):
            return None
        if not all(t.path.is_dir() for t in dataset.tasks):
            return None
        return dataset.model_copy(update={"source": f"{spec} (saved copy: registry unreachable)"})

    @staticmethod
    def _fingerprint(dataset: Dataset) -> tuple:
        """Changes when a task is added, removed or edited (local) — cheap stats only."""
        stats = []
        for task in dataset.tasks:
            for name in ("task.toml", "instruction.md"):
                try:
                    stats.append((task.path / name).stat().st_mtime_ns)
                except OSError:
                    stats.append(None)
        roots = {t.path.parent for t in dataset.tasks}
        stats.extend(sorted((str(r), r.stat().st_mtime_ns) for r in roots if r.exists()))
        return tuple(stats)

    def _resolve(self, spec: str) -> Dataset:
        if spec == DEMO_SPEC:
            return _local_dir(DEMO_DIR, name=DEMO_SPEC)
        location, _, selector = spec.partition("::")
        path = Path(location).expanduser()
        if path.exists():
            if path.is_file() or ((path / "registry.json").is_file() and not _task_dirs(path)):
                registry = path if path.is_file() else path / "registry.json"
                return self._local_registry(registry, selector, spec)
            if selector:
                raise DatasetError(f"`::{selector}` only applies to a registry.json ({spec}).")
            return _local_dir(path, name=path.resolve().name)
        if location.startswith(GIT_PREFIXES) or location.startswith(GIT_HOSTS):
            return self._git_repo(location, selector, spec)
        if location.startswith(("/", ".", "~")) or location.endswith(".json"):
            raise DatasetError(f"No such file or directory: {location}")
        return self._harbor_registry(spec)

    # -- local ---------------------------------------------------------------------------

    def _local_registry(self, registry: Path, selector: str, spec: str) -> Dataset:
        from harbor.registry.client.json import JsonRegistryClient

        try:
            client = JsonRegistryClient(path=registry)
        except Exception as exc:
            raise DatasetError(f"{registry} is not a Harbor registry.json: {exc}") from exc
        names = sorted(client.dataset_specs)
        if not selector:
            if len(names) != 1:
                listed = ", ".join(names) or "none"
                raise DatasetError(
                    f"{registry} holds several datasets ({listed}): pick one with "
                    f"`{registry}::NAME[@VERSION]`."
                )
            selector = names[0]
        try:
            metadata = _run(client.get_dataset_metadata(selector))
        except ValueError as exc:
            raise DatasetError(f"{exc} in {registry} (datasets: {', '.join(names)}).") from exc
        # Relative local task paths in a registry file are relative to the file, not the cwd.
        task_ids = [
            LocalTaskId(path=registry.parent / t.path)
            if isinstance(t, LocalTaskId) and not t.path.is_absolute()
            else t
            for t in metadata.task_ids
        ]
        name = f"{metadata.name}@{metadata.version}"
        return Dataset(name=name, source=spec, tasks=self._tasks_from_ids(task_ids, name))

    # -- remote --------------------------------------------------------------------------

    def _git_repo(self, location: str, selector: str, spec: str) -> Dataset:
        from harbor.registry.client.git_repo import GitRepoRegistryClient, resolve_repo_source

        try:
            repo = resolve_repo_source(location)
        except ValueError as exc:
            raise DatasetError(f"Not a git repository spec: {location} ({exc}).") from exc
        _require_network(repo.host, f"the git repository {repo.git_url}", _git_port(repo.git_url))
        client = GitRepoRegistryClient(repo)
        metadata = _run(client.get_dataset_metadata(selector), what=spec)
        return Dataset(
            name=metadata.name,
            source=spec,
            tasks=self._tasks_from_ids(metadata.task_ids, metadata.name),
        )

    def _harbor_registry(self, spec: str) -> Dataset:
        name, _, version = spec.partition("@")
        if "/" in name:  # org/name: the package registry
            from harbor.auth.constants import SUPABASE_URL
            from harbor.registry.client.package import PackageDatasetClient

            _require_network(_host(SUPABASE_URL), "Harbor's package registry")
            client = PackageDatasetClient()
            query = f"{name}@{version or 'latest'}"
        else:  # bare name: the legacy registry
            from harbor.registry.client.harbor.config import HARBOR_SUPABASE_URL
            from harbor.registry.client.harbor.harbor import HarborRegistryClient

            _require_network(_host(HARBOR_SUPABASE_URL), "Harbor's dataset registry")
            client = HarborRegistryClient()
            query = spec
        metadata = _run(client.get_dataset_metadata(query), what=spec)
        label = f"{metadata.name}@{metadata.version}"
        return Dataset(
            name=label, source=spec, tasks=self._tasks_from_ids(metadata.task_ids, label)
        )

    def _tasks_from_ids(
        self, task_ids: list[GitTaskId | LocalTaskId | PackageTaskId], source: str
    ) -> list[TaskInfo]:
        remote = [t for t in task_ids if not isinstance(t, LocalTaskId)]
        downloaded: dict[object, Path] = {}
        if remote:
            from harbor.tasks.client import TaskClient

            result = _run(
                TaskClient().download_tasks(remote, output_dir=self.tasks_dir), what=source
            )
            downloaded = dict(zip(remote, result.paths, strict=True))
            for path in result.paths:
                _materialize_links(path)
        tasks = []
        for task_id in task_ids:
            if isinstance(task_id, LocalTaskId):
                path = task_id.path.expanduser()
                if not path.is_dir():
                    raise DatasetError(f"Task directory {path} listed by {source} is missing.")
                tasks.append(task_info(path, source=f"local:{source}"))
            else:
                tasks.append(task_info(downloaded[task_id], source=f"remote:{source}"))
        if not tasks:
            raise DatasetError(f"Dataset {source} has no tasks.")
        return tasks


def _is_local(source: str) -> bool:
    return not source.startswith("remote:")


def _task_dirs(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir() and Task.is_valid_dir(p))


def _local_dir(path: Path, *, name: str) -> Dataset:
    source = f"local:{path.resolve()}"
    if (path / "task.toml").is_file():
        return Dataset(name=name, source=str(path), tasks=[task_info(path, source)])
    dirs = _task_dirs(path)
    if not dirs:
        raise DatasetError(
            f"{path} holds no Harbor task directories (each needs task.toml, instruction.md, "
            "tests/ and environment/ or a docker_image)."
        )
    return Dataset(name=name, source=str(path), tasks=[task_info(p, source) for p in dirs])


def _materialize_links(root: Path) -> None:
    """Replace symlinks inside a downloaded task by copies of what they point at."""
    for link in sorted(root.rglob("*"), key=lambda p: len(p.parts)):
        if not link.is_symlink():
            continue
        target = link.resolve()
        if not target.is_relative_to(root.resolve()) or not target.exists():
            raise DatasetError(f"Downloaded task {root} has a link leaving the task: {link}")
        link.unlink()
        if target.is_dir():
            shutil.copytree(target, link, symlinks=False)
        else:
            shutil.copy2(target, link)


def _git_port(git_url: str) -> int:
    """The port a git remote is reached on (scp-style `git@host:path` is ssh)."""
    if git_url.startswith("git@"):
        return 22
    parts = urlsplit(git_url)
    return parts.port or {"http": 80, "ssh": 22, "git": 9418}.get(parts.scheme, 443)


def _host(url: str) -> str:
    return urlsplit(url).hostname or url


def probe(host: str, port: int = 443, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why `host:port` cannot be reached within `timeout_s` (None when it can).

    DNS resolution has no timeout of its own, so the probe runs in a daemon thread that is
    abandoned (not joined) when it overruns: the caller never waits longer than `timeout_s`.
    """
    outcome: list[str | None] = []

    def connect() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout_s).close()
            outcome.append(None)
        except OSError as exc:
            outcome.append(str(exc) or type(exc).__name__)

    thread = threading.Thread(target=connect, daemon=True, name=f"probe-{host}")
    thread.start()
    thread.join(timeout_s)
    return outcome[0] if outcome else f"no answer within {timeout_s:g} s"


def _require_network(host: str, what: str, port: int = 443) -> None:
    problem = probe(host, port)
    if problem:
        raise RegistryUnreachable(
            f"Cannot reach {what} ({host}: {problem}); it needs the network. Offline, use a "
            "local task directory, a local registry.json, or the bundled `demo` dataset."
        )


def _run(coro, *, what: str = ""):
    """Run one of Harbor's async clients to completion from sync code.

    It always gets a fresh event loop on a worker thread, so this also works when the caller is
    itself inside an event loop. Harbor's errors (ValueError, ConnectError, git failures) become
    DatasetError when `what` names the spec; local callers handle ValueError themselves.
    """
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="dataset") as pool:
        future = pool.submit(asyncio.run, asyncio.wait_for(coro, REMOTE_TIMEOUT_S))
        if not what:
            return future.result()
        try:
            return future.result()
        except TimeoutError as exc:
            raise DatasetError(f"{what}: no answer within {REMOTE_TIMEOUT_S:g} s.") from exc
        except Exception as exc:
            raise DatasetError(f"Cannot resolve {what}: {type(exc).__name__}: {exc}") from exc


def default_resolver() -> DatasetResolver:
    """The resolver of the home WORKBENCH_* names now (one per home, so its cache is shared;
    WORKBENCH_HOME may change between calls, e.g. between tests). A WorkbenchService uses the
    resolver of the home it was configured with."""
    return _resolver_of(Settings().home)


@functools.cache
def _resolver_of(home: Path) -> DatasetResolver:
    return DatasetResolver.for_home(home)


def resolve_dataset(spec: str, *, refresh: bool = False) -> Dataset:
    """Resolve a dataset spec (see the module docstring); raises DatasetError with the reason."""
    return default_resolver().resolve(spec, refresh=refresh)


async def aresolve_dataset(spec: str, *, refresh: bool = False) -> Dataset:
    """`resolve_dataset` off the event loop (it may block on disk, git or the network)."""
    return await asyncio.to_thread(resolve_dataset, spec, refresh=refresh)
