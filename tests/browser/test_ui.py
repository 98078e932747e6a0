"""The page in a real browser (Debian's Chromium via Playwright) against the real app: run the demo
rollout and watch it live, inspect the graph and tokens, download the document; refusals."""

import json
import socket
import time
from pathlib import Path

import pytest
from playwright import sync_api as playwright  # pinned in requirements-dev.txt: never skipped

from capture.document import validate_document
from tests.live_app import LiveApp
from workbench.datasets import resolve_dataset

expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
RUN_DEADLINE_S = 180


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    with LiveApp(tmp_path_factory.mktemp("wb-home")) as app:
        yield app


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(
            "Debian's Chromium is not installed at /usr/bin/chromium (apt install chromium)"
        )
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, live):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    page.goto(live.url + "/")
    page.wait_for_selector("#wb-run", timeout=60_000)
    yield page
    context.close()


def choose(page, dropdown: str, label: str) -> None:
    """Pick an option of a Gradio dropdown the way a user does."""
    page.click(f"{dropdown} input")
    page.locator("ul[role=listbox] li", has_text=label).first.click()


def pick_engine(page, label: str) -> None:
    page.locator("#wb-engine-mode label", has_text=label).click()


def wait_for_result(page, on_tick=None) -> str:
    deadline = time.monotonic() + RUN_DEADLINE_S
    status = page.locator("#wb-result [data-testid=result-status]")
    while time.monotonic() < deadline:
        if on_tick is not None:
            on_tick()
        if status.count():
            return status.inner_text()
        page.wait_for_timeout(150)
    pytest.fail(f"no result on the page within {RUN_DEADLINE_S} s")


def test_demo_rollout_runs_live_and_every_token_can_be_inspected(page, live):
    task = resolve_dataset("demo").tasks[0].name
    pick_engine(page, "embedded reference engine")
    page.click("#wb-probe")
    expect(page.locator("[data-testid=probe-tier]")).to_have_text("tier tokens")
    choose(page, "#wb-dataset", "demo")
    choose(page, "#wb-task", task)
    page.select_option("#wb-harness select", "terminus-2")
    page.select_option("#wb-sandbox select", "local")
    expect(page.locator("#wb-cancel")).to_be_disabled()
    page.click("#wb-run")
    expect(page.locator("#wb-run")).to_be_disabled()

    phases: list[str] = []
    turns: list[int] = []

    def observe() -> None:
        panel = page.locator("#wb-live .wb-live")
        if panel.count():
            phases.append(panel.get_attribute("data-phase") or "")
        counter = page.locator("#wb-live [data-testid=live-turns]")
        if counter.count():
            turns.append(int(counter.inner_text()))

    assert wait_for_result(page, observe) == "ok"
    expect(page.locator("#wb-run")).to_be_enabled()
    expect(page.locator("#wb-cancel")).to_be_disabled()
    assert page.inner_text("[data-testid=result-reward]") == "1"
    seen = [p for p in dict.fromkeys(phases) if p != "idle"]
    assert len(seen) >= 2, f"the live panel never changed phase: {seen}"
    assert turns and max(turns) > min(turns), f"the turn count never rose: {turns}"

    with page.expect_download() as download:
        page.click("#wb-download")
    doc = json.loads(Path(download.value.path()).read_text())
    validate_document(doc)
    assert doc["ok"] is True and doc["reward"] == 1.0
    assert doc["turns"]
    points = page.locator("#wb-graph .scatterlayer .trace path.point")
    expect(points).to_have_count(len(doc["turns"]))

    first_agent = next(t for t in doc["turns"] if t["role"] == "agent" and not t["discarded"])
    sampled = page.locator("#wb-tokens .wb-tk-s")
    expect(sampled).to_have_count(len(first_agent["completion_token_ids"]))
    assert "logprob" in (sampled.first.get_attribute("title") or "")
    assert page.locator("#wb-tokens .wb-tk-id").count() == 0, "token text missing (detokenize)"

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "ui-demo-rollout.png"), full_page=True)

    # A fresh page reopens the stored rollout from the history table.
    page.reload()
    page.wait_for_selector("#wb-run", timeout=60_000)
    expect(points).to_have_count(0)
    page.locator("#wb-history [data-testid=cell-0-2]").click()
    expect(page.locator("#wb-result [data-testid=result-status]")).to_have_text("ok")
    expect(points).to_have_count(len(doc["turns"]))


def test_an_unusable_sandbox_is_shown_with_its_reason_but_cannot_be_chosen(page):
    disabled = page.locator("#wb-sandbox option[disabled]")
    assert disabled.count() >= 1, "expected at least one sandbox that is not usable here"
    name = disabled.first.get_attribute("value")
    assert " — " in disabled.first.inner_text()  # the reason is part of the label
    with pytest.raises(playwright.Error):
        page.select_option("#wb-sandbox select", name, timeout=2000)
    assert page.input_value("#wb-sandbox select") != name


def test_harnesses_that_cannot_be_redirected_are_not_offered(page):
    offered = page.locator("#wb-harness option").evaluate_all("els => els.map(e => e.value)")
    assert "terminus-2" in offered
    assert "oracle" not in offered and "nop" not in offered


def test_an_unreachable_engine_fails_with_its_error_kind(page):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    pick_engine(page, "engine URL")
    page.locator("#wb-engine-url input, #wb-engine-url textarea").first.fill(
        f"http://127.0.0.1:{closed}"
    )
    page.click("#wb-probe")
    expect(page.locator("[data-testid=probe-tier]")).to_have_text("tier text")
    expect(page.locator("#wb-probe-out")).to_contain_text("unreachable")
    page.click("#wb-run")
    assert wait_for_result(page) == "engine_unreachable"
    assert page.locator("[data-testid=result-error]").inner_text()
