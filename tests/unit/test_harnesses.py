"""The harness catalogue, introspected from Harbor's agent classes."""

import pytest
from harbor.agents.factory import AgentFactory

from workbench.harnesses import get_harness, harness_catalogue

# Building the catalogue imports all of Harbor's ~50 agent modules once (several seconds).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def catalogue():
    return {h.name: h for h in harness_catalogue()}


def test_every_registered_agent_is_listed(catalogue):
    assert set(catalogue) == {a.value for a in AgentFactory._AGENT_MAP}


def test_terminus_2_speaks_three_dialects_host_side(catalogue):
    terminus = catalogue["terminus-2"]
    assert terminus.dialects == ["chat", "responses", "anthropic"]
    assert terminus.host_side and terminus.redirectable and terminus.writes_atif
    assert terminus.import_path == "harbor.agents.terminus_2:Terminus2"


def test_claude_code_speaks_anthropic_inside_the_sandbox(catalogue):
    claude = catalogue["claude-code"]
    assert claude.dialects == ["anthropic"]
    assert claude.redirectable and not claude.host_side
    assert "inside the sandbox" in claude.reason


def test_dialects_cover_google_and_responses(catalogue):
    assert catalogue["gemini-cli"].dialects == ["google"]
    assert catalogue["codex"].dialects == ["responses"]


@pytest.mark.parametrize("name", ["oracle", "nop", "cline-cli", "junie", "devin"])
def test_agents_without_a_connection_seam_are_not_redirectable(catalogue, name):
    info = catalogue[name]
    assert not info.redirectable
    assert "MODEL_CONNECTION" in info.reason or "base URL" in info.reason


def test_redirectable_count_matches_harbor_seams(catalogue):
    # HARBOR.md §2: 11 of the 47 registered agents refuse the base_url seam.
    refused = {n for n, h in catalogue.items() if not h.redirectable}
    assert refused == {
        "oracle", "nop", "acp", "cline-cli", "cortex-code", "cursor-cli",
        "rovodev-cli", "junie", "devin", "eve", "fabric",
    }  # fmt: skip


def test_get_harness_by_name_and_module_class():
    assert get_harness("terminus-2").dialects == ["chat", "responses", "anthropic"]
    nop = get_harness("harbor.agents.nop:NopAgent")
    assert nop.name == nop.import_path == "harbor.agents.nop:NopAgent"
    assert not nop.redirectable and nop.host_side


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("no-such-agent", KeyError),
        ("no_such_module:Agent", ImportError),
        ("workbench.datasets:Dataset", ImportError),  # not a BaseAgent
    ],
)
def test_get_harness_rejects_unknown(name, error):
    with pytest.raises(error):
        get_harness(name)
