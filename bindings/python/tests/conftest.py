"""Shared helpers: the recorded sessions and the `staleguard` command they are compared with."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "fixtures" / "pwmcp-0.0.41"
SESSIONS = sorted(p.name for p in FIXTURES.glob("*.json") if p.name.endswith((".openai.json", ".anthropic.json")))


def cli_binary() -> Path:
    """The CLI built from this checkout (STALEGUARD_BIN, else the newer of target/debug and target/release)."""
    if os.environ.get("STALEGUARD_BIN"):
        return Path(os.environ["STALEGUARD_BIN"])
    built = [p for p in (REPO / "target/debug/staleguard", REPO / "target/release/staleguard") if p.is_file()]
    if built:
        # The newer one was built from the same sources as the package.
        return max(built, key=lambda p: p.stat().st_mtime)
    pytest.fail("no staleguard binary: run `cargo build -p staleguard-cli` first (or set STALEGUARD_BIN)")


def console_script() -> Path:
    """The `staleguard` console script the package installed next to this Python (a venv's
    bin/), not the cargo-built binary."""
    script = Path(sys.executable).parent / ("staleguard.exe" if os.name == "nt" else "staleguard")
    if not script.is_file():
        pytest.fail(f"no staleguard console script next to {sys.executable}: pip install ./bindings/python into this environment")
    return script


def clean_env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith(("STALEGUARD_", "BROWSER_HISTORY"))}


def run(program: Path, tmp_path: Path, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """Runs `program` in an empty directory (no ./staleguard.toml) with no STALEGUARD_* variables."""
    return subprocess.run([str(program), *args], cwd=tmp_path, env=clean_env(), input=stdin, capture_output=True, timeout=120)


def cli(tmp_path: Path, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """Runs the cargo-built CLI as `run` does."""
    return run(cli_binary(), tmp_path, *args, stdin=stdin)


def session(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    """The environment layer of the config applies to the package too: start every test without it."""
    for k in list(os.environ):
        if k.startswith(("STALEGUARD_", "BROWSER_HISTORY")):
            monkeypatch.delenv(k)


def before_call(name: str, call_id: str):
    """The request just before the assistant turn that proposed `call_id`, and that call."""
    body = json.loads(session(name))
    at = next(i for i, m in enumerate(body["messages"]) if any(c["id"] == call_id for c in m.get("tool_calls") or []))
    call = next(c for c in body["messages"][at]["tool_calls"] if c["id"] == call_id)
    body["messages"] = body["messages"][:at]
    return body, call
