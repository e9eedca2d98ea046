"""Parse ``X-Request-Start``: when the proxy in front of the service received the request.

nginx sends ``t=${msec}`` (seconds with a millisecond fraction, e.g. ``t=1700000000.123``);
Heroku's router sends milliseconds (``t=1700000000123`` or a bare number); some setups send
microseconds (``t=1700000000123456``). The unit is told apart by magnitude, which is unambiguous
for any date between 1973 and 5138.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

_SECONDS_BELOW = Decimal("1e11")  # 1e11 s is the year 5138; 1e11 ms is 1973
_MILLISECONDS_BELOW = Decimal("1e14")
_MICROSECONDS_BELOW = Decimal("1e17")


def parse_request_start(value: str) -> int | None:
    """The header's timestamp in Unix nanoseconds, or None when it is not a timestamp.

    Decimal arithmetic keeps the value exact: a float would move a millisecond timestamp by a
    few hundred nanoseconds.
    """
    text = value.strip()
    if text.startswith("t="):
        text = text[2:].strip()
    try:
        number = Decimal(text)
    except InvalidOperation:
        return None
    if not number.is_finite() or number <= 0:
        return None
    if number < _SECONDS_BELOW:
        scale = Decimal(1_000_000_000)
    elif number < _MILLISECONDS_BELOW:
        scale = Decimal(1_000_000)
    elif number < _MICROSECONDS_BELOW:
        scale = Decimal(1_000)
    else:
        scale = Decimal(1)
    return int(number * scale)
