"""Shared models, weights and readers for the ein package's tests."""
import json
import pathlib
import struct

import numpy as np
import pytest

import ein

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "models"
CONFORMANCE_CASES = REPO / "tests" / "conformance" / "cases"

# y = relu(x @ w + b): small enough that NumPy says what every output must be.
LINEAR_RELU = """\
dim n = 3, d = 4, e = 5
input  x: f32[n, d]
param  fc.weight: f32[d, e]
param  fc.bias: f32[e]
output y = relu(x @ fc.weight + fc.bias)
"""


def linear_relu_weights(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "fc.weight": rng.standard_normal((4, 5)).astype(np.float32),
        "fc.bias": rng.standard_normal(5).astype(np.float32),
    }


def linear_relu_reference(x, weights):
    return np.maximum(x.astype(np.float64) @ weights["fc.weight"] + weights["fc.bias"], 0)


@pytest.fixture(scope="session")
def llama_decoder():
    """examples/models/llama_decoder.ein (vocab 128, 2 layers, a 256-row
    key/value cache) with seeded random weights, on one kernel thread."""
    return ein.compile(EXAMPLES / "llama_decoder.ein", random_weights=5, threads=1)


@pytest.fixture
def linear_relu():
    """(model, weights) for LINEAR_RELU."""
    weights = linear_relu_weights()
    return ein.compile(LINEAR_RELU, weights=weights), weights


class DLPackOnly:
    """An object that offers its data through DLPack alone, as torch and JAX
    arrays do (no buffer protocol, no NumPy type)."""

    def __init__(self, values):
        self._values = values

    def __dlpack__(self, **kwargs):
        return self._values.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._values.__dlpack_device__()


_SAFETENSORS_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I32": np.int32,
                       "I64": np.int64, "BOOL": np.bool_}


def read_safetensors(path):
    """A safetensors file as {name: NumPy array}, as a state_dict would hold it
    (written here so that the tests need neither torch nor safetensors)."""
    data = pathlib.Path(path).read_bytes()
    (header_size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_size])
    header.pop("__metadata__", None)
    body = data[8 + header_size:]
    return {
        name: np.frombuffer(body[begin:end], dtype=_SAFETENSORS_DTYPES[entry["dtype"]]).reshape(entry["shape"]).copy()
        for name, entry in header.items()
        for begin, end in [entry["data_offsets"]]
    }


def write_safetensors(path, arrays):
    """{name: NumPy array} as a safetensors file (the inverse of read_safetensors)."""
    names = {dtype: name for name, dtype in _SAFETENSORS_DTYPES.items()}
    header, body = {}, b""
    for name, array in arrays.items():
        data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": names[array.dtype.type], "shape": list(array.shape),
                        "data_offsets": [len(body), len(body) + len(data)]}
        body += data
    encoded = json.dumps(header).encode()
    pathlib.Path(path).write_bytes(struct.pack("<Q", len(encoded)) + encoded + body)


def conformance_case_names():
    """The cases written as a model and its weights (model.ein, weights.safetensors)."""
    return sorted(p.name for p in CONFORMANCE_CASES.iterdir() if (p / "model.ein").exists())


def checkpoint_case_names():
    """The cases that hold a Hugging Face checkpoint folder (checkpoint/config.json)."""
    return sorted(p.name for p in CONFORMANCE_CASES.iterdir() if (p / "checkpoint" / "config.json").exists())
