"""A torch state_dict and torch tensors as they are (DLPack); skipped where
torch is not installed (CI does not install it)."""
import numpy as np
import pytest

import ein

torch = pytest.importorskip("torch")

MLP = """\
dim n = 2, d = 8, h = 16
input  x: f32[n, d]
param  fc1.weight: f32[h, d]
param  fc1.bias: f32[h]
param  fc2.weight: f32[d, h]
param  fc2.bias: f32[d]
output y = linear(relu(linear(x, fc1.weight, fc1.bias)), fc2.weight, fc2.bias)
"""


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(8, 16), torch.nn.Linear(16, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def test_state_dict_and_torch_inputs():
    torch.manual_seed(0)
    module = Mlp().eval()
    model = ein.compile(MLP, weights=module.state_dict())
    x = torch.randn(2, 8)
    with torch.no_grad():
        expected = module(x).numpy()
    np.testing.assert_allclose(model.run({"x": x})["y"], expected, rtol=1e-5, atol=1e-6)


def test_bf16_state_dict():
    torch.manual_seed(1)
    module = Mlp().eval()
    halved = {name: value.to(torch.bfloat16) for name, value in module.state_dict().items()}
    model = ein.compile(MLP, weights=halved)
    exact = {name: value.float() for name, value in halved.items()}
    reference = ein.compile(MLP, weights=exact)
    x = np.ones((2, 8), np.float32)
    np.testing.assert_array_equal(model.run({"x": x})["y"], reference.run({"x": x})["y"])
