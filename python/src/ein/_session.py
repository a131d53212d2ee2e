"""ein.Session: one execution context of a model, with its state (a
decoder's key/value cache) kept from run to run, and streaming generation."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence

import numpy as np

from . import _ein
from ._model import Model, _check_threads, _generation_arguments, _unknown_names


@dataclass(frozen=True)
class GenerationStats:
    """What a generation did and how long it took, as ``ein-run --generate``
    prints it. The prefill is the prompt's run and the choice of the first
    token; each decode step runs the token before and chooses the next. Only
    the time inside ein counts, not the time the caller spends on a token.
    """

    prompt_tokens: int
    prefill_seconds: float
    decode_tokens: int
    decode_seconds: float

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.prompt_tokens / self.prefill_seconds if self.prefill_seconds > 0 else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        return self.decode_tokens / self.decode_seconds if self.decode_seconds > 0 else 0.0

    def __str__(self) -> str:
        lines = [f"prefill: {self.prompt_tokens} tokens in {self.prefill_seconds * 1e3:.3f} ms "
                 f"({self.prefill_tokens_per_s:.1f} tokens/s)"]
        if self.decode_tokens:
            lines.append(f"decode: {self.decode_tokens} tokens in {self.decode_seconds * 1e3:.3f} ms "
                         f"({self.decode_tokens_per_s:.1f} tokens/s)")
        return "\n".join(lines)


class _TokenStream(Iterator[int]):
    """Tokens read one by one from a native generation (Generation, and the
    scheduler's Request), kept in ``tokens`` as they come."""

    def __init__(self, native):
        self._native = native
        self.tokens: List[int] = []
        """The tokens yielded so far."""

    def __iter__(self) -> "_TokenStream":
        return self

    def __next__(self) -> int:
        token = self._native.next()
        if token is None:
            raise StopIteration
        self.tokens.append(token)
        return token

    @property
    def finish_reason(self) -> Optional[str]:
        """Why it ended, as the OpenAI API says it: "stop" (a stop token, the
        last of ``tokens``), "length" (``max_new_tokens`` made, or the
        model's cache full: its tokens stand), "cancelled" (a request
        cancelled or its scheduler shut down), or None while it goes on."""
        return self._native.finish_reason


class Generation(_TokenStream):
    """The tokens of one Session.generate call, each computed when it is asked
    for: the first next() runs the prompt and chooses a token, each later
    one runs the token before and chooses the next. Leaving the loop early
    leaves the session after the last token it ran (``session.position``);
    the session may then go on, reset() or fork(). Running, resetting or
    generating on the session again ends this generation (its next()
    raises ein.Error)."""

    def __init__(self, session: "Session", native: "_ein._Generation"):
        super().__init__(native)
        self._session = session

    @property
    def stats(self) -> Optional[GenerationStats]:
        """This generation's timing so far (the session's last_generation
        while no other generation has begun on it)."""
        return self._session.last_generation


class Session:
    """One execution context of a model, used by one thread at a time.

    A model with session state (a decoder's key/value cache,
    docs/LANGUAGE.md "Session state") keeps it here from run to run: each
    run() appends its tokens at ``position``; reset() starts over; fork()
    copies the state into a new session (e.g. a shared prompt, continued two
    ways). generate() streams tokens. Sessions of one model share its weights;
    each has its own arena. The GIL is released while the kernels run. A call
    while another thread is inside one on the same session raises ein.Error.
    """

    def __init__(self, model: Model, *, threads: Optional[int] = None):
        if not isinstance(model, Model):
            raise TypeError(f"Session takes an ein.Model (ein.compile, ein.load), got {type(model).__name__}")
        self.model = model
        self._native = _ein._Session(model._native, _check_threads(threads))

    @classmethod
    def _of(cls, model: Model, native: "_ein._Session") -> "Session":
        session = cls.__new__(cls)
        session.model, session._native = model, native
        return session

    threads = property(lambda self: self._native.threads, doc="Kernel threads per run (the model's unless given).")
    device = property(lambda self: self._native.device, doc="The device the session runs on (the model's).")

    @property
    def position(self) -> int:
        """The tokens in the session's state: rows appended since it began or
        was reset (0 for a model without state)."""
        return self._native.position

    def run(self, inputs: Mapping[str, Any]) -> Dict[str, np.ndarray]:
        """Runs the model once on ``inputs`` (as Model.run takes them) and
        returns ``{output name: new array}``; a model with state appends this
        run's tokens to it and moves ``position`` on. A run that fails leaves
        the state and position as they were."""
        if not isinstance(inputs, Mapping):
            raise TypeError(f"inputs must be a mapping of input names to arrays, got {type(inputs).__name__}")
        _unknown_names(inputs, self.model._input_names, "input")
        return self._native.run(dict(inputs))

    def reset(self) -> None:
        """Empties the state: the next run or generation starts at position 0."""
        self._native.reset()

    def fork(self) -> "Session":
        """A new session of the same model whose state and position are a
        copy of this one's; the two go on independently."""
        return Session._of(self.model, self._native.fork())

    def generate(self, prompt: Sequence[int], *, max_new_tokens: int = 32, temperature: float = 0.0,
                 top_k: int = 0, top_p: float = 1.0, seed: int = 0, stop_tokens: Sequence[int] = ()) -> Generation:
        """Generates tokens from the session's position (reset() first for a
        new sequence), yielding each as it is chosen::

            for token in session.generate(ids, max_new_tokens=64, stop_tokens=[eos]):
                print(tokenizer.decode([token]), end="", flush=True)

        The tokens are Model.generate's for the same arguments (the same
        steps and sampling); the options are Model.generate's. Nothing runs
        ahead of the consumer: breaking out of the loop leaves the session
        after the last token it ran. ``last_generation`` has the timing.
        """
        arguments = _generation_arguments(prompt, max_new_tokens, temperature, top_k, top_p, seed, stop_tokens)
        return Generation(self, self._native.generate(*arguments))

    @property
    def last_generation(self) -> Optional[GenerationStats]:
        """The timing of the latest generate() on this session (so far, while
        it is being consumed); None before the first."""
        native = self._native.last_generation()
        return None if native is None else GenerationStats(*native)

    def __repr__(self) -> str:
        return f"<ein.Session of {self.model.name!r} at position {self.position} on {self.device}>"
