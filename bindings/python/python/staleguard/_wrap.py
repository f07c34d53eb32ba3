"""``staleguard.wrap``: an OpenAI or Anthropic client whose model calls are projected first.

The wrapper is a thin proxy: it looks up every attribute on the real client and only the
calls that send a conversation (``chat.completions.create``, ``responses.create``,
``messages.create``, ``messages.stream``, also under ``with_raw_response`` and
``with_streaming_response``) get their ``messages`` or ``input`` projected before the SDK
sees them. Whatever the SDK returns (a response, a stream, a coroutine of the async
clients, a stream manager) is handed back untouched, so sync and async clients, streaming
and raw responses all keep working.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, TypeVar, Union

from . import _native

T = TypeVar("T")

# A route: a method to project ((format, the argument holding the conversation)), the
# routes of a sub-resource (a dict), or CLIENT for methods that return a new client.
CLIENT = "client"
Route = Union[Tuple[str, str], Dict[str, Any], str]


def _resource(*methods: str, fmt: str, key: str) -> Dict[str, Route]:
    calls: Dict[str, Route] = {m: (fmt, key) for m in methods}
    # `client.chat.completions.with_raw_response.create(...)` sends the same body.
    return {**calls, "with_raw_response": dict(calls), "with_streaming_response": dict(calls)}


_ROUTES: Dict[str, Route] = {
    "chat": {"completions": _resource("create", "parse", "stream", fmt="openai", key="messages")},
    "responses": _resource("create", "parse", "stream", fmt="responses", key="input"),
    "messages": _resource("create", "stream", "count_tokens", fmt="anthropic", key="messages"),
    "with_options": CLIENT,
    "copy": CLIENT,
}

# Request fields the projection may read or write besides the conversation itself.
_CONTEXT_FIELDS = ("model", "system", "tools", "instructions")
_OFF = ("off", "false", "0", "no")


def wrap(client: T, *, config: Any = None) -> T:
    """Return ``client`` with every model call projected before it is sent.

    Works for ``openai.OpenAI``, ``openai.AsyncOpenAI``, ``anthropic.Anthropic`` and
    ``anthropic.AsyncAnthropic`` (and their ``with_options`` copies). ``config`` is as for
    ``staleguard.project``. With ``BROWSER_HISTORY_COMPACTION=off`` in the environment (when
    wrapping or at call time) requests go out as they are, for A/B runs.
    """
    from . import _config_text

    if _compaction_off():
        return client
    return _Proxy(client, _ROUTES, _config_text(config))  # type: ignore[return-value]


def _compaction_off() -> bool:
    return os.environ.get("BROWSER_HISTORY_COMPACTION", "").strip().lower() in _OFF


class _Proxy:
    """Looks everything up on the target; the routed names come back projecting."""

    __slots__ = ("_sg_target", "_sg_routes", "_sg_config")

    def __init__(self, target: Any, routes: Dict[str, Route], config: Optional[str]) -> None:
        object.__setattr__(self, "_sg_target", target)
        object.__setattr__(self, "_sg_routes", routes)
        object.__setattr__(self, "_sg_config", config)

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        # isinstance(wrapped, openai.OpenAI) stays true.
        return type(self._sg_target)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._sg_target, name)
        route = self._sg_routes.get(name)
        if route is None:
            return value
        if route == CLIENT:
            return _rewrapping(value, self._sg_config)
        if isinstance(route, dict):
            return _Proxy(value, route, self._sg_config)
        fmt, key = route
        return _projecting(value, fmt, key, self._sg_config)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._sg_target, name, value)

    def __dir__(self) -> Any:
        return dir(self._sg_target)

    def __repr__(self) -> str:
        return f"staleguard.wrap({self._sg_target!r})"

    # Clients are context managers (sync and async); the proxy must stay one.
    def __enter__(self) -> Any:
        self._sg_target.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._sg_target.__exit__(*exc)

    async def __aenter__(self) -> Any:
        await self._sg_target.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._sg_target.__aexit__(*exc)


def _rewrapping(method: Callable[..., Any], config: Optional[str]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        return _Proxy(method(*args, **kwargs), _ROUTES, config)

    return call


def _projecting(method: Callable[..., Any], fmt: str, key: str, config: Optional[str]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        if not _compaction_off() and isinstance(kwargs.get(key), (list, tuple)):
            kwargs.update(_projected_fields(kwargs, fmt, key, config))
        return method(*args, **kwargs)

    return call


def _projected_fields(kwargs: Mapping[str, Any], fmt: str, key: str, config: Optional[str]) -> Dict[str, Any]:
    """The request fields to send instead: the conversation, and any context field the
    projection changed (an SDK accepts the plain JSON form of each)."""
    from . import _dumps

    body = {name: kwargs[name] for name in (key, *_CONTEXT_FIELDS) if _given(kwargs, name)}
    projected = json.loads(_native.project_str(_dumps(body), fmt, config))
    changed = {name: value for name, value in projected.items() if name != key and value != body.get(name)}
    return {key: projected.get(key, []), **changed}


def _given(kwargs: Mapping[str, Any], name: str) -> bool:
    # The SDKs default optional arguments to a NOT_GIVEN sentinel: not part of the body.
    return name in kwargs and type(kwargs[name]).__name__ not in ("NotGiven", "Omit")
