"""The Swin example (examples/models/swin_tiny_window4.ein) against timm's own
SwinTransformer, live, at batch 1 and 3; skipped where torch or timm is not
installed (CI does not install them: the committed conformance case
swin_timm_tiny checks the same model without them)."""
import importlib.util

import numpy as np
import pytest

import ein
from conftest import EXAMPLES, REPO

torch = pytest.importorskip("torch")
pytest.importorskip("timm")


def timm_model():
    spec = importlib.util.spec_from_file_location("make_swin_case", REPO / "tests" / "conformance" / "make_swin_case.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.model(seed=3)


@pytest.mark.parametrize("batch", [1, 3])
def test_swin_matches_timm(batch):
    swin, state = timm_model()
    model = ein.compile(EXAMPLES / "swin_tiny_window4.ein", weights=state, dims={"b": batch})
    torch.manual_seed(batch)
    x = torch.randn(batch, 3, 32, 32)
    with torch.no_grad():
        expected = swin.double()(x.double()).numpy()
    np.testing.assert_allclose(model.run({"x": x.numpy()})["logits"], expected, rtol=1e-4, atol=1e-5)

