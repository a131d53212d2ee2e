"""ein.from_pretrained and ein.export_ein: a Hugging Face checkpoint folder through ein's model library."""
from __future__ import annotations

import json
import os
import pathlib
import warnings
from typing import Mapping, Optional, Tuple, Union

from . import _ein
from ._compile import ConfigValue, Weights, _configs, _dims, compile
from ._errors import CompileError, Diagnostic
from ._model import Model

Dims = Optional[Mapping[str, Union[int, Tuple[int, int]]]]


def _folder(path: Union[str, os.PathLike]) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a checkpoint folder's path, got {type(path).__name__}")
    return os.fspath(path)


def _checked(error: str, result):
    """The native call's result, or its error (a bad folder) as a CompileError."""
    if error:
        raise CompileError([Diagnostic("error", None, None, None, error, error)])
    return result


def from_pretrained(
    path: Union[str, os.PathLike],
    *,
    precision: str = "fp32",
    group_size: Optional[int] = None,
    dims: Dims = None,
    config: Optional[Mapping[str, ConfigValue]] = None,
    weights: Weights = None,
    threads: Optional[int] = None,
    device: Optional[str] = None,
) -> Model:
    """Compiles a Hugging Face checkpoint folder (config.json and safetensors
    weights, one file or shards) into a Model, as ``einc --hf PATH``.

    The folder's architecture (config.json's ``architectures``) picks the
    model file of ein's library (``models/huggingface``, ``export_ein`` shows
    it); each of the file's dims and configs named as a field of config.json
    takes that field's value; ``dims`` and ``config`` override them. The
    weights are the folder's unless ``weights`` names others. A decoder keeps
    its key/value cache in the session (``Model.generate``, ``Scheduler``),
    sized by its ``cache`` dim (2048 rows unless ``dims={"cache": N}``).

    With the folder's tokenizer.json (and the ``tokenizers`` package), the
    model's ``tokenizer`` is set: ``Model.encode(texts)`` embeds text with an
    encoder, ``Model.generate(text)`` returns text. A classifier's
    ``labels`` are config.json's ``id2label`` by index.

    ``precision`` and ``group_size`` are ``ein.compile``'s.

    Raises CompileError for a folder without config.json, an architecture
    the library lacks, a config value its model file does not handle, a
    missing or misshapen tensor, or pickle-only weights.
    """
    text, filename, _, checkpoint_dims, checkpoint_configs, base_model_prefix = _checked(
        *_ein.read_checkpoint(_folder(path)))
    merged_dims = {**checkpoint_dims, **(dims or {})}
    merged_configs = {**checkpoint_configs, **_configs(config)}
    model = compile(text, weights if weights is not None else path, dims=merged_dims, config=merged_configs,
                    precision=precision, group_size=group_size, threads=threads, device=device, filename=filename,
                    _base_model_prefix=base_model_prefix)
    model.tokenizer = _tokenizer(path)
    model.labels = _labels(path)
    return model


def _labels(path):
    """config.json's id2label as a list (label i at index i), where it names classes 0 .. n - 1."""
    id2label = json.loads((pathlib.Path(path) / "config.json").read_text()).get("id2label")
    if not isinstance(id2label, dict):
        return None
    try:
        by_index = {int(index): str(label) for index, label in id2label.items()}
    except ValueError:
        return None
    return [by_index[i] for i in range(len(by_index))] if sorted(by_index) == list(range(len(by_index))) else None


def _tokenizer(path):
    """The folder's tokenizer.json through the tokenizers package, where both are here."""
    if not (pathlib.Path(path) / "tokenizer.json").is_file():
        return None
    try:
        from ._llm_text import Tokenizer
        return Tokenizer(path)
    except ImportError:
        warnings.warn(f"{path}: tokenizer.json is not read without the tokenizers package (pip install tokenizers)",
                      stacklevel=3)
        return None


def export_ein(path: Union[str, os.PathLike], *, dims: Dims = None,
               config: Optional[Mapping[str, ConfigValue]] = None) -> str:
    """The model file ``from_pretrained`` compiles for the checkpoint folder,
    with config.json's values (and ``dims``, ``config``) written in as the
    declarations' defaults: a model to read, edit and compile with
    ``ein.compile(text, weights=path)`` (``einc --hf PATH --emit=ein``)."""
    return _checked(*_ein.checkpoint_text(_folder(path), _dims(dims, None), _configs(config)))
