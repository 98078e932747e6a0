"""Trainer exports: TRL TraceEntry records per agent turn, sequence records, JSONL."""

import json

import pytest
from typer.testing import CliRunner

from capture.document import DocumentError, DocumentMeta, build_document
from capture.exporters import sequence_records, trace_entries, write_jsonl
from capture.graph import RolloutGraph
from capture.turns import Turn
from workbench.cli import app

SYSTEM = list(range(1000, 1040))
CALL = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


def rollout() -> RolloutGraph:
    g = RolloutGraph()
    msgs = [{"role": "user", "content": "task"}]
    g.add(
        Turn(
            SYSTEM,
            [1, 2],
            [-0.1, -0.2],
            has_tools=True,
            tools=TOOLS,
            messages=msgs,
            tool_calls=[CALL],
        )
    )
    g.add(Turn([*SYSTEM, 1, 2, 3], [4], [-0.3], has_tools=True))  # retried below: discarded
    g.add(Turn([*SYSTEM, 1, 2, 3], [5], [-0.4], has_tools=True, content="done", reasoning="r"))
    g.add(Turn([7] * 8, [8], [-0.5], has_tools=True))  # subagent root: agent too
    g.add(Turn([9] * 8, [10], [-0.6]))  # title call: aux
    return g


@pytest.fixture(params=[False, True], ids=["full", "compact"])
def doc(request):
    meta = DocumentMeta(ids={"rollout": "r1"}, reward=1.0)
    return build_document(rollout(), [], meta, compact=request.param)


def test_trace_entries_cover_every_agent_root_and_skip_aux_and_discarded(doc):
    entries = trace_entries(doc)
    assert [e["turn"] for e in entries] == [0, 2, 3]
    assert {e["root"] for e in entries} == {0, 3}


def test_trace_entry_has_trl_shape_with_nested_tool_calls(doc):
    first, second, _ = trace_entries(doc)
    assert first["request"]["messages"] == [{"role": "user", "content": "task"}]
    # TRL re-renders the prompt from messages + tools: the manifest the call sent upstream.
    assert (first["request"]["tools"], second["request"]["tools"]) == (TOOLS, None)
    choice = first["response"]["choices"][0]
    assert choice["message"]["tool_calls"] == [CALL]
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "bash"
    assert first["completion_token_ids"] == [1, 2]
    assert first["per_token_logps"] == [pytest.approx(-0.1), pytest.approx(-0.2)]
    assert first["prompt_token_ids"] == SYSTEM
    assert second["prompt_token_ids"] == [*SYSTEM, 1, 2, 3]
    assert second["response"]["choices"][0]["message"]["reasoning_content"] == "r"
    assert first["reward"] == 1.0 and first["rollout_id"] == "r1"


def test_sequence_records_carry_ids_mask_and_logprobs(doc):
    records = {tuple(r["node_ids"]): r for r in sequence_records(doc)}
    assert set(records) == {(0, 2), (3,), (4,)}
    main = records[(0, 2)]
    assert main["token_ids"] == [*SYSTEM, 1, 2, 3, 5]
    assert main["loss_mask"] == [0] * 40 + [1, 1, 0, 1]
    assert main["logprobs"][:40] == [None] * 40 and main["logprobs"][42] is None
    assert main["logprobs"][43] == pytest.approx(-0.4)
    assert sum(records[(4,)]["loss_mask"]) == 0  # aux root: never loss


def test_write_jsonl_writes_one_strict_json_object_per_line(doc, tmp_path):
    path = tmp_path / "out.jsonl"
    assert write_jsonl(trace_entries(doc), path) == 3
    lines = path.read_text().splitlines()
    assert [json.loads(line)["turn"] for line in lines] == [0, 2, 3]


def test_write_jsonl_refuses_nan(tmp_path):
    with pytest.raises(ValueError):
        write_jsonl([{"x": float("nan")}], tmp_path / "bad.jsonl")


def test_not_a_rollout_document_is_refused_clearly():
    with pytest.raises(DocumentError, match="not a 'harbor-workbench/rollout/1' rollout document"):
        trace_entries({"schema": "other/1"})


def test_cli_export_writes_trainer_jsonl_from_documents(tmp_path):
    docs = []
    for k, compact in enumerate((False, True)):
        meta = DocumentMeta(ids={"rollout": f"r{k}"})
        path = tmp_path / f"r{k}.json"
        path.write_text(json.dumps(build_document(rollout(), [], meta, compact=compact)))
        docs.append(str(path))
    out = tmp_path / "train.jsonl"
    result = CliRunner().invoke(app, ["export", *docs, "--out", str(out), "--shape", "sequences"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["rollout_id"] for r in records] == ["r0"] * 3 + ["r1"] * 3
    assert "wrote 6 sequences records" in result.output


def test_cli_export_names_the_bad_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    result = CliRunner().invoke(app, ["export", str(bad), "--out", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 1
    assert "bad.json" in result.output
