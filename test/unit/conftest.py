"""What the unit tests share beyond test/conftest.py's fixtures: the helper modules of the task tests.

``test/unit/tasks/zs_helpers.py`` (tiny feature dirs and trainings for the vqvae / inverter tasks and
the extract-units / resynthesize CLIs), ``test/unit/tasks/tts_speaker_helpers.py`` (speaker-
conditioned acoustic-model data), ``test/unit/tasks/tacotron2_helpers.py`` (the tiny Tacotron 2) and
``test/unit/tasks/rnnt_helpers.py`` (the tiny multilingual ASR setup) are not test modules; they are
registered here under their names, once, so that a test anywhere under test/unit says ``import
zs_helpers as zs``. The ``rnnt_env`` fixture (the rnnt task's tests and the decoding tests of
test/unit/inference) is built from rnnt_helpers.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

HELPERS = Path(__file__).resolve().parent / "tasks"


def _register(name: str) -> None:
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, HELPERS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


for _name in ("zs_helpers", "tts_speaker_helpers", "tacotron2_helpers", "rnnt_helpers"):
    _register(_name)


@pytest.fixture
def rnnt_env(tmp_path, monkeypatch):
    """data/{train,dev}, data/lang of :func:`rnnt_helpers.make_rnnt_env` in ``tmp_path``, the working dir."""
    monkeypatch.chdir(tmp_path)
    return sys.modules["rnnt_helpers"].make_rnnt_env(tmp_path)
