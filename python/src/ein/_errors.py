"""ein's exceptions. The native module raises these classes by name."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence


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


class ArtifactError(Error):
    """An artifact (.einb) is malformed or inconsistent: it was refused
    before anything in it was used."""
