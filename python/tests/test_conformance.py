"""The conformance cases (tests/conformance/cases): PyTorch's float64 outputs
from ein.compile + Model.run, with the weights as a file and as a
state_dict-style dict of NumPy arrays."""
import json

import numpy as np
import pytest

import ein
from conftest import CONFORMANCE_CASES, conformance_case_names, read_safetensors


def case_inputs(case_dir, model):
    """The case's .npy inputs in the dtypes the model declares (token ids are
    saved as int64 by PyTorch, masks as bool)."""
    return {info.name: np.load(case_dir / f"{info.name}.npy").astype(info.numpy_dtype) for info in model.inputs}


def check_outputs(case_dir, outputs):
    tolerance = json.loads((case_dir / "case.json").read_text())["tolerance"]
    for name, got in outputs.items():
        expected = np.load(case_dir / "expected" / f"{name}.npy")
        np.testing.assert_allclose(got, expected, rtol=tolerance["rtol"], atol=tolerance["atol"], err_msg=name)


def test_the_six_cases_are_found():
    assert len(conformance_case_names()) >= 6


@pytest.mark.parametrize("case", conformance_case_names())
def test_case_from_safetensors_file(case):
    case_dir = CONFORMANCE_CASES / case
    model = ein.compile(case_dir / "model.ein", weights=case_dir / "weights.safetensors")
    check_outputs(case_dir, model.run(case_inputs(case_dir, model)))


@pytest.mark.parametrize("case", conformance_case_names())
def test_case_from_state_dict(case):
    case_dir = CONFORMANCE_CASES / case
    state_dict = read_safetensors(case_dir / "weights.safetensors")
    model = ein.compile(case_dir / "model.ein", weights=state_dict)
    from_file = ein.compile(case_dir / "model.ein", weights=case_dir / "weights.safetensors")
    inputs = case_inputs(case_dir, model)
    outputs = model.run(inputs)
    check_outputs(case_dir, outputs)
    for name, expected in from_file.run(inputs).items():
        np.testing.assert_array_equal(outputs[name], expected)
