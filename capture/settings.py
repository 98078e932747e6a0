"""CaptureSettings: everything the capture proxy can be told (the workbench fills it from its own
settings; the proxy never reads the environment)."""

import ipaddress
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

MIB = 1024 * 1024


def is_public_host(host: str) -> bool:
    """True when a bind address is reachable from other machines (anything but loopback)."""
    if host == "localhost":
        return False
    if host == "":
        return True  # an empty host binds every interface
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True  # a host name we cannot judge: assume the worst


class CaptureSettings(BaseModel):
    """Settings of one capture app.

    admin_key: guards the control plane (`/sessions`, `/health` stays open). Sent as
        `Authorization: Bearer <key>` or `x-admin-key: <key>`.
    public: the server is reachable from other machines (non-loopback bind, or a hosted Space).
        A public server without an admin key refuses every control-plane call with 403.
    max_tokens_ceiling: upper bound on `max_tokens` / `max_completion_tokens` sent to the engine
        (also bounded by the engine's `max_model_len`).
    max_body_bytes: largest request body accepted (413 beyond).
    keepalive_s: interval of `: keepalive` SSE comments while a streaming client waits.
    upstream_timeout_s: how long one engine call may take before the client gets a 504.
    probe_timeout_s: how long each engine probe request may take.
    probe_ttl_s: how long an engine's probe (its tier) is reused before it is probed again.
    replay_window: how many recent answers per session are kept to replay SDK retries.
    engine_hosts: the engines sessions may be opened on, as `host` (any port) or `host:port`;
        None = any. A public server sets it so callers cannot make it probe arbitrary URLs
        (e.g. a cloud metadata address).
    """

    admin_key: str | None = None
    public: bool = False
    max_tokens_ceiling: int = Field(default=8192, ge=1)
    max_body_bytes: int = Field(default=64 * MIB, ge=1)
    keepalive_s: float = Field(default=5.0, gt=0)
    upstream_timeout_s: float = Field(default=600.0, gt=0)
    probe_timeout_s: float = Field(default=20.0, gt=0)
    probe_ttl_s: float = Field(default=60.0, ge=0)
    replay_window: int = Field(default=8, ge=0)
    engine_hosts: tuple[str, ...] | None = None

    def engine_refusal(self, url: str) -> str | None:
        """Why an engine URL may not be used here, or None when it may."""
        if self.engine_hosts is None or host_allowed(url, self.engine_hosts):
            return None
        parts = urlsplit(url)
        where = f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname
        allowed = ", ".join(self.engine_hosts) or "none"
        return (
            f"engine host {where!r} is not allowed on this server (allowed: {allowed}): add it "
            "to WORKBENCH_ENGINE_HOSTS (comma-separated host[:port])"
        )


def host_allowed(url: str, hosts: tuple[str, ...]) -> bool:
    """Whether `url`'s host (and port) matches an entry `host` or `host:port` of `hosts`."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # a port that is not a number
        return False
    host = (parts.hostname or "").lower()
    for entry in hosts:
        name, _, wanted = entry.strip().lower().rpartition(":")
        if not name or not wanted.isdigit():  # no port given (or an IPv6 address without one)
            name, wanted = entry.strip().lower(), ""
        if name.strip("[]") == host and (not wanted or int(wanted) == port):
            return True
    return False
