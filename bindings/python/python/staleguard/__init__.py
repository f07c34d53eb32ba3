"""staleguard: before every model call, only the newest browser observation is real.

Browser agents get page snapshots as tool results; every old snapshot stays in the
conversation and its refs look live. ``project`` rewrites a model request so that every
browser observation but the newest collapses to a small receipt, without touching the
stored history, IDs or call/result pairing. ``wrap`` does it for every call an OpenAI or
Anthropic client makes. The work is done by the same Rust core as the ``staleguard``
command and proxy, so all of them give the same answer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from . import _native
from ._native import (
    ConfigValueError,
    InternalError,
    InvalidJSONError,
    NotARequestError,
    StaleguardError,
    UnknownFormatError,
    Verdict,
)
from ._wrap import wrap

__all__ = [
    "project",
    "inspect",
    "check_call",
    "wrap",
    "Verdict",
    "StaleguardError",
    "InvalidJSONError",
    "NotARequestError",
    "UnknownFormatError",
    "ConfigValueError",
    "InternalError",
]

Config = Union[Mapping[str, Any], str, "os.PathLike[str]", None]


def project(body: Any, *, format: str = "auto", config: Config = None) -> Any:
    """Return the projection of a model request, of the type it was given.

    ``body`` is a request of the OpenAI Chat, OpenAI Responses or Anthropic Messages API:
    a ``dict`` (a ``dict`` comes back), JSON ``str`` (``str``) or UTF-8 JSON ``bytes``
    (``bytes``). ``format`` is ``auto``, ``openai``, ``anthropic``, ``responses`` or ``gemini``.
    ``config`` holds the keys of ``staleguard.toml``, as a dict or the path of such a file;
    the environment (``STALEGUARD_*``) applies on top, as for every host. The call itself
    opts in: it projects whatever ``browser_history_compaction`` says. The GIL is released
    while the Rust core works.

    Raises ``InvalidJSONError`` (with ``line``, ``column``, ``offset``),
    ``NotARequestError``, ``UnknownFormatError`` or ``ConfigValueError``, all
    ``StaleguardError`` and so ``ValueError``; ``InternalError`` (a ``StaleguardError`` too)
    is a bug in staleguard, never the body's fault.
    """
    config_toml = _config_text(config)
    if isinstance(body, str):
        return _native.project_str(body, format, config_toml)
    if isinstance(body, (bytes, bytearray, memoryview)):
        return _native.project_bytes(bytes(body), format, config_toml)
    if isinstance(body, Mapping):
        text = _native.project_str(_dumps(body), format, config_toml)
        return json.loads(text)
    raise TypeError(f"body must be a dict, str or bytes, not {type(body).__name__}")


def inspect(body: Any, *, format: str = "auto", config: Config = None) -> dict:
    """Return what ``staleguard inspect --json`` prints about ``body``: every browser
    result and what projection does with it (``results``), the guard's verdict on every
    browser call (``calls``), whether the session stalled, the evidence kept, and totals in
    bytes and o200k tokens. ``body`` and the errors are as for ``project``."""
    return json.loads(_native.inspect_json(_text(body), format, _config_text(config)))


def check_call(body: Any, call: Any, *, config: Config = None) -> Verdict:
    """Ask the guard about ``call`` proposed after the request ``body``.

    ``call`` is the call as the request's format writes it (a dict or JSON text): an OpenAI
    ``tool_calls`` entry, an Anthropic ``tool_use`` block or a Responses ``function_call``
    item. The ``Verdict`` has ``allowed``, ``kind`` (``allow`` or why it is refused, such as
    ``stale_ref``) and ``reason`` (the refusal text for the model, or a note)."""
    call_text = call if isinstance(call, str) else _dumps(call)
    return _native.check_call(_text(body), call_text, _config_text(config))


def _text(body: Any) -> str:
    """The request as JSON text, for the calls whose answer is not a request."""
    if isinstance(body, str):
        return body
    if isinstance(body, (bytes, bytearray, memoryview)):
        try:
            return bytes(body).decode("utf-8")
        except UnicodeDecodeError:
            # The native side reports where the bad byte is, as for bad JSON.
            _native.project_bytes(bytes(body), "auto", None)
            raise
    if isinstance(body, Mapping):
        return _dumps(body)
    raise TypeError(f"body must be a dict, str or bytes, not {type(body).__name__}")


def _dumps(value: Any) -> str:
    """JSON text of a request; SDK objects (pydantic models) are dumped as the SDK sends them."""
    return json.dumps(value, ensure_ascii=False, default=_sdk_object)


def _sdk_object(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(exclude_unset=True)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _config_text(config: Config) -> Optional[str]:
    """The text of a ``staleguard.toml`` for ``config`` (a dict of its keys or a path)."""
    if config is None:
        return None
    if isinstance(config, Mapping):
        return _toml(config)
    if isinstance(config, (str, os.PathLike)):
        try:
            return Path(config).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigValueError(f"cannot read config file {os.fspath(config)!r}: {e}") from e
    raise TypeError(f"config must be a dict or a path, not {type(config).__name__}")


def _toml(config: Mapping[str, Any], table: str = "") -> str:
    """TOML text for a dict of config keys: the core reads and checks it as it reads a file."""
    lines, tables = [], []
    for key, value in config.items():
        if not isinstance(key, str):
            raise ConfigValueError(f"config key {key!r} is not a string")
        if isinstance(value, Mapping):
            tables.append(_toml(value, f"{table}{json.dumps(key)}."))
        else:
            lines.append(f"{json.dumps(key)} = {_toml_value(key, value)}")
    head = f"[{table[:-1]}]\n" if table and lines else ""
    return head + "".join(f"{line}\n" for line in lines) + "".join(tables)


def _toml_value(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        # JSON's string escapes are TOML's basic-string escapes.
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(key, v) for v in value) + "]"
    raise ConfigValueError(f"config key {key!r}: {type(value).__name__} is not a config value")
