"""ein's exceptions. The native module raises these classes by name."""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence


class Error(Exception):
    """Base class of every error ein raises (besides OSError, TypeError and ValueError for bad arguments)."""


@dataclass(frozen=True)
class Diagnostic:
    """One message of a compilation.

    ``file``, ``line`` and ``col`` locate it in the model (``None`` when it
    has no place there, e.g. an unreadable weights file); ``rendered`` is the
    text einc prints: ``file:line:col: error: message``, the source line and
    a caret.
    """

    severity: str
    file: Optional[str]
    line: Optional[int]
    col: Optional[int]
    message: str
    rendered: str

    def __str__(self) -> str:
        return self.rendered.rstrip("\n") if self.rendered else self.message


class CompileError(Error):
    """The model did not compile.

    ``str(error)`` is every error as einc prints it. ``file``, ``line`` and
    ``col`` locate the first located error (``None`` when no error has a
    place in the model); ``message`` is that error's text without location;
    ``diagnostics`` lists every message.
    """

    def __init__(self, diagnostics: Sequence[Diagnostic]):
        errors = [d for d in diagnostics if d.severity == "error"] or list(diagnostics)
        super().__init__("\n".join(str(d) for d in errors) or "compilation failed")
        located = next((d for d in errors if d.file), errors[0] if errors else None)
        self.diagnostics = list(diagnostics)
        self.file = located.file if located else None
        self.line = located.line if located else None
        self.col = located.col if located else None
        self.message = located.message if located else str(self)


class InputError(Error, ValueError):
    """An input (or out= buffer) given to Model.run is wrong: an unknown name,
    a missing input, or a dtype or shape other than the model's. ``name`` is
    the input or output concerned, when one is."""

    name: Optional[str] = None


class DeviceError(Error):
    """The device a model was asked to run on cannot run it: the device is
    not available here (no CUDA backend, no GPU, no such device index), or
    the artifact was compiled for another target."""


class ArtifactError(Error):
    """An artifact (.einb) is malformed or inconsistent: it was refused
    before anything in it was used."""


def did_you_mean(word: str, known: Iterable[str], quote: str = "'",
                 spellings: Optional[Mapping[str, str]] = None, cutoff: float = 0.6) -> str:
    """"; did you mean 'x'?" for the known name closest to ``word`` (difflib),
    or "" when none is close. ``spellings`` maps words other tools use to ours
    ("gpu" -> "cuda")."""
    known = list(known)
    if spellings and word in spellings and spellings[word] in known:
        closest = [spellings[word]]
    else:
        closest = difflib.get_close_matches(word, known, n=1, cutoff=cutoff)
    return f"; did you mean {quote}{closest[0]}{quote}?" if closest else ""


def check_choice(argument: str, value, choices: Sequence[str], what: str,
                 spellings: Optional[Mapping[str, str]] = None) -> str:
    """``value`` when it is one of ``choices``; otherwise a ValueError in the
    caller's words: "precision='bf61': unknown precision; did you mean 'bf16'?
    (precisions: 'fp32', 'bf16', 'fp16', 'int8', 'int4')"."""
    if isinstance(value, str) and value in choices:
        return value
    if not isinstance(value, str):
        raise TypeError(f"{argument} must be a string, one of {', '.join(map(repr, choices))}; got {value!r}")
    hint = did_you_mean(value, choices, spellings=spellings)
    raise ValueError(f"{argument}={value!r}: unknown {what}{hint} ({what}s: {', '.join(map(repr, choices))})")
