"""The `local` sandbox: a Harbor environment that runs each trial in bubblewrap.

Selected with `EnvironmentConfig(import_path="workbench.local_sandbox:LocalSandbox")`.

Layout of one trial (HARBOR.md §11 lists why each piece is there):
- a per-trial host directory (the *root*) is bound at `/`, so uploads, downloads and every exec
  see the same files; host `/usr` and `/etc` are bound read-only (plus the `/bin`, `/lib`, ...
  links or binds the host has), `/dev` and `/proc` are fresh;
- Harbor's `/logs/{agent,verifier,artifacts}` binds are applied (auto-mounting is on by default,
  so Harbor reads logs straight from the trial directory);
- a *keeper* process holds one user + PID namespace for the whole trial; every exec joins it, so a
  tmux server started by one exec survives until the next (terminus-2 drives tmux). Killing the
  keeper's init kills every process of the trial: that is how `stop()` leaves nothing behind;
- network: a task with `network_mode = "no-network"` (or the deprecated `allow_internet = false`)
  gets a private network namespace per exec: no interface but its own loopback, so the host's
  loopback — and a capture proxy on it — is unreachable too. Host-side harnesses (terminus-2)
  call the proxy from the Harbor process and are unaffected; a harness installed *in* the
  sandbox needs a task whose network policy is `public` to reach the proxy.

Limits: commands run as the host uid (the `user` argument is accepted and ignored), there is no
image build (Dockerfile tasks see the host's `/usr`), and `/usr` is read-only, so in-sandbox
`apt-get install` fails.
"""

import asyncio
import codecs
import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import ClassVar

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.environments.options import EnvironmentOptions
from pydantic import Field

IMPORT_PATH = "workbench.local_sandbox:LocalSandbox"
MARKER_ENV = "WORKBENCH_SANDBOX"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Top-level host entries the sandbox sees: read-only binds (or re-created symlinks on merged-/usr
# systems). Everything else under `/` lives in the per-trial root.
HOST_READ_ONLY = ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
NO_ACCESS = ("proc", "dev")
BUILD_FILES = ("Dockerfile", "docker-compose.yaml", "docker-compose.yml")
KEEPER_READY_TIMEOUT_S = 10.0
# A root left by an interrupted run (no live process carries its marker) is removed when another
# sandbox starts; younger ones are spared: their keeper may still be starting.
STALE_ROOT_AGE_S = 60.0
# Written into a root that stop() keeps on purpose (delete=False or keep_root), so it is not stale.
KEPT_FILE = ".workbench-kept"
# After the command exits, a background child may still hold the output pipe open (`cmd &`):
# read what is already there, then stop waiting for it.
PIPE_DRAIN_S = 0.3
READ_CHUNK = 65536


class LocalSandboxOptions(EnvironmentOptions):
    """Options of the local sandbox (`EnvironmentConfig.kwargs`)."""

    auto_mounting: bool = Field(
        default=True,
        description="Bind Harbor's /logs dirs to the trial directory (no log downloads).",
    )
    root_base: Path | None = Field(
        default=None,
        description="Where per-trial roots are created; default <tmp>/workbench-sandboxes.",
    )
    keep_root: bool = Field(
        default=False, description="Keep the trial's root directory after stop (debugging)."
    )
    bwrap: str = Field(default="bwrap", description="The bubblewrap executable.")
    default_workdir: str = Field(
        default="/app",
        description="Working directory when the task sets no [environment].workdir.",
    )


class SandboxPathError(PermissionError):
    """A sandbox path that may not be read or written from the host."""


class LocalSandbox(BaseEnvironment):
    """A Harbor environment running commands in bubblewrap on this machine."""

    options_model: ClassVar[type[EnvironmentOptions]] = LocalSandboxOptions
    options: LocalSandboxOptions

    # Harbor passes `auto_mounting` explicitly (default False) into option parsing, so the
    # options default alone would be overridden: flip it here (HARBOR.md §11 obstacle 3).
    def __init__(self, *args, auto_mounting: bool = True, **kwargs):
        super().__init__(*args, auto_mounting=auto_mounting, **kwargs)
        for mount in self._host_mounts:
            if mount["type"] != "bind":
                raise ValueError(
                    f"The local sandbox supports bind mounts only, not {mount['type']!r} "
                    f"(target {mount['target']})."
                )
        base = self.options.root_base or Path(tempfile.gettempdir()) / "workbench-sandboxes"
        self.root = (base / _safe_name(self.session_id)).absolute()
        self.workdir = (
            self.task_env_config.workdir
            or _dockerfile_workdir(self.environment_dir)
            or self.options.default_workdir
        )
        self._keeper: asyncio.subprocess.Process | None = None
        self._init_pid: int | None = None
        self._ns_fds: tuple[int, ...] = ()
        self._running: set[asyncio.subprocess.Process] = set()

    @staticmethod
    def type() -> str:
        return "local"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities(mounted=True, disable_internet=True)

    def _validate_definition(self) -> None:
        """Any task directory runs; one that expects an image build is warned about."""
        built = [n for n in BUILD_FILES if (self.environment_dir / n).exists()]
        if built and not self.task_env_config.docker_image:
            self.logger.warning(
                "The local sandbox builds no image: %s of %s is ignored (only its WORKDIR is "
                "used), so the task sees this machine's /usr and none of the files the build "
                "would add.",
                built[0],
                self.environment_name,
            )

    @classmethod
    def preflight(cls, kwargs: dict | None = None) -> None:
        """Check that bubblewrap is installed and can create the namespaces a trial needs."""
        super().preflight(kwargs)
        options = LocalSandboxOptions.model_validate(kwargs or {})
        problem = bwrap_problem(options.bwrap)
        if problem:
            raise SystemExit(problem)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self, force_build: bool) -> None:
        await asyncio.to_thread(remove_stale_roots, self.root.parent)
        self._make_root()
        await self._start_keeper()
        await self._upload_environment_dir_after_start()

    async def stop(self, delete: bool) -> None:
        for proc in list(self._running):
            _kill_group(proc.pid)
        if self._init_pid is not None:
            # SIGKILL to a PID namespace's init kills every process in the namespace.
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._init_pid, signal.SIGKILL)
            self._init_pid = None
        if self._keeper is not None:
            _kill_group(self._keeper.pid)
            await self._keeper.wait()
            self._keeper = None
        kill_marked_processes(self.session_id)
        for fd in self._ns_fds:
            os.close(fd)
        self._ns_fds = ()
        if not self.root.exists():
            return
        if delete and not self.options.keep_root:
            await asyncio.to_thread(_remove_tree, self.root)
        else:
            (self.root / KEPT_FILE).touch()

    def _make_root(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for name in HOST_READ_ONLY:
            host, inside = Path("/") / name, self.root / name
            if host.is_symlink() and not inside.is_symlink():
                inside.symlink_to(os.readlink(host))
            elif host.is_dir() and not host.is_symlink():
                inside.mkdir(exist_ok=True)
        for name in ("proc", "dev", "root", "tmp", "var/tmp"):
            (self.root / name).mkdir(parents=True, exist_ok=True)
        for name in ("tmp", "var/tmp"):
            (self.root / name).chmod(0o1777)
        self._host_path(self.workdir, write=True).mkdir(parents=True, exist_ok=True)
        for mount in self._host_mounts:
            Path(mount["source"]).mkdir(parents=True, exist_ok=True)

    async def _start_keeper(self) -> None:
        info_read, info_write = os.pipe()
        try:
            self._keeper = await asyncio.create_subprocess_exec(
                *self._bwrap_base(),
                "--unshare-user",
                "--unshare-pid",
                *self._net_args(),
                "--info-fd",
                str(info_write),
                "--",
                "sh",
                "-c",
                "echo ready; exec sleep infinity",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(info_write,),
                start_new_session=True,
                # Only PATH and the marker (it shows the root is in use: remove_stale_roots).
                # Never the host env: the keeper's init runs inside the sandbox, where any
                # process can read its /proc/<pid>/environ (the session keys live there).
                env={"PATH": os.environ.get("PATH", DEFAULT_PATH), MARKER_ENV: self.session_id},
            )
            os.close(info_write)
            info_write = -1
            assert self._keeper.stdout is not None
            try:
                ready = await asyncio.wait_for(
                    self._keeper.stdout.readline(), KEEPER_READY_TIMEOUT_S
                )
            except TimeoutError:
                ready = b""
            if ready.strip() != b"ready":
                _kill_group(self._keeper.pid)
                stderr = await self._keeper.stderr.read() if self._keeper.stderr else b""
                await self._keeper.wait()
                raise RuntimeError(
                    "The local sandbox could not start bubblewrap: "
                    f"{stderr.decode(errors='replace').strip() or 'no output'}. "
                    "Run `workbench info` to see whether the local sandbox is usable here."
                )
            # bwrap writes the info JSON before it runs the command, so it is there by now.
            self._init_pid = int(json.loads(os.read(info_read, 4096))["child-pid"])
            self._ns_fds = tuple(
                os.open(f"/proc/{self._init_pid}/ns/{ns}", os.O_RDONLY) for ns in ("user", "pid")
            )
        finally:
            os.close(info_read)
            if info_write >= 0:
                os.close(info_write)

    # -- exec ------------------------------------------------------------------------------

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        del user  # every command runs as the host uid (see the module docstring)
        if not self._ns_fds:
            raise RuntimeError("The local sandbox is not started (call start() first).")
        argv = [
            *self._bwrap_base(),
            "--userns",
            str(self._ns_fds[0]),
            "--pidns",
            str(self._ns_fds[1]),
            *self._net_args(),
            "--clearenv",
            *self._env_args(self._merge_env(env) or {}),
            "--chdir",
            cwd or self.workdir,
            "--",
            "bash",
            "-c",
            command,
        ]
        # Our own pipe, not asyncio's: asyncio's `wait()` also waits for the pipe to close, which
        # a background child (`server &`) can hold open forever.
        read_fd, write_fd = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                pass_fds=self._ns_fds,
                start_new_session=True,
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        self._running.add(proc)
        stream = asyncio.StreamReader()
        transport, _ = await asyncio.get_running_loop().connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stream), os.fdopen(read_fd, "rb", buffering=0)
        )
        chunks: list[str] = []
        reader = asyncio.create_task(self._pump(stream, chunks))
        try:
            await asyncio.wait_for(proc.wait(), timeout_sec or None)
        except TimeoutError:
            _kill_group(proc.pid)
            await proc.wait()
            raise RuntimeError(f"Command timed out after {timeout_sec} seconds") from None
        except asyncio.CancelledError:
            _kill_group(proc.pid)
            await asyncio.shield(proc.wait())  # reap it, so no transport outlives the loop
            raise
        finally:
            self._running.discard(proc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(reader), PIPE_DRAIN_S)
            reader.cancel()
            transport.close()
        output = "".join(chunks)
        return ExecResult(stdout=output or None, stderr=None, return_code=proc.returncode or 0)

    async def _pump(self, stream: asyncio.StreamReader, chunks: list[str]) -> None:
        """Collect merged stdout/stderr, handing complete lines to Harbor's output callback."""
        callback = self._output_callback()
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending = ""
        while data := await stream.read(READ_CHUNK):
            text = decoder.decode(data)
            chunks.append(text)
            if callback is None:
                continue
            *lines, pending = (pending + text).split("\n")
            for line in lines:
                await callback(line + "\n", "stdout")
        tail = decoder.decode(b"", final=True)
        chunks.append(tail)
        if callback is not None and (pending + tail):
            await callback(pending + tail, "stdout")

    def _bwrap_base(self) -> list[str]:
        args = [self.options.bwrap, "--bind", str(self.root), "/"]
        for name in HOST_READ_ONLY:
            host = Path("/") / name
            if host.is_dir() and not host.is_symlink():
                args += ["--ro-bind", str(host), f"/{name}"]
        args += ["--proc", "/proc", "--dev", "/dev", "--die-with-parent"]
        for mount in self._host_mounts:
            flag = "--ro-bind" if mount.get("read_only") else "--bind"
            args += [flag, mount["source"], mount["target"]]
        return args

    def _net_args(self) -> list[str]:
        return ["--unshare-net"] if self._network_disabled else []

    def _env_args(self, env: dict[str, str]) -> list[str]:
        full = {
            "PATH": DEFAULT_PATH,
            "HOME": "/root",
            "LANG": "C.UTF-8",
            **env,
            MARKER_ENV: self.session_id,
        }
        args: list[str] = []
        for key, value in full.items():
            args += ["--setenv", key, value]
        return args

    # -- files -----------------------------------------------------------------------------

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        target = self._host_path(target_path, write=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(shutil.copy2, source_path, target)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        # Docker semantics: the *contents* of source_dir land in target_dir.
        target = self._host_path(target_dir, write=True)
        await asyncio.to_thread(
            shutil.copytree, source_dir, target, symlinks=True, dirs_exist_ok=True
        )

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        source = self._host_path(source_path, write=False)
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(shutil.copy2, source, target_path)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        source = self._host_path(source_dir, write=False)
        await asyncio.to_thread(
            shutil.copytree, source, target_dir, symlinks=True, dirs_exist_ok=True
        )

    def _host_path(self, sandbox_path: str, *, write: bool) -> Path:
        """Translate a sandbox path to the host path behind it, as the sandbox would resolve it.

        Symlinks are followed inside the sandbox's view, so a link planted by a task command
        (`ln -s /root/.ssh /app/x`) cannot redirect a host-side copy outside the sandbox.
        """
        path = self._resolve(sandbox_path)
        top = path.split("/")[1]
        if top in NO_ACCESS or (write and top in HOST_READ_ONLY):
            verb = "write into" if write else "read from"
            raise SandboxPathError(f"The local sandbox does not {verb} /{top} ({sandbox_path}).")
        mount = self._mount_for(path)
        if write and mount is not None and mount.get("read_only"):
            raise SandboxPathError(f"{mount['target']} is mounted read-only ({sandbox_path}).")
        return self._host_of(path)

    def _resolve(self, sandbox_path: str, max_links: int = 40) -> str:
        """Normalise an absolute sandbox path, following symlinks the way the sandbox would."""
        if not sandbox_path.startswith("/"):
            raise SandboxPathError(f"Sandbox paths must be absolute: {sandbox_path!r}")
        parts = [p for p in sandbox_path.split("/") if p and p != "."]
        resolved: list[str] = []
        links = 0
        while parts:
            part = parts.pop(0)
            if part == "..":
                if resolved:
                    resolved.pop()
                continue
            resolved.append(part)
            host = self._host_of("/" + "/".join(resolved))
            if not host.is_symlink():
                continue
            links += 1
            if links > max_links:
                raise SandboxPathError(f"Too many symlinks in {sandbox_path!r}")
            target = os.readlink(host)
            resolved.pop()
            if target.startswith("/"):
                resolved = []
            parts = [p for p in target.split("/") if p and p != "."] + parts
        return "/" + "/".join(resolved)

    def _mount_for(self, path: str) -> dict | None:
        """The innermost bind whose target contains `path`."""
        best = None
        for mount in self._host_mounts:
            target = mount["target"].rstrip("/")
            inside = path == target or path.startswith(target + "/")
            if inside and (best is None or len(target) > len(best["target"].rstrip("/"))):
                best = mount
        return best

    def _host_of(self, path: str) -> Path:
        """The host path behind a normalised sandbox path (no symlink handling)."""
        mount = self._mount_for(path)
        if mount is not None:
            rest = path[len(mount["target"].rstrip("/")) :].lstrip("/")
            return Path(mount["source"]) / rest
        top = Path("/") / path.split("/")[1]
        if top.name in HOST_READ_ONLY and top.is_dir() and not top.is_symlink():
            return Path(path)
        return self.root / path.lstrip("/")


def bwrap_problem(bwrap: str = "bwrap") -> str | None:
    """Why bubblewrap cannot run trials here (None when it can). Blocks for up to ~10 s."""
    exe = shutil.which(bwrap)
    if exe is None:
        return (
            f"bubblewrap ({bwrap}) is not installed: install it "
            "(`apt-get install bubblewrap`, `dnf install bubblewrap`) and retry."
        )
    usage = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=10).stdout
    if "--pidns" not in usage:
        return (
            f"{exe} is too old: it cannot join a PID namespace (--pidns, bubblewrap >= 0.4). "
            "Install a newer bubblewrap."
        )
    probe = [exe, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    probe += ["--unshare-user", "--unshare-pid", "--unshare-net", "--", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        return "bubblewrap did not finish a trivial sandbox within 10 s."
    if done.returncode != 0:
        return (
            f"bubblewrap cannot create user/PID/network namespaces here ({done.stderr.strip()}). "
            "Enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
            "user.max_user_namespaces>0) or, inside a container, run it with "
            "--security-opt seccomp=unconfined --cap-add SYS_ADMIN (or --privileged)."
        )
    return None


def kill_marked_processes(session_id: str) -> list[int]:
    """SIGKILL every process whose environment carries this sandbox's marker; returns the pids.

    The PID namespace already takes every process down with it; this sweep makes the guarantee
    checkable and catches anything that was mid-exec when the namespace died.
    """
    marker = f"{MARKER_ENV}={session_id}".encode()
    killed = []
    for pid in marked_pids(marker):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed


def marked_pids(marker: bytes) -> list[int]:
    """Pids whose environment contains `marker` (`NAME=value`) as one entry."""
    return [pid for pid, environ in _environs() if marker in environ]


def remove_stale_roots(base: Path, min_age_s: float = STALE_ROOT_AGE_S) -> list[Path]:
    """Remove the per-trial roots under `base` that no live process marks as in use (their run
    was interrupted before stop()); returns the removed paths. Kept roots are left alone."""
    try:
        roots = [p for p in base.iterdir() if p.is_dir() and not p.is_symlink()]
    except FileNotFoundError:
        return []
    prefix = f"{MARKER_ENV}=".encode()
    live = {
        _safe_name(entry.removeprefix(prefix).decode(errors="replace"))
        for _, environ in _environs()
        for entry in environ
        if entry.startswith(prefix)
    }
    removed = []
    for root in roots:
        try:
            if root.name in live or (root / KEPT_FILE).exists():
                continue
            if time.time() - root.stat().st_mtime < min_age_s:
                continue
            _remove_tree(root)
        except OSError:
            continue  # another sandbox's start removed it first, or it is not ours to remove
        removed.append(root)
    return removed


def _environs() -> list[tuple[int, list[bytes]]]:
    """Every readable process's environment entries (others' processes are skipped)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        found.append((int(entry), environ.split(b"\0")))
    return found


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _dockerfile_workdir(environment_dir: Path) -> str | None:
    """The last absolute WORKDIR of the task's Dockerfile: where Docker would run commands."""
    try:
        lines = (environment_dir / "Dockerfile").read_text(errors="replace").splitlines()
    except OSError:
        return None
    workdirs = [
        parts[1]
        for parts in (line.split() for line in lines)
        if len(parts) == 2 and parts[0].upper() == "WORKDIR" and parts[1].startswith("/")
    ]
    return workdirs[-1] if workdirs else None


def _safe_name(session_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in session_id)


def _remove_tree(root: Path) -> None:
    def make_writable(func, path, _exc) -> None:
        # Task commands may leave read-only dirs (chmod -w); the owner can always re-grant.
        parent = os.path.dirname(path)
        os.chmod(parent, os.stat(parent).st_mode | stat.S_IWUSR | stat.S_IXUSR)
        if os.path.isdir(path) and not os.path.islink(path):
            os.chmod(path, os.stat(path).st_mode | stat.S_IRWXU)
        func(path)

    shutil.rmtree(root, onexc=make_writable)
