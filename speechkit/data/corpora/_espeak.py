"""A minimal ``ctypes`` binding to the espeak-ng C library (``libespeak-ng.so.1``) that returns the
synthesized samples together with espeak's phoneme events.

Only the calls of ``espeak-ng/speak_lib.h`` needed for that are bound: ``espeak_Initialize``
(synchronous output, ``espeakINITIALIZE_PHONEME_EVENTS``), ``espeak_SetSynthCallback``,
``espeak_SetVoiceByName``, ``espeak_SetParameter`` (rate, pitch, range), ``espeak_Synth`` and
``espeak_Synchronize``. The callback receives blocks of 16-bit samples and a list of events; a
phoneme event (``espeakEVENT_PHONEME``) carries the phoneme's name (espeak's mnemonic, or IPA with
``espeakINITIALIZE_PHONEME_IPA``; at most 8 bytes) and ``sample``, the index of the output sample at
which the phoneme starts (``audio_position`` is the same point in whole milliseconds).

espeak-ng keeps synthesis state in globals (pitch flutter phase, echo buffer, the libc random
generator used for breath noise), so the bytes produced for a text depend on what the process
synthesized before. Reproducible output therefore needs a fresh process running a fixed sequence
of calls; :mod:`speechkit.data.corpora.mini` runs one worker process per speaker for that reason.
One :class:`Espeak` per process: the library itself is a process-wide singleton.
"""
from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass

import numpy as np

# espeak_AUDIO_OUTPUT
AUDIO_OUTPUT_SYNCHRONOUS = 2
# espeak_Initialize options
espeakINITIALIZE_PHONEME_EVENTS = 0x0001
espeakINITIALIZE_PHONEME_IPA = 0x0002
espeakINITIALIZE_DONT_EXIT = 0x8000
# espeak_EVENT_TYPE
espeakEVENT_LIST_TERMINATED = 0
espeakEVENT_PHONEME = 7
# espeak_PARAMETER
espeakRATE, espeakPITCH, espeakRANGE = 1, 3, 4
# espeak_POSITION_TYPE, synth flags
POS_CHARACTER = 1
espeakCHARS_UTF8 = 1


class _EventId(ctypes.Union):
    _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p), ("string", ctypes.c_char * 8)]


class _Event(ctypes.Structure):
    """``espeak_EVENT`` from speak_lib.h."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", _EventId),
    ]


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event))


class EspeakError(RuntimeError):
    """libespeak-ng is missing or one of its calls failed."""


@dataclass(frozen=True)
class Synthesis:
    """The result of :meth:`Espeak.synth`.

    Attributes:
        samples: ``int16`` array of shape ``(num_samples,)`` at ``sample_rate``.
        sample_rate: Hz (22050 for espeak-ng's own voices).
        phonemes: ``[(start_sample, name), ...]`` in event order; ``name`` is ``''`` for pauses in
            IPA mode and starts with ``_`` for pauses in mnemonic mode.
    """

    samples: np.ndarray
    sample_rate: int
    phonemes: list[tuple[int, str]]


def _load_library() -> ctypes.CDLL:
    names = [n for n in (ctypes.util.find_library("espeak-ng"), "libespeak-ng.so.1", "libespeak-ng.so",
                         "libespeak-ng.dylib", "libespeak-ng.dll") if n]
    errors = []
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError as e:
            errors.append(str(e))
    raise EspeakError("libespeak-ng not found (Debian/Ubuntu: apt-get install libespeak-ng1 espeak-ng; "
                      f"macOS: brew install espeak-ng): {'; '.join(errors)}")


class Espeak:
    """The espeak-ng engine of this process, in synchronous mode with phoneme events.

    Args:
        ipa: report phoneme names in IPA instead of espeak's ASCII mnemonics. Caveat (espeak-ng
            1.51): some real phonemes (e.g. the palatalisation ``;`` of the Indic voices) then get
            an empty name, the same as a pause, and names longer than 8 bytes are cut.

    Raises:
        EspeakError: the library cannot be loaded or initialised.
    """

    _instance_created = False

    def __init__(self, ipa: bool = False):
        if Espeak._instance_created:
            raise EspeakError("one Espeak per process (libespeak-ng keeps global state)")
        lib = _load_library()
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_SetSynthCallback.argtypes = [_CALLBACK]
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetVoiceByName.restype = ctypes.c_int
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_SetParameter.restype = ctypes.c_int
        lib.espeak_Synth.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
                                     ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
        lib.espeak_Synth.restype = ctypes.c_int
        lib.espeak_Synchronize.restype = ctypes.c_int
        lib.espeak_Info.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
        lib.espeak_Info.restype = ctypes.c_char_p
        options = espeakINITIALIZE_PHONEME_EVENTS | espeakINITIALIZE_DONT_EXIT
        if ipa:
            options |= espeakINITIALIZE_PHONEME_IPA
        sr = lib.espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, None, options)
        if sr <= 0:
            raise EspeakError(f"espeak_Initialize failed (returned {sr}); is espeak-ng-data installed?")
        self._lib = lib
        self.sample_rate = int(sr)
        self._chunks: list[np.ndarray] = []
        self._phonemes: list[tuple[int, str]] = []
        self._callback = _CALLBACK(self._on_synth)  # keep a reference: the C side holds the pointer
        lib.espeak_SetSynthCallback(self._callback)
        Espeak._instance_created = True

    @staticmethod
    def version() -> str:
        """The library's version string, e.g. ``1.51``."""
        lib = _load_library()
        lib.espeak_Info.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
        lib.espeak_Info.restype = ctypes.c_char_p
        return lib.espeak_Info(None).decode("utf-8", "replace")

    def _on_synth(self, wav, numsamples, events) -> int:
        if numsamples > 0 and wav:
            self._chunks.append(np.ctypeslib.as_array(wav, shape=(numsamples,)).copy())
        i = 0
        while events[i].type != espeakEVENT_LIST_TERMINATED:
            ev = events[i]
            if ev.type == espeakEVENT_PHONEME:
                raw = bytes(ev.id.string)  # up to 8 bytes, NUL-terminated unless all 8 are used
                self._phonemes.append((int(ev.sample), raw.split(b"\0", 1)[0].decode("utf-8", "replace")))
            i += 1
        return 0  # 0 = continue synthesis

    def synth(self, text: str, voice: str, *, rate: int = 175, pitch: int = 50, pitch_range: int = 50) -> Synthesis:
        """Synthesize ``text`` (UTF-8) with ``voice`` (e.g. ``"hi+f2"``: language + variant).

        Args:
            text: the text to speak.
            voice: espeak voice name, ``<language>[+<variant>]``.
            rate: speaking rate in words per minute (espeak's 80-450; default 175).
            pitch: base pitch, 0-100 (default 50).
            pitch_range: pitch range, 0-100 (default 50).

        Returns:
            A :class:`Synthesis`.

        Raises:
            EspeakError: unknown voice, or a failing call.
        """
        lib = self._lib
        if lib.espeak_SetVoiceByName(voice.encode("utf-8")) != 0:
            raise EspeakError(f"espeak-ng has no voice {voice!r} (see `espeak-ng --voices`)")
        for param, value in ((espeakRATE, rate), (espeakPITCH, pitch), (espeakRANGE, pitch_range)):
            if lib.espeak_SetParameter(param, int(value), 0) != 0:
                raise EspeakError(f"espeak_SetParameter({param}, {value}) failed")
        self._chunks, self._phonemes = [], []
        data = text.encode("utf-8") + b"\0"
        err = lib.espeak_Synth(data, len(data), 0, POS_CHARACTER, 0, espeakCHARS_UTF8, None, None)
        if err != 0 or lib.espeak_Synchronize() != 0:
            raise EspeakError(f"espeak_Synth failed (error {err}) for {text!r}")
        samples = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.int16)
        return Synthesis(samples.astype(np.int16, copy=False), self.sample_rate, list(self._phonemes))
