"""Fixtures shared by the whole test suite."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("SPEECHKIT_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))

# librosa's numba JIT costs ~17 s per process unless cached on disk.
os.environ.setdefault("NUMBA_CACHE_DIR", str(Path.home() / ".cache" / "speechkit" / "numba"))
os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_configure(config):
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (the small real corpora); tests that need it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real corpora not found at {SHARED_DATA} (set SPEECHKIT_SHARED_DATA)")
    return SHARED_DATA
