"""speechkit: a speech toolkit in the Kaldi/ESPnet recipe tradition.

The library lives in sub-packages (``data``, ``features``, ``text``, ``nn``, ``models``, ``train``,
``decode``, ``scoring``); the ``speechkit-*`` commands are thin wrappers in ``speechkit.bin``.
"""

__version__ = "0.1.0"
