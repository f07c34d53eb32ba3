"""`staleguard.project` gives what `staleguard project` prints, for every input type."""

import json
import threading
from pathlib import Path

import pytest
import staleguard
from conftest import SESSIONS, FIXTURES, cli, session


def test_every_recorded_session_is_here():
    assert len(SESSIONS) >= 12, SESSIONS


@pytest.mark.parametrize("name", SESSIONS)
def test_str_bytes_and_dict_project_as_the_cli_does(name, tmp_path):
    out = cli(tmp_path, "project", str(FIXTURES / name))
    assert out.returncode == 0, out.stderr
    text = session(name)
    projected = staleguard.project(text)
    assert isinstance(projected, str)
    assert projected == out.stdout.decode("utf-8")
    assert projected != text, "a recorded session has old pages to collapse"
    assert "[staleguard receipt]" in projected
    as_bytes = staleguard.project(text.encode("utf-8"))
    assert isinstance(as_bytes, bytes) and as_bytes == out.stdout
    as_dict = staleguard.project(json.loads(text))
    assert isinstance(as_dict, dict) and as_dict == json.loads(out.stdout)


def test_format_is_passed_on_and_checked(tmp_path):
    text = session("order.anthropic.json")
    assert staleguard.project(text, format="anthropic") == staleguard.project(text)
    with pytest.raises(staleguard.NotARequestError, match=r"no `messages`.*`contents`"):
        staleguard.project('{"model": "m"}')
    with pytest.raises(staleguard.UnknownFormatError, match="bard"):
        staleguard.project(text, format="bard")


def test_config_dict_and_path_read_as_the_cli_reads_the_file(tmp_path):
    toml = 'receipt_max_bytes = 96\nevidence_retention = "off"\nbrowser_tools = ["browser_*"]\n[proxy]\nlisten = "127.0.0.1:0"\n'
    (tmp_path / "sg.toml").write_text(toml)
    out = cli(tmp_path, "project", "--config", "sg.toml", str(FIXTURES / "research.openai.json"))
    assert out.returncode == 0, out.stderr
    text = session("research.openai.json")
    config = {"receipt_max_bytes": 96, "evidence_retention": "off", "browser_tools": ["browser_*"], "proxy": {"listen": "127.0.0.1:0"}}
    by_dict = staleguard.project(text, config=config)
    assert by_dict == out.stdout.decode()
    assert by_dict != staleguard.project(text), "the config changes the projection"
    assert staleguard.project(text, config=tmp_path / "sg.toml") == by_dict
    assert staleguard.project(text, config=str(tmp_path / "sg.toml")) == by_dict


@pytest.mark.parametrize(
    "config, says",
    [
        ({"max_repeats": "many"}, 'max_repeats: invalid type: string "many"'),
        ({"receipt_max_bytes": -1}, "receipt_max_bytes: invalid value: integer `-1`"),
        ({"evidence_retention": 5}, "evidence_retention: invalid type: integer"),
        ({"browser_tools": ["browser_*", 7]}, "browser_tools: invalid type: integer `7`"),
        ({"evidence_retention": "maybe"}, "evidence_retention"),
        ({"no_such_key": 1}, "no_such_key"),
        ({"receipt_max_bytes": 1.5}, "receipt_max_bytes"),
    ],
)
def test_a_bad_config_value_is_a_config_value_error(config, says):
    with pytest.raises(staleguard.ConfigValueError, match=says) as err:
        staleguard.project(session("order.openai.json"), config=config)
    assert isinstance(err.value, ValueError)


def test_a_missing_config_file_and_a_bad_environment_are_config_errors(tmp_path, monkeypatch):
    with pytest.raises(staleguard.ConfigValueError, match="nowhere.toml"):
        staleguard.project(session("order.openai.json"), config=tmp_path / "nowhere.toml")
    monkeypatch.setenv("BROWSER_HISTORY_COMPACTION", "perhaps")
    with pytest.raises(staleguard.ConfigValueError, match="BROWSER_HISTORY_COMPACTION"):
        staleguard.project(session("order.openai.json"))


def test_the_call_projects_whatever_the_hosts_switch_says(monkeypatch):
    text = session("order.openai.json")
    monkeypatch.setenv("BROWSER_HISTORY_COMPACTION", "off")
    assert staleguard.project(text) != text


@pytest.mark.parametrize("convert", [str, lambda s: s.encode("utf-8")], ids=["str", "bytes"])
def test_invalid_json_says_where(convert):
    body = '{"model": "m",\n  "messages": [tru]}'
    with pytest.raises(staleguard.InvalidJSONError) as err:
        staleguard.project(convert(body))
    e = err.value
    assert (e.line, e.column, e.offset) == (2, 19, 33), str(e)
    assert body[e.offset] == "]"  # serde_json stops right after `tru`
    assert "line 2" in str(e) and isinstance(e, staleguard.StaleguardError) and isinstance(e, ValueError)


def test_bytes_that_are_not_utf8_say_where():
    with pytest.raises(staleguard.InvalidJSONError) as err:
        staleguard.project(b'{"model":\n "\xff"}')
    assert (err.value.line, err.value.column, err.value.offset) == (2, 3, 12)
    assert "UTF-8" in str(err.value)


def test_a_body_of_another_type_is_a_type_error():
    with pytest.raises(TypeError, match="list"):
        staleguard.project([1, 2])


def test_other_threads_run_while_it_projects():
    # The GIL is released: a thread counting while another projects gets to count.
    text = session("long_page.openai.json")
    counted, done = [0], threading.Event()

    def count():
        while not done.is_set():
            counted[0] += 1

    worker = threading.Thread(target=count)
    worker.start()
    try:
        before = counted[0]
        for _ in range(20):
            staleguard.project(text)
        during = counted[0] - before
    finally:
        done.set()
        worker.join()
    assert during > 0


@pytest.mark.parametrize("name", ["order_zh.openai.json", "order_zh.anthropic.json"])
def test_a_task_with_chinese_before_a_url_projects_as_the_cli_does(name, tmp_path):
    """Issue 41: `打开http://...` (no space before the URL) made the core panic."""
    path = Path(__file__).resolve().parents[3] / "fixtures" / "unicode" / name
    out = cli(tmp_path, "project", str(path))
    assert out.returncode == 0, out.stderr
    text = path.read_text(encoding="utf-8")
    assert "打开http://127.0.0.1:8431/order/form.html" in text
    assert staleguard.project(text) == out.stdout.decode("utf-8")
    assert staleguard.project(text.encode("utf-8")) == out.stdout
    assert staleguard.project(json.loads(text)) == json.loads(out.stdout)
    assert "[staleguard receipt]" in out.stdout.decode("utf-8")
    assert staleguard.inspect(text)["results"]


def test_an_internal_error_is_a_staleguard_error():
    """A panic of the core reaches Python as this exception (never an abort): it is a
    StaleguardError, so a caller's `except staleguard.StaleguardError` holds."""
    assert issubclass(staleguard.InternalError, staleguard.StaleguardError)
    assert issubclass(staleguard.InternalError, ValueError)
    assert "InternalError" in staleguard.__all__
