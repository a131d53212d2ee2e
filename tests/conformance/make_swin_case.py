#!/usr/bin/env python3
"""Writes the conformance case cases/swin_timm_tiny from timm's own SwinTransformer.

A small Swin (img 32, patch 4, embed 32, depths (2, 2), heads (2, 4), window 4,
10 classes) with random weights under timm's state_dict names, larger than timm's
initialisation so that the relative position bias and the norms matter; the
expected logits are timm's, run in float64 on the float32-rounded weights. The
model is examples/models/swin_tiny_window4.ein with batch 2.

Needs torch, timm, numpy and safetensors (the build and the tests never do):
  python3 -m venv .venv-bench && .venv-bench/bin/pip install torch timm numpy safetensors
  .venv-bench/bin/python tests/conformance/make_swin_case.py
"""
import json
import os
import re

import numpy as np
import torch
from safetensors.torch import save_file
from timm.models.swin_transformer import SwinTransformer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "models", "swin_tiny_window4.ein")
CASE = os.path.join(ROOT, "tests", "conformance", "cases", "swin_timm_tiny")
CONFIG = dict(img_size=32, patch_size=4, embed_dim=32, depths=(2, 2), num_heads=(2, 4), window_size=4,
              num_classes=10)
BATCH = 2


def model(seed=0, config=None):
    """timm's SwinTransformer with random float32 weights (biases, norms and bias tables included)."""
    torch.manual_seed(seed)
    swin = SwinTransformer(**(config or CONFIG)).eval()
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name, value in swin.state_dict().items():
        if not value.is_floating_point():
            continue
        noise = torch.randn(value.shape, generator=generator, dtype=torch.float64)
        if name.endswith("norm.weight") or re.search(r"norm\d?\.weight$", name):
            value = 1 + 0.1 * noise
        elif name.endswith("relative_position_bias_table"):
            value = noise  # a bias the scores feel
        elif value.dim() == 1:
            value = 0.1 * noise
        else:
            value = noise / np.sqrt(value[0].numel())  # unit-variance activations
        state[name] = value.float()
    swin.load_state_dict(state, strict=False)
    return swin, state


def main():
    swin, state = model()
    torch.manual_seed(1)
    x = torch.randn(BATCH, 3, 32, 32)
    with torch.no_grad():
        expected = swin.double()(x.double()).float()
    os.makedirs(os.path.join(CASE, "expected"), exist_ok=True)
    save_file({k: v.contiguous() for k, v in state.items()}, os.path.join(CASE, "weights.safetensors"),
              metadata={"format": "pt"})
    np.save(os.path.join(CASE, "x.npy"), x.numpy())
    np.save(os.path.join(CASE, "expected", "logits.npy"), expected.numpy())
    with open(EXAMPLE) as source:
        text = source.read()
    with open(os.path.join(CASE, "model.ein"), "w") as out:
        out.write(re.sub(r"^dim b = 1,", f"dim b = {BATCH},", text, count=1, flags=re.M))
    spec = {
        "name": "swin_timm_tiny",
        "reproduces": "timm SwinTransformer (img 32, patch 4, embed 32, depths (2, 2), heads (2, 4), window 4): "
                      "shifted windows, relative position bias, patch merging, timm's state_dict names",
        "dims": {"b": BATCH},
        "inputs": {"x": {"dtype": "float32", "shape": list(x.shape)}},
        "outputs": {"logits": list(expected.shape)},
        "tolerance": {"atol": 1e-4, "rtol": 1e-3,
                      "rule": "|got - expected| <= atol + rtol * |expected| for every element"},
        "expected_computed_in": "float64 (timm " + __import__("timm").__version__ + "), stored as float32",
    }
    with open(os.path.join(CASE, "case.json"), "w") as out:
        json.dump(spec, out, indent=2)
        out.write("\n")


if __name__ == "__main__":
    main()
