"""A synchronous context manager that ``async with`` accepts too.

Entering and leaving a span or a request context never waits, so the asynchronous form simply
runs the synchronous one; context variables are per task, so this is right inside coroutines.
"""

from __future__ import annotations

from typing import Generic, TypeVar

Entered = TypeVar("Entered")


class AsyncWithToo(Generic[Entered]):
    def __enter__(self) -> Entered:
        raise NotImplementedError

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Entered:
        return self.__enter__()

    async def __aexit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self.__exit__(exc_type, exc, tb)
