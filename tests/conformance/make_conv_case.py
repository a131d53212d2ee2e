#!/usr/bin/env python3
"""Writes the conformance case cases/convolutions_torch from torch.nn.functional itself.

The module below is what model.ein computes, written with torch's conv1d/conv2d
(Whisper's front end, a ConvNeXt block, a grouped dilated strided conv2d and a
conv1d with padding="same"); random weights under its state_dict names, the
expected outputs computed in float64 on the float32-rounded weights and inputs.

Needs torch, numpy and safetensors (the build and the tests never do):
  .venv-python/bin/python tests/conformance/make_conv_case.py
"""
import json
import os

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

CASE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases", "convolutions_torch")
B, MELS, T, WIDTH, C = 2, 8, 23, 16, 12


class Convolutions(torch.nn.Module):
    def __init__(self, mels=MELS, width=WIDTH, c=C):
        super().__init__()
        self.conv1 = torch.nn.Conv1d(mels, width, 3, padding=1)
        self.conv2 = torch.nn.Conv1d(width, width, 3, stride=2, padding=1)
        self.same = torch.nn.Conv1d(width, 4, 4, padding="same", dilation=2, bias=False)
        self.dwconv = torch.nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = torch.nn.LayerNorm(c, eps=1e-6)
        self.pwconv1 = torch.nn.Linear(c, 4 * c)
        self.pwconv2 = torch.nn.Linear(4 * c, c)
        self.gamma = torch.nn.Parameter(torch.ones(c))
        self.grouped = torch.nn.Conv2d(c, 8, 3, stride=(2, 3), padding=(1, 2), dilation=(2, 1), groups=4)

    def forward(self, mel, img):
        h = F.gelu(self.conv1(mel))
        h = F.gelu(self.conv2(h))
        audio = h.transpose(1, 2)
        audio_same = self.same(h)
        y = self.dwconv(img).permute(0, 2, 3, 1)
        y = self.pwconv2(F.gelu(self.pwconv1(self.norm(y))))
        block = img + (self.gamma * y).permute(0, 3, 1, 2)
        grouped = self.grouped(block)
        return dict(audio=audio, audio_same=audio_same, block=block, grouped=grouped)


def model(seed=0, **sizes):
    """The module with random weights (unit-variance activations), and its state_dict."""
    torch.manual_seed(seed)
    module = Convolutions(**sizes).eval()
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name, value in module.state_dict().items():
        noise = torch.randn(value.shape, generator=generator, dtype=torch.float64)
        if name == "gamma" or name == "norm.weight":
            value = 1 + 0.1 * noise
        elif value.dim() == 1:
            value = 0.1 * noise
        else:
            value = noise / np.sqrt(value[0].numel())  # unit-variance activations
        state[name] = value.float().contiguous()
    module.load_state_dict(state)
    return module, state


def main():
    module, state = model()
    generator = torch.Generator().manual_seed(1)
    mel = torch.randn(B, MELS, T, generator=generator).float()
    img = torch.randn(B, C, 14, 14, generator=generator).float()
    with torch.no_grad():
        expected = module.double()(mel.double(), img.double())
    os.makedirs(os.path.join(CASE, "expected"), exist_ok=True)
    save_file(state, os.path.join(CASE, "weights.safetensors"), metadata={"format": "pt"})  # as transformers writes it
    np.save(os.path.join(CASE, "mel.npy"), mel.numpy())
    np.save(os.path.join(CASE, "img.npy"), img.numpy())
    for name, value in expected.items():
        np.save(os.path.join(CASE, "expected", name + ".npy"), value.float().numpy())
    case = {
        "name": "convolutions_torch",
        "reproduces": "torch.nn.functional conv1d/conv2d: Whisper's front end (kernel 3, padding 1, stride 1 "
                      "and 2), a ConvNeXt block (depthwise 7x7, padding 3), a grouped dilated strided conv2d "
                      "with uneven padding, conv1d padding='same' with an even kernel",
        "dims": {"b": B, "t": T, "s": img.shape[-1]},
        "ranged": {"t": [1, 40]},
        "inputs": {"mel": {"dtype": "float32", "shape": list(mel.shape)},
                   "img": {"dtype": "float32", "shape": list(img.shape)}},
        "outputs": {name: list(value.shape) for name, value in expected.items()},
        "tolerance": {"atol": 1e-4, "rtol": 1e-3,
                      "rule": "|got - expected| <= atol + rtol * |expected| for every element"},
        "expected_computed_in": f"float64 (torch {torch.__version__}), stored as float32",
    }
    with open(os.path.join(CASE, "case.json"), "w") as f:
        json.dump(case, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
