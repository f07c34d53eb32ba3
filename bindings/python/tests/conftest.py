"""Shared helpers: the recorded sessions and the `staleguard` command they are compared with."""

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO.parent / "shared" / "fixtures" / "pwmcp-0.0.41"
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


def cli(tmp_path: Path, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """Runs the CLI in an empty directory (no ./staleguard.toml) with no STALEGUARD_* variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STALEGUARD_", "BROWSER_HISTORY"))}
    return subprocess.run([str(cli_binary()), *args], cwd=tmp_path, env=env, input=stdin, capture_output=True)


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
