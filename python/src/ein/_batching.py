"""Dynamic batching for serving: checks each request alone, merges the good
ones into one run (padding the dims that may be padded) and hands each
request exactly its own rows back.

The rules (which models can be served, a request's checks, how requests are
grouped and cut into runs) are the runtime's ein/batching.hpp, which the
native Triton backend runs too; here NumPy merges and splits the arrays. No
Triton: ein.serve's Python-backend model calls it, and the tests call it
directly.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _ein
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
    native: "_ein.BatchSignature" = field(compare=False, repr=False, default=None)

    @property
    def max_batch(self) -> int:
        return self.dims[self.batch_dim][1]


def signature(model, pad_dims: Sequence[str] = ()) -> Signature:
    """The served signature of an ein.Model (or an object with its
    ``inputs``, ``outputs`` and ``dims``); ValueError names what cannot be
    served: the first axis of every input and output must be one ranged dim,
    the others constants or single ranged dims, none bf16."""
    dims = dict(model.dims)
    native = _ein.BatchSignature([(name, low, high) for name, (low, high) in dims.items()], list(model.inputs),
                                 list(model.outputs), list(pad_dims))

    def served(info) -> Tensor:
        return Tensor(info.name, info.numpy_dtype, info.dtype, tuple(info.shape[1:]), info.id_bound)

    return Signature(native.batch_dim, dims, tuple(map(served, model.inputs)), tuple(map(served, model.outputs)),
                     tuple(pad_dims), native)


def check_request(sig: Signature, arrays: Mapping[str, np.ndarray]) -> Dict[str, int]:
    """The dims of one request (batch dim included); RequestError names the
    input and says what was expected and what came."""
    try:
        values = sig.native.check([(name, np.ascontiguousarray(array)) for name, array in arrays.items()])
    except InputError as error:
        raise RequestError(str(error)) from None
    return {name: value for name, value in zip(sig.dims, values) if value >= 0}


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
    ``max_padding`` times the real elements and the rows within the batch
    dim's range (ein/batching.hpp's planRuns), each padded to its largest
    value of each pad dim; the cheapest runs go first. Should a
    merged run still fail (a model's own run-time check), its requests run
    one by one, so only the offending one fails.
    """
    good: List[_Member] = []
    for index, arrays in enumerate(requests):
        try:
            good.append(_Member(index, arrays, check_request(sig, arrays)))
        except RequestError as error:
            yield index, error

    names = list(sig.dims)
    for run in sig.native.plan([[m.dims.get(name, -1) for name in names] for m in good], max_padding):
        members = [good[i] for i in run]
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


def _run_alone(model, member: _Member) -> Result:
    try:
        return model.run(member.arrays)
    except InputError as error:
        return RequestError(str(error))
    except Error as error:
        return error
