"""Errors that name the parameters of a library call, spelled by whoever called it.

The library names its own parameters; only ``bin/`` knows flags. A message refers to a parameter by
writing its name in backquotes, ```nj``` (or ```timestamps=no``` for a parameter given a value), and
the error is made one of :class:`ParameterError` (a bad value, or values that do not go together) or
any other error marked with :func:`naming_parameters` (a missing file whose message says which
parameter to give). Outside a CLI the message names the parameters bare::

    >>> str(ParameterError("num_wavs", "`num_wavs` must be >= 0, got -1"))
    'num_wavs must be >= 0, got -1'

and a CLI's :func:`speechkit.utils.cli.run_main` spells each reference as the flag its parser maps to
that parameter (``speechkit-tts-synthesize: error: --num-wavs must be >= 0, got -1``), through
:func:`spell_parameters`. A reference with a value reads ``name=value`` bare and ``--flag value``
from a CLI.
"""
from __future__ import annotations

import re
from typing import Callable, TypeVar

__all__ = ["ConfigError", "ParameterError", "naming_parameters", "parameter_template", "spell_parameters"]

E = TypeVar("E", bound=BaseException)

#: A reference to a parameter in a message: ```name``` or ```name=value``` (a Python identifier; a value
#: without blanks or backquotes). Backquoted text of another shape (```espeak-ng --voices```) is left alone.
PARAMETER_REF = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)(?:=([^`\s]+))?`")


class ConfigError(ValueError):
    """A configuration problem (unknown key, wrong type, bad value); the message names the key."""


def spell_parameters(template: str, spell: Callable[[str], str | None] | None = None) -> str:
    """``template`` with each parameter reference (:data:`PARAMETER_REF`) written out.

    Args:
        template: a message with references such as ```nj``` or ```timestamps=no```.
        spell: how the caller names a parameter: ``spell("nj")`` -> ``"--nj"``, or ``None`` where it has
            no name of its own for it. A reference with a value is first asked whole
            (``spell("mode=lid_free")`` -> ``"--lid-free"``), then by its name (``--timestamps no``).
            ``None``: the library's own names.

    Returns:
        The message: every reference spelled by ``spell``, else bare (``nj``, ``timestamps=no``).
    """
    def one(m: re.Match) -> str:
        name, value = m.group(1), m.group(2)
        if spell is not None:
            if value is not None:
                whole = spell(f"{name}={value}")
                if whole is not None:
                    return whole
            flag = spell(name)
            if flag is not None:
                return flag if value is None else f"{flag} {value}"
        return m.group(0)[1:-1]

    return PARAMETER_REF.sub(one, template)


def parameter_template(error: BaseException) -> str | None:
    """The message of ``error`` with its parameter references, if it names parameters
    (:class:`ParameterError`, or marked by :func:`naming_parameters`), else ``None``."""
    return getattr(error, "parameter_template", None)


def naming_parameters(error: E) -> E:
    """Mark ``error``, raised with one message holding parameter references, as naming parameters:
    its message (``str(error)``) becomes the names bare, and the references are kept for a CLI to
    spell (:func:`parameter_template`). For an error of any type (``DataError``, ``FileNotFoundError``
    ...) that is not itself about a parameter's value but says which parameter to give::

        raise naming_parameters(DataError(f"{path}: one column only (`timestamps=yes`)"))

    Returns:
        ``error`` itself (its ``args`` replaced by the bare message; it pickles with its template).
    """
    template = str(error)
    error.parameter_template = template  # type: ignore[attr-defined]
    error.args = (spell_parameters(template),)
    return error


class ParameterError(ConfigError):
    """A library parameter with a bad value, or parameters that do not go together.

    Args:
        param: the parameter at fault, as the library function names it (``"num_wavs"``).
        message: what is wrong. Parameters are referred to as ```name``` (:data:`PARAMETER_REF`):
            ``"`num_wavs` must be >= 0, got -1"``, ``"`switch_off_tau` needs `mode=lid_free`"``. A message
            without a reference is about ``param`` and reads ``param: message``.

    Attributes:
        param: as given; parameter_template: the message with its references (what a CLI spells).

    ``str()`` names the parameters bare (``num_wavs must be >= 0, got -1``); a CLI's ``run_main`` spells
    them as its flags (``--num-wavs must be >= 0, got -1``).
    """

    def __init__(self, param: str, message: str):
        super().__init__(param, message)
        self.param = param
        self.parameter_template = message if PARAMETER_REF.search(message) else f"`{param}`: {message}"

    def __str__(self) -> str:
        return spell_parameters(self.parameter_template)
