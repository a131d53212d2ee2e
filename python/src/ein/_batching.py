"""Dynamic batching for serving: checks each request alone, merges the good
ones into one run (padding the dims that may be padded) and hands each
request exactly its own rows back.

Pure NumPy and ein.Model, no Triton: ein.serve's Triton model calls it, and
the tests call it directly.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ._errors import Error, InputError

Axis = Union[int, str]


class RequestError(ValueError):
    """One request is malformed; it fails alone, its batch-mates still run."""


@dataclass(frozen=True)
class Tensor:
    """An input or output as served: its axes after the batch axis are sizes
    or the names of ranged dims."""

    name: str
    numpy_dtype: np.dtype
    dtype: str
    axes: Tuple[Axis, ...]
    id_bound: Optional[int] = None


@dataclass(frozen=True)
class Signature:
    """What a model serves: every input and output starts with the batch
    dim; ``pad_dims`` are the ranged dims that requests of different sizes
    are padded to the largest in (with zeros: the model must read a zero in
    its mask input as padding)."""

    batch_dim: str
    dims: Mapping[str, Tuple[int, int]]
    inputs: Tuple[Tensor, ...]
    outputs: Tuple[Tensor, ...]
    pad_dims: Tuple[str, ...]

    @property
    def max_batch(self) -> int:
        return self.dims[self.batch_dim][1]


def _served_tensor(info, dims: Mapping[str, Tuple[int, int]], kind: str) -> Tensor:
    for axis in info.shape:
        if isinstance(axis, str) and axis not in dims:
            # An expression such as "t + 1": neither Triton's config nor padding can say it.
            raise ValueError(f'{kind} "{info.name}" has an axis sized {axis!r}; a served model sizes its axes '
                             "by a constant or by one ranged dim")
    if info.dtype == "bf16":
        raise ValueError(f'{kind} "{info.name}" is bf16, which Triton cannot hand to NumPy; serve f32 inputs and outputs '
                         "(a bf16 artifact computes in bf16 all the same)")
    return Tensor(info.name, info.numpy_dtype, info.dtype, tuple(info.shape[1:]), info.id_bound)


def signature(model, pad_dims: Sequence[str] = ()) -> Signature:
    """The served signature of an ein.Model (or an object with its
    ``inputs``, ``outputs`` and ``dims``); ValueError names what cannot be
    served: the first axis of every input and output must be one ranged dim."""
    dims = dict(model.dims)
    first_axes = {info.shape[0] if info.shape else None for info in [*model.inputs, *model.outputs]}
    batch_dim = next(iter(first_axes)) if len(first_axes) == 1 else None
    if batch_dim not in dims:
        raise ValueError("a served model needs a batch dim: a ranged dim that sizes the first axis of every input "
                         f"and output (here the first axes are {sorted(map(str, first_axes))}, ranged dims {sorted(dims)})")
    for dim in pad_dims:
        if dim not in dims or dim == batch_dim:
            raise ValueError(f"cannot pad dim {dim!r}: the ranged dims besides the batch dim {batch_dim!r} are "
                             f"{sorted(set(dims) - {batch_dim})}")
    return Signature(batch_dim, dims,
                     tuple(_served_tensor(info, dims, "input") for info in model.inputs),
                     tuple(_served_tensor(info, dims, "output") for info in model.outputs),
                     tuple(pad_dims))


def _shape_text(tensor: Tensor, batch_dim: str) -> str:
    return f"{tensor.dtype}[{', '.join(map(str, (batch_dim, *tensor.axes)))}]"


def check_request(sig: Signature, arrays: Mapping[str, np.ndarray]) -> Dict[str, int]:
    """The dims of one request (batch dim included); RequestError names the
    input and says what was expected and what came."""
    unknown = sorted(set(arrays) - {tensor.name for tensor in sig.inputs})
    if unknown:
        raise RequestError(f'unknown input "{unknown[0]}"; the model takes {[t.name for t in sig.inputs]}')
    values: Dict[str, Tuple[int, str]] = {}  # dim -> (value, where it was read)
    for tensor in sig.inputs:
        if tensor.name not in arrays:
            raise RequestError(f'input "{tensor.name}" is missing')
        array = np.asarray(arrays[tensor.name])
        expected = _shape_text(tensor, sig.batch_dim)
        if array.dtype != tensor.numpy_dtype or array.ndim != 1 + len(tensor.axes):
            raise RequestError(f'input "{tensor.name}" expects {expected}, got {array.dtype}{list(array.shape)}')
        for axis, (size, declared) in enumerate(zip(array.shape, (sig.batch_dim, *tensor.axes))):
            if isinstance(declared, int):
                if size != declared:
                    raise RequestError(f'input "{tensor.name}" expects {expected}, got {array.dtype}{list(array.shape)}')
                continue
            low, high = sig.dims[declared]
            if not low <= size <= high:
                raise RequestError(f'input "{tensor.name}" axis {axis} is {size}, but {declared} ranges over '
                                   f"{low}..{high}")
            if declared in values and values[declared][0] != size:
                raise RequestError(f'input "{tensor.name}" axis {axis} is {size}, but {declared} = '
                                   f"{values[declared][0]} (from {values[declared][1]})")
            values.setdefault(declared, (size, f'input "{tensor.name}" axis {axis}'))
        if tensor.id_bound is not None and array.size and (array.min() < 0 or array.max() >= tensor.id_bound):
            bad = array[(array < 0) | (array >= tensor.id_bound)].flat[0]
            raise RequestError(f'input "{tensor.name}" holds id {bad}, outside [0, {tensor.id_bound})')
    return {dim: value for dim, (value, _) in values.items()}


@dataclass
class _Member:
    index: int
    arrays: Mapping[str, np.ndarray]
    dims: Dict[str, int]


def _merged_input(tensor: Tensor, batch_dim: str, members: List[_Member], run_dims: Dict[str, int]) -> np.ndarray:
    """The members' arrays one after the other along the batch axis, each
    zero-padded to the run's dims."""
    shape = tuple(run_dims[a] if isinstance(a, str) else a for a in (batch_dim, *tensor.axes))
    merged = np.zeros(shape, tensor.numpy_dtype)
    row = 0
    for member in members:
        array = np.asarray(member.arrays[tensor.name])
        merged[(slice(row, row + array.shape[0]), *(slice(0, n) for n in array.shape[1:]))] = array
        row += array.shape[0]
    return merged


def _own_rows(output: np.ndarray, tensor: Tensor, row: int, dims: Dict[str, int], batch_dim: str) -> np.ndarray:
    """A member's rows of a merged output, its padded axes cut back to its own sizes."""
    own = (slice(row, row + dims[batch_dim]), *(slice(0, dims[a]) if isinstance(a, str) else slice(None)
                                                 for a in tensor.axes))
    return np.ascontiguousarray(output[own])


Result = Union[Dict[str, np.ndarray], Exception]


def run_batch(model, sig: Signature, requests: Sequence[Mapping[str, np.ndarray]],
              max_padding: float = 1.25) -> List[Result]:
    """Runs requests together; returns, in their order, each request's
    outputs (its own rows) or the exception that failed it (see iter_batch)."""
    results: List[Result] = [RuntimeError("no result")] * len(requests)
    for index, result in iter_batch(model, sig, requests, max_padding):
        results[index] = result
    return results


def iter_batch(model, sig: Signature, requests: Sequence[Mapping[str, np.ndarray]],
               max_padding: float = 1.25) -> Iterator[Tuple[int, Result]]:
    """Runs requests together, yielding (request index, its outputs or the
    exception that failed it) as soon as each is known, so that a server can
    answer the requests of a short run before a long one has finished.

    Each request is checked alone first, so a malformed one fails without
    touching the others. The good ones are grouped by the dims they cannot be
    padded in, and each group is cut into runs that keep the padding within
    ``max_padding`` times the real elements (see _runs), each padded to its
    largest value of each pad dim; the cheapest runs go first. Should a
    merged run still fail (a model's own run-time check), its requests run
    one by one, so only the offending one fails.
    """
    groups: Dict[Tuple[Tuple[str, int], ...], List[_Member]] = {}
    for index, arrays in enumerate(requests):
        try:
            dims = check_request(sig, arrays)
        except RequestError as error:
            yield index, error
            continue
        key = tuple(sorted((d, v) for d, v in dims.items() if d != sig.batch_dim and d not in sig.pad_dims))
        groups.setdefault(key, []).append(_Member(index, arrays, dims))

    runs = [run for group in groups.values() for run in _runs(group, sig, max_padding)]
    for members in sorted(runs, key=lambda run: _padded_elements(run, sig)):
        if len(members) == 1:
            yield members[0].index, _run_alone(model, members[0])
            continue
        run_dims = {dim: max(m.dims[dim] for m in members) for dim in members[0].dims}
        run_dims[sig.batch_dim] = sum(m.dims[sig.batch_dim] for m in members)
        try:
            outputs = model.run({t.name: _merged_input(t, sig.batch_dim, members, run_dims) for t in sig.inputs})
        except Error:
            for member in members:
                yield member.index, _run_alone(model, member)
            continue
        row = 0
        for member in members:
            yield member.index, {t.name: _own_rows(outputs[t.name], t, row, member.dims, sig.batch_dim)
                                 for t in sig.outputs}
            row += member.dims[sig.batch_dim]


def _padded_elements(run: List[_Member], sig: Signature) -> int:
    """Rows times the padded size of a run: what it costs, roughly."""
    rows = sum(m.dims[sig.batch_dim] for m in run)
    return rows * int(np.prod([max(m.dims[d] for m in run) for d in sig.pad_dims], dtype=np.int64))


def _runs(group: List[_Member], sig: Signature, max_padding: float) -> List[List[_Member]]:
    """A group cut into runs: longest first, a run takes the next request
    while its rows stay within the batch dim's maximum (Triton's
    max_batch_size keeps a batch within it; a direct caller may not) and its
    padded elements within ``max_padding`` times the real ones (padding a
    short request to a long one costs more than running it alone)."""
    def padded_size(dims: Dict[str, int]) -> int:
        return int(np.prod([dims[d] for d in sig.pad_dims], dtype=np.int64))

    runs: List[List[_Member]] = []
    rows = real = 0
    longest: Dict[str, int] = {}
    for member in sorted(group, key=lambda m: padded_size(m.dims), reverse=True):
        member_rows = member.dims[sig.batch_dim]
        widest = {d: max(longest.get(d, 0), member.dims[d]) for d in sig.pad_dims}
        member_real = member_rows * padded_size(member.dims)
        if runs and rows + member_rows <= sig.max_batch and \
                (rows + member_rows) * padded_size(widest) <= max_padding * (real + member_real):
            runs[-1].append(member)
            rows, real, longest = rows + member_rows, real + member_real, widest
        else:
            runs.append([member])
            rows, real, longest = member_rows, member_real, {d: member.dims[d] for d in sig.pad_dims}
    return runs


def _run_alone(model, member: _Member) -> Result:
    try:
        return model.run(member.arrays)
    except InputError as error:
        return RequestError(str(error))
    except Error as error:
        return error
