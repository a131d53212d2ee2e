"""Runs an artifact on random inputs so that EIN_PROFILE (set by the parent,
``profile_model``) records each step's times; the profile is written when the
session ends.

    python -m ein.explorer._profile MODEL.einb RUNS DIMS_JSON THREADS
"""
import gc
import json
import sys

import numpy as np

from .._model import load


def random_inputs(model, dims, seed: int = 0):
    """Inputs of the shapes the dims give: normal floats, ids within their bound."""
    generator = np.random.default_rng(seed)
    shapes = model.input_shapes(dims)
    inputs = {}
    for info in model.inputs:
        shape = shapes[info.name]
        dtype = info.numpy_dtype
        if info.dtype == "bool":
            inputs[info.name] = np.ones(shape, dtype)
        elif np.issubdtype(dtype, np.integer):
            inputs[info.name] = generator.integers(0, max(info.id_bound or 1, 1), size=shape).astype(dtype)
        elif info.dtype == "bf16":
            inputs[info.name] = (generator.standard_normal(shape).astype(np.float32).view(np.uint32) >> 16).astype(dtype)
        else:
            inputs[info.name] = generator.standard_normal(shape).astype(dtype)
    return inputs


def main(argv) -> int:
    path, runs, dims, threads = argv[0], int(argv[1]), json.loads(argv[2]), int(argv[3])
    model = load(path, threads=threads or None)
    session = model.session()
    inputs = random_inputs(model, dims)
    for _ in range(runs):
        session.run(inputs)
        session.reset()  # a decoder starts each run at position 0
    del session, model
    gc.collect()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
