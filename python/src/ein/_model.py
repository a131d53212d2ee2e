"""ein.Model: a loaded artifact, run from NumPy and DLPack arrays."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _ein

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
    [0, id_bound)).
    """

    name: str
    dtype: str
    shape: Tuple[Union[int, str], ...]
    id_bound: Optional[int] = None

    @property
    def numpy_dtype(self) -> np.dtype:
        """The NumPy dtype run() takes and returns for this tensor (uint16 bit patterns for bf16)."""
        return _NUMPY_DTYPES[self.dtype]


def _tensor_infos(native_list) -> List[TensorInfo]:
    return [TensorInfo(name, dtype, tuple(shape), bound or None) for name, dtype, shape, bound in native_list]


def _forwarded(attribute: str, doc: str) -> property:
    """A read-only property that returns the native model's attribute."""
    return property(lambda self: getattr(self._native, attribute), doc=doc)


def _check_threads(threads: int) -> int:
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an integer of at least 1, got {threads!r}")
    return threads


class Model:
    """A compiled model (ein.compile) or a loaded artifact (ein.load).

    Immutable and thread-safe: any number of Python threads may call run()
    at once; each call borrows its own working memory, and the GIL is
    released while the kernels run. ``threads`` kernel threads serve each
    call unless run() is given its own.
    """

    def __init__(self, native: "_ein._Model"):
        self._native = native

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
    precision = _forwarded("precision", 'The artifact\'s precision: "fp32", "bf16", "fp16" or "int8".')
    threads = _forwarded("threads", "Kernel threads per run() call.")

    def describe(self) -> str:
        """What the artifact holds, as ``ein-inspect`` prints it: inputs,
        outputs, parameters, memory and one line per kernel step."""
        return self._native.describe()

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
        threads = 0 if threads is None else _check_threads(threads)
        return self._native.run(dict(inputs), dict(out or {}), threads)

    def generate(self, prompt: Sequence[int], *, max_new_tokens: int = 32, temperature: float = 0.0,
                 top_k: int = 0, top_p: float = 1.0, seed: int = 0, stop_tokens: Sequence[int] = (),
                 threads: Optional[int] = None) -> List[int]:
        """Generates tokens with a decoder whose key/value cache is session state.

        Runs ``prompt`` (token ids) in a new session, then one decode step per
        new token, and returns the new tokens (ids in, ids out: pair it with a
        tokenizer, e.g. the ``tokenizers`` package). ``temperature`` 0 is
        greedy; otherwise the logits are divided by it and cut to ``top_k``
        (0: all) and ``top_p`` (1: all), and ``seed`` makes the draw
        reproducible. Generation stops after any of ``stop_tokens``. The model
        needs an integer ``ids`` input [1, t] and a ``logits`` output [1, t, vocab].
        """
        threads = 0 if threads is None else _check_threads(threads)
        return self._native.generate([int(t) for t in prompt], int(max_new_tokens), float(temperature), int(top_k),
                                     float(top_p), int(seed), [int(t) for t in stop_tokens], threads)

    def __repr__(self) -> str:
        signature = lambda infos: ", ".join(f"{i.name}: {i.dtype}{list(i.shape)}" for i in infos)
        return f"<ein.Model {self.name!r} ({signature(self.inputs)}) -> ({signature(self.outputs)})>"


def load(path: Union[str, os.PathLike], *, threads: int = 1) -> Model:
    """Loads and verifies an artifact (.einb) written by einc or Model.save.

    A malformed artifact raises ArtifactError; a missing file FileNotFoundError.
    """
    return Model(_ein._Model.load(os.fspath(path), _check_threads(threads)))
