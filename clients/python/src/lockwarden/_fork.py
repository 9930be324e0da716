"""What a forked child must not inherit: objects registered here are told, in the child,
right after ``fork()``, so that held locks become not held there and connections are not
shared with the parent."""

from __future__ import annotations

import os
import weakref
from typing import Protocol


class ForkAware(Protocol):
    def after_fork_in_child(self) -> None: ...


_registered: weakref.WeakSet[ForkAware] = weakref.WeakSet()


def register(obj: ForkAware) -> None:
    _registered.add(obj)


def _after_fork_in_child() -> None:
    for obj in list(_registered):
        obj.after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
