"""ein.Scheduler: many generations of one decoder at once, continuously
batched; requests submitted from any thread, their tokens streamed."""
from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

from . import _ein
from ._model import Model, _beam_search_arguments, _check_threads, _generation_arguments, _integer
from ._session import _TokenStream


class Request(_TokenStream):
    """One submitted generation (Scheduler.submit). Iterating yields its
    tokens as the scheduler chooses them (waiting for each, the GIL
    released); any thread may read it. Dropping it does not stop the
    generation: cancel() does."""

    def wait(self) -> List[int]:
        """Waits until the request ends; every token it produced (also
        those iteration yielded). A beam search's: its best hypothesis,
        which iteration yields once the search has ended."""
        return self._native.wait()

    def hypotheses(self) -> List[Tuple[List[int], float]]:
        """A beam search's (``submit(num_beams=...)``): waits until it ends;
        its best ``num_return_sequences`` hypotheses as (tokens, score),
        best first (none when it was cancelled). A generation's raises
        ein.Error."""
        return self._native.hypotheses()

    def cancel(self) -> None:
        """Ends the request before the scheduler's next step; its tokens so
        far stand and finish_reason becomes "cancelled"."""
        self._native.cancel()

    @property
    def done(self) -> bool:
        return self._native.done

    @property
    def prompt_tokens(self) -> int:
        return self._native.prompt_tokens

    @property
    def cached_tokens(self) -> int:
        """The prompt's first tokens taken from a cache an earlier sequence
        left (``reuse_prefixes``) instead of run again; known once it started."""
        return self._native.cached_tokens

    @property
    def preemptions(self) -> int:
        """How many times the request gave its key/value cache blocks to
        others and ran its tokens so far again (``cache_blocks``)."""
        return self._native.preemptions

    def __repr__(self) -> str:
        state = f"ended: {self.finish_reason}" if self.done else "going"
        return f"<ein.Request prompt of {self.prompt_tokens} tokens, {state}>"


class Scheduler:
    """Generation for many requests at once with a decoder compiled for one
    sequence (LANGUAGE.md "Many sequences at once"): up to ``max_sequences``
    generate together; each step runs the next token of every one of them
    and, within ``step_tokens`` (0: 256, or the model's most per run), chunks
    of the prompts of those starting, so the weights are read once for all
    and a long prompt does not stall the others. Further requests wait (at
    most ``max_waiting``; beyond it submit raises ein.Error). With
    ``reuse_prefixes``, a prompt that begins as a sequence's cache holds (a
    conversation continued, a shared system prompt) starts from there
    instead of running those tokens again. Each request's tokens are those
    its prompt gives alone. The key/value caches are paged: blocks of
    ``cache_block_rows`` rows (0: a whole cache per sequence) from a pool of
    ``cache_blocks`` (0: enough for every sequence's whole cache); with
    fewer, a sequence that finds no free block waits, and when none can go
    on the youngest request holding blocks is preempted: it gives them to
    the others and runs its prompt and tokens so far again once blocks are
    free, its stream going on unchanged (``Request.preemptions`` counts
    it). A request that holds every block and needs more ends with
    ein.Error (ResourceExhausted). A beam search (``submit(num_beams=4)``)
    is a request holding a sequence per beam.

        with ein.Scheduler(model, max_sequences=8) as scheduler:
            request = scheduler.submit(ids, max_new_tokens=64)
            for token in request:
                ...
    """

    def __init__(self, model: Model, *, max_sequences: int = 16, threads: Optional[int] = None,
                 step_tokens: int = 0, max_waiting: int = 1024, reuse_prefixes: bool = True,
                 cache_block_rows: int = 16, cache_blocks: int = 0):
        if not isinstance(model, Model):
            raise TypeError(f"model must be an ein.Model, got {type(model).__name__}")
        self.model = model
        self._native = _ein._Scheduler(model._native, _integer(max_sequences, "max_sequences", 1),
                                       _check_threads(threads), _integer(step_tokens, "step_tokens", 0),
                                       _integer(max_waiting, "max_waiting", 1), bool(reuse_prefixes),
                                       _integer(cache_block_rows, "cache_block_rows", 0),
                                       _integer(cache_blocks, "cache_blocks", 0))

    def submit(self, prompt: Sequence[int], *, max_new_tokens: int = 32, temperature: float = 0.0,
               top_k: int = 0, top_p: float = 1.0, seed: int = 0, stop_tokens: Sequence[int] = (),
               encoder_inputs: Optional[Mapping[str, Any]] = None, num_beams: int = 1,
               length_penalty: float = 1.0, early_stopping: Union[bool, str] = False,
               num_return_sequences: int = 1, no_repeat_ngram_size: int = 0,
               suppress_tokens: Sequence[int] = (), begin_suppress_tokens: Sequence[int] = ()) -> Request:
        """Queues a generation of ``prompt`` (token ids) with its own options
        (as Model.generate's) and returns at once. A prompt that cannot run
        (empty, ids outside the vocabulary, longer than the cache) raises
        here; a generation that fills the cache ends with "length".

        An encoder-decoder's request (Whisper, T5) gives its encoder's
        inputs as ``encoder_inputs`` (``{"input_features": array}``, one row),
        copied here; ``prompt`` is the decoder's start ids. Its encoder runs
        alone in a step of its own, then its tokens join the others'.

        ``num_beams`` > 1 (or ``num_return_sequences`` > 1) queues a beam
        search with Model.generate's beam options: it takes a sequence per
        beam (it waits until that many are free; more beams than
        ``max_sequences`` raise), its beams' tokens run in the steps with
        the others', and forked beams share their cache blocks until they
        write into them. Request.hypotheses() gives what it found; preempted
        for blocks, it starts again."""
        arguments = _generation_arguments(prompt, max_new_tokens, temperature, top_k, top_p, seed, stop_tokens)
        search = _beam_search_arguments(num_beams, num_return_sequences, max_new_tokens, temperature, stop_tokens,
                                        length_penalty, early_stopping, no_repeat_ngram_size, suppress_tokens,
                                        begin_suppress_tokens)
        if encoder_inputs is not None and not isinstance(encoder_inputs, Mapping):
            raise TypeError(f"encoder_inputs must be a mapping of input names to arrays, got "
                            f"{type(encoder_inputs).__name__}")
        if search is not None:
            return Request(self._native.submit_beam_search(arguments[0], *search, dict(encoder_inputs or {})))
        return Request(self._native.submit(*arguments, dict(encoder_inputs or {})))

    def shutdown(self) -> None:
        """Cancels every request not yet ended and stops; submit raises after."""
        self._native.shutdown()

    @property
    def running(self) -> int:
        """Requests generating now."""
        return self._native.running

    @property
    def waiting(self) -> int:
        """Requests waiting for a place."""
        return self._native.waiting

    @property
    def max_sequences(self) -> int:
        return self._native.max_sequences

    @property
    def step_tokens(self) -> int:
        return self._native.step_tokens

    @property
    def max_sequence_tokens(self) -> int:
        """The most tokens one sequence's cache holds: its prompt and the
        tokens fed back after it (a generation ends there, "length")."""
        return self._native.max_sequence_tokens

    @property
    def cache_blocks(self) -> int:
        """The paged key/value cache's blocks (0: not paged)."""
        return self._native.cache_blocks

    @property
    def cache_blocks_used(self) -> int:
        """The blocks the requests generating hold, as of the last step (the
        caches kept of finished requests for prefix reuse hold blocks too,
        given back when a step needs them)."""
        return self._native.cache_blocks_used

    def __enter__(self) -> "Scheduler":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return (f"<ein.Scheduler of {self.model.name!r}: {self.running} of {self.max_sequences} sequences "
                f"generating, {self.waiting} waiting>")
