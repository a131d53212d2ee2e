"""ein: compile einsum-native models and run them from NumPy, PyTorch and DLPack.

    import ein, numpy as np
    model = ein.compile("model.ein", weights=state_dict)   # or a .safetensors path
    outputs = model.run({"x": np.zeros((2, 8), np.float32)})

ein.compile, ein.load, ein.Model; errors: ein.CompileError, ein.InputError,
ein.ArtifactError (all ein.Error). See docs/python.md in the repository.
"""
from ._errors import ArtifactError, CompileError, Diagnostic, Error, InputError
from ._model import Model, TensorInfo, load
from ._compile import compile

__all__ = [
    "compile", "load", "Model", "TensorInfo",
    "Error", "CompileError", "InputError", "ArtifactError", "Diagnostic",
]
__version__ = "0.1.0"
