"""ein.Model: a loaded artifact, run from NumPy and DLPack arrays."""
from __future__ import annotations

import json
import math
import operator
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _ein
from ._errors import InputError, did_you_mean

if TYPE_CHECKING:
    from ._session import Session

# The runtime's element types as NumPy holds them; bf16, which NumPy lacks,
# comes back as its uint16 bit patterns.
_NUMPY_DTYPES = {
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(np.uint16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "bool": np.dtype(np.bool_),
}


@dataclass(frozen=True)
class TensorInfo:
    """An input or output of a model.

    ``dtype`` is the model language's name ("f32", "f16", "bf16", "i32",
    "i64", "bool"); ``shape`` the sizes of its axes, where an axis that
    depends on ranged dims is its expression over them ("b", "t + 1"; the
    ranges are ``Model.dims``), as onnxruntime names symbolic dims;
    ``id_bound`` is set on integer inputs that index a table (ids must be in
    [0, id_bound)). ``first_run`` marks an input read only at a sequence's
    first run (an encoder-decoder's encoder input, whose result the session
    keeps: ``keep()`` in the language).
    """

    name: str
    dtype: str
    shape: Tuple[Union[int, str], ...]
    id_bound: Optional[int] = None
    first_run: bool = False

    @property
    def numpy_dtype(self) -> np.dtype:
        """The NumPy dtype run() takes and returns for this tensor (uint16 bit patterns for bf16)."""
        return _NUMPY_DTYPES[self.dtype]


def _tensor_infos(native_list) -> List[TensorInfo]:
    return [TensorInfo(name, dtype, tuple(shape), bound or None, first_run)
            for name, dtype, shape, bound, first_run in native_list]


def _forwarded(attribute: str, doc: str) -> property:
    """A read-only property that returns the native model's attribute."""
    return property(lambda self: getattr(self._native, attribute), doc=doc)


def _check_threads(threads: Optional[int]) -> int:
    """The native spelling of ``threads``: 0 for None (the default: the
    runtime's, the CPUs this process may use, as ein-run's)."""
    if threads is None:
        return 0
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"threads must be an integer of at least 1 (or None: every CPU this process may use), "
                         f"got {threads!r}")
    return threads


def default_thread_count() -> int:
    """The kernel threads a model gets when ``threads`` is not given: the
    CPUs this process may use (its affinity mask), as ``ein-run``'s default."""
    return _ein.default_thread_count()


# Other tools' words for our devices.
_DEVICE_SPELLINGS = {"gpu": "cuda", "cuda0": "cuda:0", "host": "cpu"}


def _check_device(device: Optional[str], argument: str = "device") -> Optional[str]:
    """``device`` when it names a device ("cpu", "cuda", "cuda:N"), else a
    ValueError in Python words."""
    if device is None:
        return None
    if not isinstance(device, str):
        raise TypeError(f"{argument} must be a string such as 'cpu', 'cuda' or 'cuda:1', got {device!r}")
    if _ein.parse_device(device) is None:
        known = ["cpu", "cuda", "cuda:0"]
        # A higher cutoff than names get: "tpu" is one letter from "cpu" but no typo of it.
        hint = did_you_mean(device.strip().lower(), known, spellings=_DEVICE_SPELLINGS, cutoff=0.7)
        raise ValueError(f"{argument}={device!r}: unknown device{hint} (devices: 'cpu', 'cuda', 'cuda:N' for the "
                         f"N-th GPU)")
    return device


def _unknown_names(given: Mapping[str, Any], known: Sequence[str], what: str) -> None:
    """InputError for the first key of ``given`` that is not one of
    ``known``, with the closest known name."""
    for name in given:
        if isinstance(name, str) and name not in known:
            error = InputError(f'the model has no {what} "{name}"{did_you_mean(name, known, quote=chr(34))} '
                               f"({what}s: {', '.join(known) or 'none'})")
            error.name = name
            raise error


def _integer(value: Any, argument: str, minimum: int, meaning: str = "") -> int:
    """``value`` as an int (NumPy integers too) of at least ``minimum``."""
    try:
        number = operator.index(value)
    except TypeError:
        number = None
    if number is None or isinstance(value, bool) or number < minimum:
        raise ValueError(f"{argument} must be an integer >= {minimum}{meaning}, got {value!r}")
    return number


def _is_prompt_list(prompt) -> bool:
    """Whether Model.generate was given prompts (a list of id lists), not one prompt."""
    if isinstance(prompt, (str, bytes)) or not isinstance(prompt, Sequence):
        return False
    return len(prompt) > 0 and all(isinstance(p, Sequence) and not isinstance(p, (str, bytes)) for p in prompt)


def _encoder_rows(encoder_inputs: Mapping[str, Any], inputs) -> Optional[List[dict]]:
    """The rows of a batch of encoder inputs ([B, ...] arrays of inputs the
    model takes [1, ...]), one mapping a row; None for one row."""
    shapes = {info.name: info.shape for info in inputs}
    batches = {}
    for name, value in encoder_inputs.items():
        array = np.asarray(value)
        shape = shapes.get(name)
        if shape and shape[0] == 1 and array.ndim == len(shape) and array.shape[0] != 1:
            batches[name] = array.shape[0]
    if not batches:
        return None
    if len(set(batches.values())) > 1 or len(batches) < len(encoder_inputs):
        sizes = ", ".join(f"{name}: {np.asarray(value).shape[0] if np.ndim(value) else 'a scalar'}"
                          for name, value in encoder_inputs.items())
        raise InputError(f"the encoder inputs' batches differ ({sizes}): give each the same rows")
    rows = next(iter(batches.values()))
    return [{name: np.asarray(value)[row:row + 1] for name, value in encoder_inputs.items()} for row in range(rows)]


def _generation_arguments(prompt: Sequence[int], max_new_tokens: int, temperature: float, top_k: int, top_p: float,
                          seed: int, stop_tokens: Sequence[int]) -> tuple:
    """The arguments of a generation, checked in Python words, as the native
    calls take them."""
    if isinstance(prompt, (str, bytes)) or not isinstance(prompt, Sequence) and not hasattr(prompt, "__iter__"):
        raise TypeError(f"prompt must be a sequence of token ids, got {type(prompt).__name__} (a tokenizer's "
                        f"encode(text).ids gives them)")
    prompt = [_integer(t, "a prompt token id", 0) for t in prompt]
    stop_tokens = [_integer(t, "a stop token id", 0) for t in stop_tokens]
    if not prompt:
        raise ValueError("prompt=[]: the prompt must hold at least one token id")
    try:
        temperature, top_p = float(temperature), float(top_p)
    except (TypeError, ValueError):
        raise TypeError(f"temperature and top_p must be numbers, got {temperature!r} and {top_p!r}") from None
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be a finite number >= 0 (0: greedy), got {temperature!r}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must lie in (0, 1] (1: every token), got {top_p!r}")
    return (prompt, _integer(max_new_tokens, "max_new_tokens", 0), temperature,
            _integer(top_k, "top_k", 0, " (0: every token)"), top_p, _integer(seed, "seed", 0), stop_tokens)


def _beam_search_arguments(num_beams: int, num_return_sequences: int, max_new_tokens: int, temperature: float,
                           stop_tokens: Sequence[int], length_penalty: float, early_stopping: Union[bool, str],
                           no_repeat_ngram_size: int, suppress_tokens: Sequence[int],
                           begin_suppress_tokens: Sequence[int]) -> Optional[tuple]:
    """The arguments of a beam search after its prompt, checked in Python
    words, as the native calls take them; None for one beam and one
    sequence (a plain generation, which takes no beam processors)."""
    beams = _integer(num_beams, "num_beams", 1)
    returned = _integer(num_return_sequences, "num_return_sequences", 1)
    processors = (no_repeat_ngram_size, tuple(suppress_tokens), tuple(begin_suppress_tokens))
    if beams == 1 and returned == 1:
        if processors != (0, (), ()):
            raise ValueError("no_repeat_ngram_size, suppress_tokens and begin_suppress_tokens go with num_beams > 1")
        return None
    if returned > beams:
        raise ValueError(f"num_return_sequences must not exceed num_beams ({beams}), got {returned}")
    if temperature != 0.0:
        raise ValueError("beam search is greedy: temperature must be 0 with num_beams > 1")
    if early_stopping not in (False, True, "never"):
        raise ValueError(f'early_stopping must be False, True or "never", got {early_stopping!r}')
    try:
        length_penalty = float(length_penalty)
    except (TypeError, ValueError):
        raise TypeError(f"length_penalty must be a number, got {length_penalty!r}") from None
    return (beams, _integer(max_new_tokens, "max_new_tokens", 1), length_penalty, str(early_stopping).lower(),
            returned, [_integer(t, "a stop token id", 0) for t in stop_tokens],
            _integer(no_repeat_ngram_size, "no_repeat_ngram_size", 0),
            [_integer(t, "a suppressed token id", 0) for t in suppress_tokens],
            [_integer(t, "a suppressed token id", 0) for t in begin_suppress_tokens])


def _searched(found: Sequence[tuple], returned: int):
    """A beam search's result as Model.generate returns it: the best
    hypothesis's tokens, or with num_return_sequences > 1 the best that many."""
    return found[0][0] if returned == 1 else [tokens for tokens, _ in found]


class Model:
    """A compiled model (ein.compile) or a loaded artifact (ein.load).

    Immutable and thread-safe: any number of Python threads may call run()
    at once; each call borrows its own working memory, and the GIL is
    released while the kernels run. ``threads`` kernel threads serve each
    call unless run() is given its own. For a decoder's key/value cache,
    per-step runs and streaming generation, see session().
    """

    def __init__(self, native: "_ein._Model"):
        self._native = native
        self._input_names = tuple(name for name, *_ in native.inputs)
        self._output_names = tuple(name for name, *_ in native.outputs)
        # A Hugging Face tokenizer (ein.from_pretrained sets it from the
        # folder's tokenizer.json): text in for encode() and generate().
        self.tokenizer = None
        # A classifier's class names by index (ein.from_pretrained sets them
        # from config.json's id2label): labels[logits.argmax(-1)].
        self.labels = None

    @property
    def inputs(self) -> List[TensorInfo]:
        """The model's inputs, in declaration order."""
        return _tensor_infos(self._native.inputs)

    @property
    def outputs(self) -> List[TensorInfo]:
        """The model's outputs, in declaration order."""
        return _tensor_infos(self._native.outputs)

    @property
    def dims(self) -> Dict[str, Tuple[int, int]]:
        """The ranged dims, ``{name: (min, max)}``: each run reads their values
        from the inputs' shapes. Empty for a model of fixed shapes."""
        return dict(self._native.dims)

    name = _forwarded("name", "The artifact's path, or the model's file name for a compiled model.")
    target = _forwarded("target", 'The device the artifact was compiled for: "cpu" or "cuda".')
    precision = _forwarded("precision", 'The artifact\'s precision: "fp32", "bf16", "fp16", "int8" or "int4".')
    threads = _forwarded("threads", "Kernel threads per run() call (by default every CPU this process may use).")
    device = _forwarded("device", 'The device the model runs on: "cpu", "cuda" or "cuda:N".')

    def describe(self) -> str:
        """What the artifact holds, as ``ein-inspect`` prints it: inputs,
        outputs, parameters, memory and one line per kernel step."""
        return self._native.describe()

    def inspect(self) -> Dict[str, Any]:
        """What the artifact holds as ``ein-inspect --json`` prints it: the
        dims, inputs, outputs, parameters and states; every tensor with its
        placement (``storage``, ``offset``, ``bytes``); each step with its
        sizes, the tensors it reads and writes (``operands``), the source
        locations of the model ops it computes (``sources``), its block's
        ``namespace`` and the passes that fused it (``fused_by``)."""
        return json.loads(self._native.inspect())

    def input_shapes(self, dims: Optional[Mapping[str, int]] = None) -> Dict[str, Tuple[int, ...]]:
        """Each input's shape when the ranged dims take the values in ``dims``
        (by name; a dim not given takes its largest value)."""
        ranges = self.dims
        _unknown_names(dims or {}, list(ranges), "dim")
        values = [int((dims or {}).get(name, high)) for name, (_, high) in ranges.items()]
        shapes = self._native.input_shapes(values)
        return {info.name: tuple(shape) for info, shape in zip(self.inputs, shapes)}

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Writes the artifact (.einb) to ``path``; ``ein.load`` reads it back."""
        self._native.save(os.fspath(path))

    def run(self, inputs: Mapping[str, Any], *, out: Optional[Mapping[str, Any]] = None,
            threads: Optional[int] = None) -> Dict[str, np.ndarray]:
        """Runs the model; returns ``{output name: array}``.

        ``inputs`` maps every input name to an array of the model's dtype and
        shape (see ``inputs``; an axis sized by a ranged dim takes any size in
        its range, the same in every input that names it): a NumPy array, anything with
        ``__dlpack__`` on the CPU (e.g. a torch tensor) or with the buffer
        protocol (``memoryview``, ``array.array``). C-contiguous arrays are
        read in place; other views are copied first. A wrong name, dtype or
        shape raises InputError.

        ``out`` maps output names to writable C-contiguous arrays of the
        output's dtype and shape at these inputs, which are written in place and returned;
        the other outputs come back in new NumPy arrays.

        ``threads`` overrides the model's kernel threads for this call (a
        runner per thread count is made on first use; they share the weights).
        """
        if not isinstance(inputs, Mapping):
            raise TypeError(f"inputs must be a mapping of input names to arrays, got {type(inputs).__name__}")
        _unknown_names(inputs, self._input_names, "input")
        if out:
            _unknown_names(out, self._output_names, "output")
        return self._native.run(dict(inputs), dict(out or {}), _check_threads(threads))

    def encode(self, texts: Union[str, Sequence[str]], *, batch_size: int = 32,
               output: str = "sentence_embedding") -> np.ndarray:
        """Embeds text with an encoder and its tokenizer (a sentence-transformers
        folder through ein.from_pretrained): each batch of up to ``batch_size``
        texts is tokenized, padded to its longest (truncated to what the
        model takes) and run; returns ``output`` ([len(texts), ...]) for one
        text per row, or one row for a single string.
        """
        tokenizer = self._text_tokenizer("encode")
        single = isinstance(texts, str)
        texts = [texts] if single else list(texts)
        if not all(isinstance(text, str) for text in texts):
            raise TypeError("encode takes a string or a list of strings")
        if output not in self._output_names:
            raise ValueError(f"the model has no output {output!r} (its outputs: {', '.join(self._output_names)})")
        size = _integer(batch_size, "batch_size", 1)
        # The texts' axis (the ids input's second) takes at most its dim's maximum, or its fixed size.
        length = self.inputs[0].shape[1]
        longest = length if isinstance(length, int) else self.dims.get(length, (1, 1 << 30))[1]
        rows = []
        for start in range(0, len(texts), size):
            ids, mask, types = tokenizer.encode_batch(texts[start:start + size], max_length=longest)
            available = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            inputs = {name: available[name] for name in self._input_names}
            rows.append(self.run(inputs)[output])
        embedded = np.concatenate(rows) if rows else np.zeros((0,))
        return embedded[0] if single else embedded

    def chat(self, messages: Sequence[Mapping[str, str]], **options) -> str:
        """The assistant's reply to ``messages`` (``[{"role": "user", "content": "..."}]``): the
        tokenizer's chat template (tokenizer_config.json's, rendered as transformers renders it,
        with the generation prompt) gives the prompt text, and ``generate`` its reply;
        ``options`` are generate's (max_new_tokens, temperature, ...)."""
        tokenizer = self._text_tokenizer("chat")
        prompt = tokenizer.apply_chat_template(list(messages))
        stops = list(options.pop("stop_tokens", ())) + (
            [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else [])
        # The template writes the special tokens itself.
        tokens = self.generate(tokenizer.encode(prompt, special_tokens=False), stop_tokens=stops, **options)
        return tokenizer.decode(tokens)

    def _text_tokenizer(self, what: str):
        if self.tokenizer is None:
            raise ValueError(f"{what} of text needs the model's tokenizer: ein.from_pretrained sets it from a "
                             "checkpoint folder's tokenizer.json (with the tokenizers package installed)")
        return self.tokenizer

    def generate(self, prompt: Union[str, Sequence[int], Sequence[Sequence[int]], None] = None, *,
                 max_new_tokens: int = 32,
                 temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0,
                 stop_tokens: Sequence[int] = (), threads: Optional[int] = None,
                 max_sequences: int = 16,
                 encoder_inputs: Optional[Mapping[str, Any]] = None, num_beams: int = 1,
                 length_penalty: float = 1.0, early_stopping: Union[bool, str] = False,
                 num_return_sequences: int = 1, no_repeat_ngram_size: int = 0,
                 suppress_tokens: Sequence[int] = (),
                 begin_suppress_tokens: Sequence[int] = (),
                 decoder_start_ids: Optional[Sequence[int]] = None) -> Union[str, List[int], List[List[int]]]:
        """Generates tokens with a decoder whose key/value cache is session state.

        Runs ``prompt`` (token ids) in a new session, then one decode step per
        new token, and returns the new tokens (ids in, ids out: pair it with a
        tokenizer, e.g. the ``tokenizers`` package). ``temperature`` 0 is
        greedy; otherwise the logits are divided by it and cut to ``top_k``
        (0: all) and ``top_p`` (1: all), and ``seed`` makes the draw
        reproducible. Generation stops after any of ``stop_tokens``, or where
        the cache is full. The model needs an integer ``ids`` input [1, t] and
        a ``logits`` output [1, t, vocab]. ``session().generate(...)`` yields
        the same tokens one at a time.

        Given a list of prompts, generates for all of them together (up to
        ``max_sequences`` sequences at once, continuously batched: a finished
        one's place goes to the next prompt; each run reads the weights once
        for all) where the model serves many sequences on the CPU, else one
        after another, and returns a list of results, each what its prompt
        gives alone.

        Given a string (with the model's tokenizer, which ein.from_pretrained
        attaches), generates from its tokens, stops at the tokenizer's end
        token too, and returns the new text.

        An encoder-decoder (Whisper, T5, BART, ...) takes its encoder's inputs as
        ``encoder_inputs`` (``{"input_features": array}``, or ``{"input_ids":
        ..., "attention_mask": ...}``), read at the first run, whose keys and
        values the decoder keeps; ``prompt`` (or ``decoder_start_ids``, as
        transformers names them) is then the decoder's start ids. Arrays of B
        rows (``[B, 80, 3000]`` features) give a list of B results, each
        row's as it alone gives, generated together as a list of prompts is.

        ``num_beams`` > 1 searches with that many beams as transformers'
        ``generate(num_beams=...)`` does (greedy): ``stop_tokens``
        are the end ids, ``length_penalty`` scales the length a finished
        hypothesis is scored by (its summed log-probabilities / length **
        length_penalty), ``early_stopping`` is False, True or "never" as in
        transformers, ``no_repeat_ngram_size``, ``suppress_tokens`` and
        ``begin_suppress_tokens`` (not as the first new token) are its logits
        processors. Returns the best hypothesis's tokens, or with
        ``num_return_sequences`` > 1 the best that many, best first. The
        beams run together, one run a step, sharing the encoder's keys and
        values and their common prefix's cache (ein::beamSearch); the
        searches of many prompts (or rows) run as one scheduler's requests,
        each beam a sequence of its ``max_sequences``.
        """
        if decoder_start_ids is not None:
            if prompt is not None:
                raise TypeError("give the decoder's start ids as prompt or as decoder_start_ids, not both")
            prompt = decoder_start_ids
        if prompt is None:
            raise TypeError("generate needs a prompt: token ids, a string, a list of prompts, or an "
                            "encoder-decoder's decoder_start_ids")
        search = _beam_search_arguments(num_beams, num_return_sequences, max_new_tokens, temperature, stop_tokens,
                                        length_penalty, early_stopping, no_repeat_ngram_size, suppress_tokens,
                                        begin_suppress_tokens)
        sequences = _integer(max_sequences, "max_sequences", 1)
        returned = 1 if search is None else search[4]
        if isinstance(prompt, str):
            tokenizer = self._text_tokenizer("generate")
            stops = list(stop_tokens) + ([tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else [])
            tokens = self.generate(tokenizer.encode(prompt), max_new_tokens=max_new_tokens, temperature=temperature,
                                   top_k=top_k, top_p=top_p, seed=seed, stop_tokens=stops, threads=threads,
                                   num_beams=num_beams, length_penalty=length_penalty, early_stopping=early_stopping,
                                   num_return_sequences=num_return_sequences,
                                   no_repeat_ngram_size=no_repeat_ngram_size, suppress_tokens=suppress_tokens,
                                   begin_suppress_tokens=begin_suppress_tokens)
            return tokenizer.decode(tokens) if returned == 1 else [tokenizer.decode(t) for t in tokens]
        rows = None  # an encoder-decoder's batch: a mapping of inputs a row
        if encoder_inputs is not None:
            if not isinstance(encoder_inputs, Mapping):
                raise TypeError("encoder_inputs must be a mapping of input names to arrays, got "
                                f"{type(encoder_inputs).__name__}")
            if _is_prompt_list(prompt):
                raise TypeError("encoder_inputs goes with one prompt of decoder ids (a list of ints)")
            _unknown_names(encoder_inputs, self._input_names, "input")
            rows = _encoder_rows(encoder_inputs, self.inputs)
        if rows is not None or _is_prompt_list(prompt):
            # Many prompts (or rows): one scheduler's requests where the model
            # serves many sequences on the CPU, else one after another.
            prompts = [prompt] * len(rows) if rows is not None else list(prompt)
            prompts = [_generation_arguments(p, max_new_tokens, temperature, top_k, top_p, seed, stop_tokens)[0]
                       for p in prompts]
            arguments = _generation_arguments(prompts[0], max_new_tokens, temperature, top_k, top_p, seed,
                                              stop_tokens)
            many = self._native.serves_many_sequences
            if search is None and many:
                return self._native.generate_many(prompts, *arguments[1:], _check_threads(threads),
                                                  min(sequences, len(prompts)), rows or [])
            if search is not None and many:
                found = self._native.beam_search_many(prompts, *search, _check_threads(threads),
                                                      min(sequences, len(prompts) * search[0]), rows or [])
                return [_searched(hypotheses, returned) for hypotheses in found]
            return [self.generate(p, max_new_tokens=max_new_tokens, temperature=temperature, top_k=top_k,
                                  top_p=top_p, seed=seed, stop_tokens=stop_tokens, threads=threads,
                                  encoder_inputs=row, num_beams=num_beams, length_penalty=length_penalty,
                                  early_stopping=early_stopping, num_return_sequences=num_return_sequences,
                                  no_repeat_ngram_size=no_repeat_ngram_size, suppress_tokens=suppress_tokens,
                                  begin_suppress_tokens=begin_suppress_tokens)
                    for p, row in zip(prompts, rows or [None] * len(prompts))]
        arguments = _generation_arguments(prompt, max_new_tokens, temperature, top_k, top_p, seed, stop_tokens)
        if search is None:
            return self._native.generate(*arguments, _check_threads(threads), dict(encoder_inputs or {}))
        found = self._native.beam_search(arguments[0], *search, _check_threads(threads), dict(encoder_inputs or {}))
        return _searched(found, returned)

    def session(self, *, threads: Optional[int] = None) -> "Session":
        """A new ein.Session of this model: one execution context whose state
        (a decoder's key/value cache) persists from run to run, with
        per-step run(), position, reset(), fork() and streaming generate()."""
        from ._session import Session
        return Session(self, threads=threads)

    def __repr__(self) -> str:
        signature = lambda infos: ", ".join(f"{i.name}: {i.dtype}{list(i.shape)}" for i in infos)
        return f"<ein.Model {self.name!r} ({signature(self.inputs)}) -> ({signature(self.outputs)})>"


def load(path: Union[str, os.PathLike], *, threads: Optional[int] = None, device: Optional[str] = None) -> Model:
    """Loads and verifies an artifact (.einb) written by einc or Model.save.

    threads: kernel threads per run() call; None (the default) is every CPU
        this process may use, as ``ein-run``'s default.
    device: where it runs: "cpu", "cuda" (the default GPU: $EIN_CUDA_DEVICE,
        else 0) or "cuda:N"; None (the default) is the device the artifact
        was compiled for.

    A malformed artifact raises ArtifactError; a missing file
    FileNotFoundError; an artifact compiled for another device than
    ``device``, or a device that is not available here, DeviceError.
    """
    return Model(_ein._Model.load(os.fspath(path), _check_threads(threads), _check_device(device)))
