"""`staleguard.inspect` reports what `inspect --json` does; `check_call` is the CLI's guard."""

import json

import pytest
import staleguard
from conftest import FIXTURES, before_call, cli, session


@pytest.mark.parametrize("name", ["order.openai.json", "invalid_form.anthropic.json", "research.openai.json"])
def test_inspect_is_the_cli_report(name, tmp_path):
    out = cli(tmp_path, "inspect", "--json", str(FIXTURES / name))
    assert out.returncode == 0, out.stderr
    text = session(name)
    report = staleguard.inspect(text)
    assert report == json.loads(out.stdout)
    assert report["totals"]["collapsed"] >= 1 and report["results"]
    assert staleguard.inspect(json.loads(text))["results"] == report["results"]
    assert staleguard.inspect(text.encode())["totals"]["bytes_before"] == len(text.encode())


def test_inspect_raises_as_project_does():
    with pytest.raises(staleguard.InvalidJSONError) as err:
        staleguard.inspect("{")
    assert err.value.line == 1
    with pytest.raises(staleguard.InvalidJSONError) as err:
        staleguard.inspect(b'{"a": "\xc3"}')
    assert err.value.offset == 7


def test_check_call_refuses_the_stale_place_order_and_allows_a_live_ref():
    body, call = before_call("order.openai.json", "call_9")
    verdict = staleguard.check_call(body, call)
    assert not verdict.allowed and not verdict
    # e7 now names "Cancel this order": the ref was reused for another element.
    assert verdict.kind == "reused_ref", verdict
    assert "Cancel this order" in verdict.reason and "Place order" in verdict.reason
    assert staleguard.check_call(json.dumps(body), json.dumps(call)).reason == verdict.reason
    live = {"type": "tool_use", "id": "t1", "name": "browser_click", "input": {"element": "New order link", "ref": "e1"}}
    allowed = staleguard.check_call(body, live)
    assert allowed.allowed and allowed.kind == "allow", allowed
    assert "allowed=True" in repr(allowed)


def test_check_call_agrees_with_the_cli(tmp_path):
    body, call = before_call("order.openai.json", "call_9")
    out = cli(tmp_path, "check-call", "--call", json.dumps(call), stdin=json.dumps(body).encode())
    assert out.returncode == 3, out.stderr
    assert out.stdout.decode().strip() == staleguard.check_call(body, call).reason.strip()


def test_a_call_without_a_tool_is_an_error():
    body, _ = before_call("order.openai.json", "call_9")
    with pytest.raises(staleguard.StaleguardError, match="names no tool"):
        staleguard.check_call(body, {"x": 1})
    with pytest.raises(staleguard.StaleguardError, match="not JSON"):
        staleguard.check_call(body, "{nope")


def test_a_call_reads_the_same_in_every_format():
    body, call = before_call("order.openai.json", "call_9")
    name, arguments = call["function"]["name"], call["function"]["arguments"]
    as_tool_use = {"type": "tool_use", "id": "t9", "name": name, "input": json.loads(arguments)}
    as_function_call = {"type": "function_call", "call_id": "c9", "name": name, "arguments": arguments}
    verdicts = [staleguard.check_call(body, c) for c in (call, as_tool_use, as_function_call)]
    assert {(v.allowed, v.kind, v.reason) for v in verdicts} == {(False, "reused_ref", verdicts[0].reason)}
