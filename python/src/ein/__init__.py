"""ein: compile einsum-native models and run them from NumPy, PyTorch and DLPack.

    import ein, numpy as np
    model = ein.compile("model.ein", weights=state_dict)   # or a .safetensors path
    outputs = model.run({"x": np.zeros((2, 8), np.float32)})

ein.compile, ein.load, ein.Model, ein.Session (state, per-step runs, streaming
generation), ein.Scheduler (many generations at once); errors: ein.CompileError, ein.InputError, ein.ArtifactError,
ein.DeviceError (all ein.Error). See docs/python.md in the repository.
"""
from ._errors import ArtifactError, CompileError, DeviceError, Diagnostic, Error, InputError
from ._model import Model, TensorInfo, default_thread_count, load
from ._session import Generation, GenerationStats, Session
from ._scheduler import Request, Scheduler
from ._compile import compile
from ._pretrained import export_ein, from_pretrained

__all__ = [
    "compile", "from_pretrained", "export_ein", "load", "Model", "TensorInfo", "Session", "Generation", "GenerationStats", "Scheduler", "Request",
    "default_thread_count",
    "Error", "CompileError", "InputError", "ArtifactError", "DeviceError", "Diagnostic",
]
__version__ = "0.1.0"
