"""Scripted policy rules: matching, defaults and file loading."""

import json

import pytest

from workbench.engine.config import EngineConfig
from workbench.engine.generation import Engine
from workbench.engine.script import ScriptPolicy, load_script
from workbench.engine.template import normalize_messages

POLICY = ScriptPolicy.model_validate(
    {
        "rules": [
            {"role": "tool", "match": "error", "reply": "fix it"},
            {"role": "user", "match": "(?i)^start", "assistant_turns": 0, "reply": "first"},
            {"match": "anything", "reply": "last-message rule"},
        ],
        "default": "fallback",
    }
)


def conv(*pairs):
    return list(pairs)


def test_rules_match_in_order_on_the_last_message_of_a_role():
    assert POLICY.reply_for(conv(("user", "Start please"))) == "first"
    # the tool rule looks at the last tool message even when a user message follows it
    assert POLICY.reply_for(conv(("user", "x"), ("tool", "an error"), ("user", "go"))) == "fix it"
    assert POLICY.reply_for(conv(("user", "x"), ("tool", "ok"), ("tool", "error"))) == "fix it"
    assert POLICY.reply_for(conv(("tool", "error"), ("tool", "fine"))) == "fallback"


def test_assistant_turns_and_role_less_rules():
    assert (
        POLICY.reply_for(conv(("user", "start"), ("assistant", "first"), ("user", "start")))
        == "fallback"
    )
    assert POLICY.reply_for(conv(("user", "start"), ("assistant", "a"), ("user", "anything"))) == (
        "last-message rule"
    )


def test_no_default_means_sample():
    assert ScriptPolicy(rules=[]).reply_for(conv(("user", "x"))) is None


def test_load_script_validates_with_clear_errors(tmp_path):
    good = tmp_path / "s.json"
    good.write_text(json.dumps({"rules": [{"match": "x", "reply": 'y\n{"a": 1}'}]}))
    assert load_script(good).rules[0].reply == 'y\n{"a": 1}'
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rules": [{"match": "(", "reply": "y"}]}))
    with pytest.raises(ValueError, match="invalid regex"):
        load_script(bad)
    typo = tmp_path / "typo.json"
    typo.write_text(json.dumps({"rules": [{"mach": "x", "reply": "y"}]}))
    with pytest.raises(ValueError, match="invalid script"):
        load_script(typo)
    with pytest.raises(ValueError, match="cannot read script"):
        load_script(tmp_path / "missing.json")


def test_engine_emits_canonical_ids_and_im_end(tmp_path):
    path = tmp_path / "s.json"
    reply = '{"analysis": "ok", "commands": [{"keystrokes": "ls\\n", "duration": 0.1}]}'
    path.write_text(json.dumps({"default": reply}))
    engine = Engine(EngineConfig(script=path))
    ids = engine.scripted_ids(normalize_messages([{"role": "user", "content": "hi"}]))
    assert ids == [*engine.tokenizer.encode(reply), engine.tokenizer.im_end]
    assert engine.policy == "scripted"


def test_anywhere_recognises_the_task_on_later_turns():
    policy = ScriptPolicy.model_validate(
        {"rules": [{"anywhere": "hello\\.txt", "assistant_turns": 1, "reply": "check"}]}
    )
    convo = [("user", "create hello.txt"), ("assistant", "ok"), ("user", "$ ls\n")]
    assert policy.reply_for(convo) == "check"
    assert (
        policy.reply_for([("user", "create bye.txt"), ("assistant", "ok"), ("user", "$")]) is None
    )


def test_the_documented_example_is_a_valid_script():
    import workbench.engine.script as script

    doc = script.__doc__
    example = doc[doc.index("{") : doc.index("\n\nRules are tried")]
    policy = ScriptPolicy.model_validate(json.loads(example))
    assert [r.name for r in policy.rules][:1] == ["start"]
    assert policy.reply_for([("user", "Please create hello.txt")]).startswith('{"analysis"')
