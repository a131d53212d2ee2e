"""The model that Triton's Python backend runs for ein.serve (the model.py
of each served model imports TritonPythonModel from here).

It runs inside the backend's stub process, one process per model instance,
where the module triton_python_backend_utils exists; elsewhere this module
is not importable, and nothing but that model.py imports it.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

import triton_python_backend_utils as pb_utils  # provided by the stub process only

from ._batching import RequestError, iter_batch, signature
from .serve import load_model


class TritonPythonModel:
    """One instance of a served model: loads it once, then runs each batch of
    requests that Triton's scheduler hands it."""

    def initialize(self, args):
        config = json.loads(args["model_config"])
        parameters = {key: value["string_value"] for key, value in config.get("parameters", {}).items()}
        path = os.path.join(args["model_repository"], args["model_version"], parameters["artifact"])
        self._model = load_model(parameters["loader"], path, threads=int(parameters["threads"]))
        pad_dims = [dim for dim in parameters["pad_dims"].split(",") if dim]
        self._signature = signature(self._model, pad_dims)
        self._max_padding = float(parameters["max_padding"])
        sys.unraisablehook = _quiet_used_capsules(sys.unraisablehook)

    # Tensors cross to and from the backend through DLPack: its as_numpy and
    # Tensor(name, array) speak NumPy 1's ABI and misread NumPy 2 arrays.
    # Each request is answered through its response sender as soon as its run
    # is done (execute then returns None): a caller in a short run does not
    # wait for the long ones, and gets its next request to the other instances.
    def execute(self, requests):
        senders, arrays = [], []
        for request in requests:
            sender = request.get_response_sender()
            try:
                arrays.append({tensor.name(): np.from_dlpack(tensor) for tensor in request.inputs()})
                senders.append(sender)
            except Exception as error:  # Triton checked the sizes; should a tensor still not read, it fails alone
                _send(sender, RequestError(f"an input could not be read: {error}"))
        unanswered = dict(enumerate(senders))
        try:
            for index, result in iter_batch(self._model, self._signature, arrays, self._max_padding):
                _send(unanswered.pop(index), result)
        except Exception as error:  # a bug here must fail this batch's requests, not the server
            for sender in unanswered.values():
                _send(sender, error)
        return None


def _quiet_used_capsules(hook):
    """An unraisable-exception hook that drops the one the backend causes for
    every response: from_dlpack renames the capsule it consumed "used_dlpack",
    not DLPack's "used_dltensor", so NumPy's capsule destructor fails to name
    it and reports (a capsule consumed is the consumer's to free: nothing
    leaks). Without this each response writes 4 lines of traceback to the log."""
    def quiet(unraisable):
        if not (isinstance(unraisable.exc_value, ValueError)
                and "PyCapsule_GetPointer called with incorrect name" in str(unraisable.exc_value)):
            hook(unraisable)
    return quiet


def _send(sender, result):
    sender.send(_response(result), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)


def _response(result):
    if isinstance(result, Exception):
        # Malformed requests are the client's fault (INVALID_ARG, HTTP 400);
        # anything else is the server's.
        code = pb_utils.TritonError.INVALID_ARG if isinstance(result, RequestError) else pb_utils.TritonError.INTERNAL
        return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(str(result), code))
    return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor.from_dlpack(name, np.ascontiguousarray(value))
                                                      for name, value in result.items()])
