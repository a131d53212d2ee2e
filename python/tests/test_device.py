"""Where a model runs: the default threads (the runtime's, as ein-run's) and
the device (cpu, cuda, cuda:N), with clear errors for a device that is not
there or an artifact compiled for another. CUDA runs skip without a GPU."""
import os

import numpy as np
import pytest

import ein
from conftest import LINEAR_RELU


def test_threads_default_to_the_runtimes_default(tmp_path, linear_relu):
    default = ein.default_thread_count()
    assert default == len(os.sched_getaffinity(0))  # the CPUs this process may use, as ein-run's default
    model, _ = linear_relu
    assert model.threads == default
    model.save(tmp_path / "m.einb")
    assert ein.load(tmp_path / "m.einb").threads == default
    assert model.session().threads == default
    assert ein.compile(LINEAR_RELU, random_weights=1, threads=1).session().threads == 1
    with pytest.raises(ValueError, match=r"threads must be an integer of at least 1 \(or None: every CPU"):
        ein.load(tmp_path / "m.einb", threads=0)


def test_cpu_device(tmp_path, linear_relu):
    model, _ = linear_relu
    assert model.device == "cpu" and model.target == "cpu"
    model.save(tmp_path / "m.einb")
    loaded = ein.load(tmp_path / "m.einb", device="cpu")
    assert loaded.device == "cpu"
    x = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(loaded.run({"x": x})["y"], model.run({"x": x})["y"])
    assert ein.compile(LINEAR_RELU, random_weights=1, device="cpu").target == "cpu"


def test_an_artifact_for_another_device(tmp_path, linear_relu):
    model, _ = linear_relu
    model.save(tmp_path / "m.einb")
    with pytest.raises(ein.DeviceError) as caught:
        ein.load(tmp_path / "m.einb", device="cuda:1")
    assert str(caught.value) == (f"'{tmp_path / 'm.einb'}' was compiled for cpu and cannot run on device 'cuda:1': "
                                 f"compile it with device='cuda' (ein.compile) to run it there")
    with pytest.raises(ValueError, match=r"^device='tpu': unknown device \(devices: 'cpu', 'cuda', 'cuda:N'"):
        ein.load(tmp_path / "m.einb", device="tpu")


def _cuda_model():
    """LINEAR_RELU compiled for and run on CUDA, or the DeviceError that says
    why it cannot run here."""
    try:
        return ein.compile(LINEAR_RELU, random_weights=1, device="cuda")
    except ein.DeviceError as error:
        return error


def test_cuda_without_a_gpu_is_a_clear_error():
    outcome = _cuda_model()
    if isinstance(outcome, ein.Model):
        pytest.skip("a CUDA device is available here")
    # The runtime's reason follows: no CUDA backend library, or no device ("no CUDA device: cudaGetDeviceCount ...").
    prefix = "device 'cuda' cannot run this model here: "
    assert str(outcome).startswith(prefix) and len(str(outcome)) > len(prefix) + 10


def test_cuda_runs_as_the_cpu_does():
    outcome = _cuda_model()
    if isinstance(outcome, ein.DeviceError):
        pytest.skip(f"no CUDA device: {outcome}")
    assert outcome.device == "cuda" and outcome.target == "cuda"
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    expected = ein.compile(LINEAR_RELU, random_weights=1).run({"x": x})["y"]
    np.testing.assert_allclose(outcome.run({"x": x})["y"], expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outcome.session().run({"x": x})["y"], expected, rtol=1e-4, atol=1e-5)
