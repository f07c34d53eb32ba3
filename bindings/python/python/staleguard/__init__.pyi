"""Type stubs of the staleguard package (the Rust core's Python API)."""

import os
from typing import Any, Mapping, Optional, TypeVar, Union, overload

_T = TypeVar("_T")
_Config = Union[Mapping[str, Any], str, os.PathLike[str], None]

class StaleguardError(ValueError):
    """A request, format or config staleguard cannot read."""

class InvalidJSONError(StaleguardError):
    """The body is not valid JSON."""
    line: int
    column: int
    offset: int

class NotARequestError(StaleguardError):
    """Valid JSON, but not a request body of a format staleguard reads."""

class UnknownFormatError(StaleguardError):
    """`format` is not one of auto, openai, anthropic, responses or gemini."""

class ConfigValueError(StaleguardError):
    """A config key or value (or an environment variable) is not allowed."""

class InternalError(StaleguardError):
    """A bug in staleguard (it panicked): the request was not projected."""

class Verdict:
    """The guard's answer about one proposed browser call."""
    @property
    def allowed(self) -> bool: ...
    @property
    def kind(self) -> str: ...
    @property
    def reason(self) -> Optional[str]: ...
    def __bool__(self) -> bool: ...

@overload
def project(body: str, *, format: str = "auto", config: _Config = None) -> str: ...
@overload
def project(body: Union[bytes, bytearray, memoryview], *, format: str = "auto", config: _Config = None) -> bytes: ...
@overload
def project(body: Mapping[str, Any], *, format: str = "auto", config: _Config = None) -> dict[str, Any]: ...
def inspect(body: Union[str, bytes, Mapping[str, Any]], *, format: str = "auto", config: _Config = None) -> dict[str, Any]: ...
def check_call(
    body: Union[str, bytes, Mapping[str, Any]], call: Union[str, Mapping[str, Any]], *, config: _Config = None
) -> Verdict: ...
def wrap(client: _T, *, config: _Config = None) -> _T: ...
