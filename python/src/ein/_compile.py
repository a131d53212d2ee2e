"""ein.compile: a model's text or file to a runnable ein.Model."""
from __future__ import annotations

import os
import warnings
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

from . import _ein
from ._errors import CompileError, Diagnostic, check_choice, did_you_mean
from ._model import Model, _check_device, _check_threads

Source = Union[str, os.PathLike]
WeightsPath = Union[str, os.PathLike]
Weights = Union[WeightsPath, Sequence[WeightsPath], Mapping[str, Any], None]

# Where a model given as text is said to be, in locations and the artifact.
_TEXT_FILENAME = "<source>"

_TARGETS = ("cpu", "cuda")
_PRECISIONS = ("fp32", "bf16", "fp16", "int8", "int4")


def _read_source(source: Source, filename: Optional[str]) -> Tuple[str, str]:
    """(text, filename): a path-like or a one-line string is a file to read,
    a string with a newline is the model itself."""
    if isinstance(source, str) and "\n" in source:
        return source, filename or _TEXT_FILENAME
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"source must be a model's text or a path, got {type(source).__name__}")
    path = os.fspath(source)
    with open(path, encoding="utf-8") as file:
        return file.read(), filename or path


def _weight_paths(weights: Union[WeightsPath, Sequence[WeightsPath]]) -> List[str]:
    """The files and checkpoint folders ``weights`` names: one path, or a list
    or tuple of them, read as one by the compiler."""
    paths = [weights] if isinstance(weights, (str, os.PathLike)) else weights
    if not isinstance(paths, (list, tuple)) or not all(isinstance(path, (str, os.PathLike)) for path in paths):
        raise TypeError("weights must be a path (a file or a checkpoint folder), a list of paths or a mapping of "
                        f"names to arrays, got {weights!r}")
    if not paths:
        raise ValueError("weights=[] names no weights files")
    return [os.fspath(path) for path in paths]


def _weight_arrays(weights: Mapping[str, Any]) -> List[Tuple[str, Any]]:
    for name in weights:
        if not isinstance(name, str):
            raise TypeError(f"weight names must be strings, got {name!r}")
    return list(weights.items())


def _dims(dims: Optional[Mapping[str, Union[int, Tuple[int, int]]]], declared: Optional[List[Tuple[str, str]]]) -> dict:
    """{name: (min, max)}: an integer pins a dim, a (min, max) pair makes it
    ranged. ``declared`` lists the model's dims (None when its text does not
    parse: the compiler says why); a name it lacks is a CompileError in
    Python words."""
    if dims is not None and not isinstance(dims, Mapping):
        raise TypeError(f"dims must be a mapping of dim names to sizes or (min, max) pairs, got {type(dims).__name__}")
    kinds = dict(declared or [])
    known = list(kinds)
    for name, size in (dims or {}).items():
        message = None
        if declared is not None and name not in kinds:
            message = (f"dims={{{name!r}: {size!r}}}: the model has no dim {name!r}{did_you_mean(str(name), known)} "
                       f"(dims: {', '.join(known) or 'none'})")
        elif kinds.get(name) == "position" and isinstance(size, int):
            message = (f"dims={{{name!r}: {size!r}}}: {name!r} is the model's position (the tokens its session "
                       f"state holds before a run), which takes a range: dims={{{name!r}: (0, {size!r})}}")
        if message:
            raise CompileError([Diagnostic("error", None, None, None, message, message)])
    checked = {}
    for name, size in (dims or {}).items():
        if isinstance(size, int) and not isinstance(size, bool) and size > 0:
            checked[str(name)] = (size, size)
        elif (isinstance(size, tuple) and len(size) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in size)
              and 0 <= size[0] <= size[1]):
            checked[str(name)] = size
        else:
            raise ValueError(f"dim {name!r} must be a positive integer or a (min, max) pair with 0 <= min <= max, "
                             f"got {size!r}")
    return checked


ConfigScalar = Union[bool, int, float, str]
ConfigValue = Union[ConfigScalar, Sequence[ConfigScalar]]


def _configs(config: Optional[Mapping[str, ConfigValue]]) -> dict:
    """{name: value}: values of the configs the model declares (``einc --config``)."""
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping of config names to values, got {type(config).__name__}")
    scalar = (bool, int, float, str)
    values = {}
    for name, value in config.items():
        # A list config's items (config.json's per-layer "layer_types"), as a list.
        if isinstance(name, str) and isinstance(value, (list, tuple)) and all(isinstance(item, scalar)
                                                                              for item in value):
            value = list(value)
        elif not isinstance(name, str) or not isinstance(value, scalar):
            raise TypeError(f"config {name!r}: a config's value is true or false, a number, a string "
                            f"or a list of them, got {value!r}")
        values[name] = value
    return values


def _diagnostics(native) -> List[Diagnostic]:
    return [
        Diagnostic(severity, file or None, line if file else None, col if file else None, message, rendered)
        for severity, file, line, col, message, rendered in native
    ]


def compile(
    source: Source,
    weights: Weights = None,
    *,
    dims: Optional[Mapping[str, Union[int, Tuple[int, int]]]] = None,
    config: Optional[Mapping[str, ConfigValue]] = None,
    precision: str = "fp32",
    group_size: Optional[int] = None,
    target: Optional[str] = None,
    device: Optional[str] = None,
    dump_ir: Optional[Union[str, os.PathLike]] = None,
    random_weights: Optional[int] = None,
    threads: Optional[int] = None,
    filename: Optional[str] = None,
    _base_model_prefix: str = "",  # ein.from_pretrained's: its checkpoint's (weights::CheckpointNames)
) -> Model:
    """Compiles a model (the ein language, docs/LANGUAGE.md) into a Model.

    source: the model's text (a string with a newline) or the path of a
        ``.ein`` file (``str`` or path-like).
    weights: the parameters under their state_dict names: a ``.safetensors``
        path, a ``.gguf`` path (llama.cpp's file of a Llama, read under
        Hugging Face's names and dequantized, as ``einc --weights`` reads
        it), a checkpoint folder (``model.safetensors.index.json`` and its
        shards, ``model.safetensors``, or ``*.safetensors`` files), a list of
        such paths (read as one; a tensor in two of them is an error), or a
        mapping of name to array (NumPy, anything with
        ``__dlpack__`` such as a torch ``state_dict()``, or the buffer
        protocol), handed to the compiler in memory. Floating-point arrays
        of any precision become the model's f32; integer and bool parameters
        take exactly their declared dtype. Entries that are not parameters
        are ignored with a warning.
    dims: dim values that replace the model's: an integer pins one (``einc --dim
        NAME=SIZE``), a ``(min, max)`` pair makes it ranged (``--dim NAME=MIN..MAX``).
    config: values of the configs the model declares (``config NAME = ...``:
        True/False, a number or a string), as ``einc --config NAME=VALUE``.
    precision: "fp32", "bf16" (bf16 GEMM weights and arithmetic, f32
        accumulation), "fp16" (CUDA only), "int8" (CPU only: GEMM weights
        int8 per output channel, GEMM inputs quantized per row at run time)
        or "int4" (CPU only: GEMM weights int4 with a scale per group of 32
        along k, as llama.cpp's q4_0, GEMM inputs quantized per group).
    group_size: 32 with "int8": GEMM weights int8 with a scale per group of
        32 along k (llama.cpp's q8_0, whose values a GGUF q8_0 file keeps
        exactly), GEMM inputs quantized per group (``einc --group-size``); 0:
        int8's scale per output channel. None (the default): 32 for weights
        holding q8_0 tensors, else 0 (int4 always takes groups of 32).
    device: where the model runs: "cpu", "cuda" (the default GPU:
        $EIN_CUDA_DEVICE, else 0) or "cuda:N"; it is compiled for that
        device's kind. Default: the target's, else "cpu".
    target: the kind of device the artifact is for, "cpu" or "cuda" (einc
        --target); default: the device's. Compiling for "cuda" on a machine
        that cannot run it raises DeviceError (use einc to only write one).
    dump_ir: a folder that receives the IR before the first pass and after
        each (``einc --dump-ir``).
    random_weights: a seed for random parameters instead of ``weights``
        (benchmarks, tests).
    threads: kernel threads per run() call of the returned model; None (the
        default) is every CPU this process may use, as ``ein-run``'s.
    filename: the name locations give the model (default: the path, or
        "<source>" for text).

    Raises CompileError (with ``.file``, ``.line``, ``.col``) when the model
    or its weights are wrong; the message is einc's, with the source line.
    A dim in ``dims`` that the model lacks is a CompileError without a place;
    an unknown ``precision``, ``target`` or ``device`` is a ValueError.
    """
    precision = check_choice("precision", precision, _PRECISIONS, "precision")
    device = _check_device(device)
    kind = _ein.parse_device(device) if device is not None else None
    if target is None:
        target = kind or "cpu"
    target = check_choice("target", target, _TARGETS, "target", spellings={"gpu": "cuda"})
    if kind is not None and kind != target:
        raise ValueError(f"target={target!r} and device={device!r} disagree: a model compiled for {target} runs on "
                         f"{target} only (device={device!r} alone compiles for {kind})")
    threads = _check_threads(threads)
    text, name = _read_source(source, filename)
    if weights is not None and random_weights is not None:
        raise ValueError("give the parameters as weights=... (weights files or a folder, or a name -> array "
                         "mapping) or random_weights=SEED, not both")
    weight_paths = None if weights is None or isinstance(weights, Mapping) else _weight_paths(weights)
    arrays = _weight_arrays(weights) if isinstance(weights, Mapping) else None
    model, diagnostics, unused = _ein.compile_model(
        text, name, weight_paths, arrays, random_weights, _dims(dims, _ein.declared_dims(text)), _configs(config),
        _base_model_prefix, target, precision, group_size,
        os.fspath(dump_ir) if dump_ir is not None else "", threads, device)
    diagnostics = _diagnostics(diagnostics)
    if model is None:
        raise CompileError(diagnostics)
    for diagnostic in diagnostics:
        warnings.warn(str(diagnostic), stacklevel=2)
    for tensor in unused:
        warnings.warn(f"weights: tensor {tensor!r} is not a parameter of the model", stacklevel=2)
    return Model(model)
