"""Type checks that several modules make on values an SDK or a server hands over."""

from __future__ import annotations

from typing import Any, TypeGuard


def is_int(value: Any) -> TypeGuard[int]:
    """An int and not a bool (``bool`` subclasses ``int``, and ``True`` is no token count, status
    code or id); int subclasses such as an ``IntEnum`` count, floats and numpy ints do not."""
    # The exact class answers for almost every value without the two isinstance calls.
    return value.__class__ is int or (isinstance(value, int) and not isinstance(value, bool))
