"""Fixtures shared by the whole test suite."""
from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
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
def run_cli_main(repo_root):
    """``run(module, argv, cwd=None, env=None)``: ``main(argv)`` of ``module`` (a ``speechkit.bin`` CLI) in a
    fresh Python process, which then prints ``torch imported`` or ``no torch`` (whether the call imported torch:
    1.2 s a process for the steps that need none); returns its ``CompletedProcess`` (text output)."""
    def run(module: str, argv: list[str], cwd=None, env=None) -> subprocess.CompletedProcess:
        code = (f"import sys; from {module} import main; rc = main({argv!r}); "
                "print('torch imported' if 'torch' in sys.modules else 'no torch'); sys.exit(rc)")
        env = dict(os.environ if env is None else env)
        env["PYTHONPATH"] = os.pathsep.join([str(repo_root), os.environ.get("PYTHONPATH", "")])
        return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, env=env)

    return run


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (the small real corpora); tests that need it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real corpora not found at {SHARED_DATA} (set SPEECHKIT_SHARED_DATA)")
    return SHARED_DATA


# ---- the synthesized mini corpus (every recipe's embedded default and CI's data) ----------------
#: The tiny configuration CI uses: 4 speakers x 2 languages x 10 sentences = 80 utterances.
TINY_MINI = {"seed": 1, "num_speakers": 4, "sentences_per_language": 10, "languages": ("en", "hi")}


def espeak_available() -> bool:
    """True if libespeak-ng can be loaded (the mini corpus needs it)."""
    try:
        ctypes.CDLL(ctypes.util.find_library("espeak-ng") or "libespeak-ng.so.1")
        return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def require_espeak() -> None:
    """Skip the test when libespeak-ng cannot be loaded."""
    if not espeak_available():
        pytest.skip("libespeak-ng not installed (apt-get install libespeak-ng1)")


@pytest.fixture(scope="session")
def mini_params() -> dict:
    """The parameters of :func:`mini_corpus` (:data:`TINY_MINI`)."""
    return dict(TINY_MINI)


@pytest.fixture(scope="session")
def mini_corpus(require_espeak, tmp_path_factory) -> Path:
    """A tiny mini corpus (:data:`TINY_MINI`) synthesized once per test session; its directory."""
    from speechkit.data.corpora.mini import download_mini

    return download_mini(tmp_path_factory.mktemp("mini_db") / "mini", **TINY_MINI)


@pytest.fixture(scope="session")
def mini_data(mini_corpus, tmp_path_factory) -> Path:
    """The Kaldi data directory prepared from :func:`mini_corpus` (with ``phone_alignments``)."""
    from speechkit.data.corpora.mini import prepare_mini

    out = tmp_path_factory.mktemp("mini_data") / "data"
    prepare_mini(mini_corpus, out)
    return out
