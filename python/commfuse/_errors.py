"""The exception classes (SPEC §0). libcommfuse's C++ ``commfuse::Error`` and its
subclasses arrive as the class matching their status code, built as ``cls(message, code)``."""

from __future__ import annotations

from typing import Any, Union

from . import _commfuse


class Error(Exception):
    """Base of every commfuse error.

    ``code`` is the SPEC §0 status (numeric values shared with CANN's aclnn) and
    ``message`` the one-line message naming the function, argument and value.
    Errors raised by libcommfuse (C++ ``commfuse::Error`` and subclasses) arrive as the
    subclass matching their status.

    Constructed as ``Error(message, code=None)`` or, as issue 7 spells it,
    ``Error(code, message)`` (an int first and a str second); a subclass without ``code``
    carries its own status.
    """

    #: SPEC §0 status code of this class (an instance may carry its own).
    code: int = 561000

    def __init__(self, message: Union[str, int], code: Union[int, str, None] = None) -> None:
        if isinstance(message, int) and isinstance(code, str):
            message, code = code, message  # Error(code, message)
        message = str(message)
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = int(code)

    @property
    def status(self) -> str:
        """Fixed name of the status code, e.g. ``"PARAM_INVALID"``."""
        return _commfuse.status_name(self.code)

    def __reduce__(self) -> Any:
        return (type(self), (self.message, self.code))


class NullPointerError(Error):
    """A required pointer or tensor was null (PARAM_NULLPTR, 161001)."""

    code = 161001


class InvalidArgument(Error, ValueError):
    """Wrong dtype, shape, attribute value or group (PARAM_INVALID, 161002)."""

    code = 161002


class RuntimeFailure(Error, RuntimeError):
    """Peer failure, timeout, transport error, out of memory (RUNTIME_ERROR, 361001)."""

    code = 361001


class InternalError(Error):
    """An internal invariant broke: a commfuse bug (INNER, 561000)."""

    code = 561000


_commfuse._register_errors(Error, NullPointerError, InvalidArgument, RuntimeFailure,
                           InternalError)

# Status code -> class, for raising the class a code stands for.
CLASSES: dict[int, type[Error]] = {
    cls.code: cls for cls in (NullPointerError, InvalidArgument, RuntimeFailure, InternalError)
}
