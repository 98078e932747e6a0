"""The harness catalogue, read from Harbor's own agent classes (HARBOR.md §2.3), not a table.

For every agent registered in `AgentFactory` (and any `module:Class` asked for by name):
- dialects: its `MODEL_CONNECTION.supported_api_formats`, mapped to our dialect names;
- host_side: the control loop runs in the Harbor process (not a `BaseInstalledAgent`);
- redirectable: Harbor lets us point it at the proxy (`capabilities.base_url` and an API format
  we speak) — the same test Harbor's own inference relay applies;
- writes_atif: `capabilities.atif` (it leaves an ATIF `trajectory.json`).
"""

import functools

from harbor.agents.base import BaseAgent
from harbor.agents.factory import AgentFactory
from harbor.agents.installed.base import BaseInstalledAgent
from harbor.models.agent.name import AgentName
from harbor.models.model_api_format import ModelApiFormat
from harbor.utils.import_path import import_class
from pydantic import BaseModel

from capture.types import Dialect

DIALECT_OF_FORMAT: dict[ModelApiFormat, Dialect] = {
    ModelApiFormat.OPENAI_CHAT_COMPLETIONS: "chat",
    ModelApiFormat.OPENAI_RESPONSES: "responses",
    ModelApiFormat.ANTHROPIC_MESSAGES: "anthropic",
    ModelApiFormat.GOOGLE_GENERATE_CONTENT: "google",
}


class HarnessInfo(BaseModel):
    name: str  # the AgentName value, or `module:Class`
    import_path: str
    dialects: list[Dialect]  # in Harbor's declared order; the first is the natural default
    host_side: bool
    redirectable: bool
    writes_atif: bool
    reason: str  # why it can or cannot be pointed at the proxy, in words


def describe(name: str, import_path: str, cls: type[BaseAgent]) -> HarnessInfo:
    """Introspect one agent class."""
    spec = cls.MODEL_CONNECTION
    formats = list(spec.supported_api_formats) if spec is not None else []
    dialects = [DIALECT_OF_FORMAT[f] for f in formats if f in DIALECT_OF_FORMAT]
    unspoken = [str(f) for f in formats if f not in DIALECT_OF_FORMAT]
    capabilities = cls.capabilities
    host_side = not issubclass(cls, BaseInstalledAgent)
    if spec is None:
        reason = "Harbor gives it no inference connection (MODEL_CONNECTION is None)"
    elif not capabilities.base_url:
        reason = "Harbor does not let its base URL be overridden (capabilities.base_url is off)"
    elif not dialects:
        reason = f"it speaks no dialect the proxy serves ({', '.join(unspoken) or 'none'})"
    else:
        where = "from the Harbor process" if host_side else "from inside the sandbox"
        reason = f"base_url override, calls the proxy {where} ({', '.join(dialects)})"
    return HarnessInfo(
        name=name,
        import_path=import_path,
        dialects=dialects,
        host_side=host_side,
        redirectable=spec is not None and bool(capabilities.base_url) and bool(dialects),
        writes_atif=bool(capabilities.atif),
        reason=reason,
    )


def harness_catalogue() -> tuple[HarnessInfo, ...]:
    """Every agent registered in Harbor's AgentFactory, sorted by name.

    The first call imports ~50 agent modules (a few seconds); results are cached per agent.
    """
    return tuple(_registered(name) for name in sorted(a.value for a in AgentFactory._AGENT_MAP))


@functools.cache
def _registered(name: str) -> HarnessInfo:
    """One registered agent; one whose module fails to import is listed with the error."""
    agent = AgentName(name)
    import_path = AgentFactory._AGENT_MAP[agent]
    try:
        cls = AgentFactory.get_agent_class(agent)
    except Exception as exc:
        return HarnessInfo(
            name=name,
            import_path=import_path,
            dialects=[],
            host_side=False,
            redirectable=False,
            writes_atif=False,
            reason=f"its class does not import: {type(exc).__name__}: {exc}",
        )
    return describe(name, import_path, cls)


def get_harness(name: str) -> HarnessInfo:
    """A harness by Harbor agent name or `module:Class`; KeyError / ImportError say why not."""
    if ":" in name:
        try:
            cls = import_class(name, base=BaseAgent, label="harness")
        except (ValueError, TypeError) as exc:
            raise ImportError(f"Cannot use harness {name!r}: {exc}") from exc
        return describe(name, name, cls)
    registered = {a.value for a in AgentFactory._AGENT_MAP}
    if name not in registered:
        known = ", ".join(sorted(registered))
        raise KeyError(f"No harness {name!r}. Harbor's agents: {known}; or give module:Class.")
    return _registered(name)
