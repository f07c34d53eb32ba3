"""The `staleguard` console script of the wheel is the CLI: same output, same exit codes and
messages, same reading of standard input, and Ctrl-C stops its long-running commands."""

import json
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
import staleguard
from conftest import FIXTURES, before_call, clean_env, cli, cli_binary, console_script, run, session


def test_the_console_script_is_the_packages():
    script = console_script()
    assert script.resolve() != cli_binary().resolve()
    # pip writes a Python launcher into the venv; the cargo-built binary is an ELF file.
    assert script.read_bytes().startswith(b"#!"), "a console script, not a copy of the binary"


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_demo_shows_receipts_as_the_binary_does(fmt, tmp_path):
    out = run(console_script(), tmp_path, "demo", "--format", fmt)
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    assert text.startswith(f"staleguard demo: fixtures/demo/long_page.{fmt}.json")
    assert "[staleguard receipt]" in text, "the collapsed observation is shown as its receipt"
    assert f"$ staleguard inspect long_page.{fmt}.json" in text
    assert out.stdout == cli(tmp_path, "demo", "--format", fmt).stdout


@pytest.mark.parametrize(
    "args, code, says",
    [
        (["project", "missing.json"], 2, "staleguard: error: cannot read missing.json"),
        (["demo", "--format", "gemini"], 2, "staleguard: error: demo has openai and anthropic sessions"),
        (["project", "--bogus"], 2, "unexpected argument '--bogus'"),
        (["mcp"], 2, "required arguments were not provided"),
        (["--version"], 0, ""),
    ],
)
def test_exit_codes_and_messages_are_the_binarys(args, code, says, tmp_path):
    out = run(console_script(), tmp_path, *args)
    assert out.returncode == code, out.stderr
    assert says in out.stderr.decode()
    assert b"Traceback" not in out.stderr
    binary = cli(tmp_path, *args)
    assert (out.returncode, out.stdout, out.stderr) == (binary.returncode, binary.stdout, binary.stderr)


def test_version_and_help_go_to_standard_output(tmp_path):
    assert run(console_script(), tmp_path, "--version").stdout.decode() == f"staleguard {staleguard_version()}\n"
    help_text = run(console_script(), tmp_path, "--help").stdout.decode()
    assert "Only the newest browser observation is real." in help_text and "mcp" in help_text


def staleguard_version():
    from importlib.metadata import version

    return version("staleguard")


def test_a_refused_call_exits_3_with_the_refusal(tmp_path):
    body, call = before_call("order.openai.json", "call_9")
    out = run(console_script(), tmp_path, "check-call", "--call", json.dumps(call), stdin=json.dumps(body).encode())
    assert out.returncode == 3, out.stderr
    assert out.stdout.decode().strip() == staleguard.check_call(body, call).reason.strip()


def test_project_reads_standard_input_and_writes_the_projection(tmp_path):
    text = session("order.anthropic.json")
    out = run(console_script(), tmp_path, "project", "-", stdin=text.encode())
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode() == staleguard.project(text)
    assert out.stdout.decode() != text


def test_a_config_value_of_the_wrong_type_names_file_and_key(tmp_path):
    (tmp_path / "staleguard.toml").write_text('max_repeats = 3\nreceipt_max_bytes = "big"\n')
    out = run(console_script(), tmp_path, "project", str(FIXTURES / "order.openai.json"))
    assert out.returncode == 2
    assert out.stderr.decode() == 'staleguard: error: staleguard.toml: receipt_max_bytes: invalid type: string "big", expected usize\n'


def started(args, tmp_path, **kwargs):
    return subprocess.Popen(args, cwd=tmp_path, env=clean_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def stopped_by_ctrl_c(process, ready, timeout=20):
    """Waits until `ready()` holds, sends SIGINT as Ctrl-C does, and returns the exit code and
    standard error; a process that outlives `timeout` fails the test."""
    deadline = time.monotonic() + timeout
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"not ready: exit {process.returncode}, {process.communicate()[1].decode()}")
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("Ctrl-C did not stop it")
    return process.returncode, stderr.decode()


def answers_ok(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status == 200
    except OSError:
        return False


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a process is POSIX")
def test_ctrl_c_stops_the_proxy_as_it_stops_the_binary(tmp_path):
    answers = []
    for program in (console_script(), cli_binary()):
        proxy = started([str(program), "proxy", "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:9"], tmp_path)
        first = proxy.stderr.readline().decode()
        # Its Ctrl-C handler is in place once it serves (the startup line comes just before).
        metrics = "http://" + first.split("http://")[1].split(" ")[0] + "/metrics"
        code, stderr = stopped_by_ctrl_c(proxy, lambda: answers_ok(metrics))
        answers.append((code, first.startswith("staleguard proxy on http://127.0.0.1:")))
        assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    # The proxy shuts down gracefully on SIGINT and exits 0, from the wheel as from the binary.
    assert answers == [(0, True), (0, True)], answers


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a process is POSIX")
def test_ctrl_c_stops_mcp_as_it_stops_the_binary(tmp_path):
    codes = []
    for i, program in enumerate((console_script(), cli_binary())):
        marker = tmp_path / f"server-{i}-started"
        # A server that ignores SIGINT, so only the guard's own handling can end the guard.
        server = [sys.executable, "-c", "import pathlib, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); pathlib.Path(sys.argv[1]).touch(); sys.stdin.read()", str(marker)]
        guard = started([str(program), "mcp", "--", *server], tmp_path)
        code, stderr = stopped_by_ctrl_c(guard, marker.exists)
        assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
        codes.append(code)
    assert codes == [-signal.SIGINT, -signal.SIGINT], codes
