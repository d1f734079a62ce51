"""Fixtures of the continual tests: a training (an episode, theta_init) killed mid-run."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pytest


class Killed(Exception):
    """Raised by a task's ``forward_loss`` patched by :func:`kill_forward_loss`: the run is killed."""


@dataclass
class Kill:
    """A patched ``forward_loss``: ``error`` is the exception it raises, ``restore()`` puts the original back."""

    error: type[Exception]
    restore: Callable[[], None]


@pytest.fixture
def kill_forward_loss(monkeypatch):
    """``kill_forward_loss(task_cls, n)``: ``task_cls.forward_loss`` raises :class:`Killed` at its
    ``n``-th call from now on (train and validation batches count alike), as a killed run would stop
    there; returns a :class:`Kill`. The original comes back with ``restore()`` or at the test's end."""

    def patch(task_cls, n: int) -> Kill:
        calls = {"n": 0}
        orig = task_cls.forward_loss

        def dying(self, model, batch):
            calls["n"] += 1
            if calls["n"] == n:
                raise Killed
            return orig(self, model, batch)

        monkeypatch.setattr(task_cls, "forward_loss", dying)
        return Kill(Killed, lambda: monkeypatch.setattr(task_cls, "forward_loss", orig))

    return patch
