"""Every bad input raises the exception that says what was wrong."""
import numpy as np
import pytest

import ein
from conftest import EXAMPLES, LINEAR_RELU, linear_relu_weights

SYNTAX_ERROR = """\
dim n = 4
input x: f32[n, n]
output y = einsum("ab,bc->ac", x x)
"""


def test_compile_error_is_located():
    with pytest.raises(ein.CompileError) as caught:
        ein.compile(SYNTAX_ERROR, random_weights=1, filename="bad.ein")
    error = caught.value
    assert (error.file, error.line, error.col) == ("bad.ein", 3, 34)
    assert error.message.startswith("expected ',' or ')'")
    # einc's text: the location, the source line and a caret under column 34.
    assert str(error).splitlines() == [
        "bad.ein:3:34: error: " + error.message,
        'output y = einsum("ab,bc->ac", x x)',
        " " * 33 + "^",
    ]


def test_compile_error_from_a_file_names_the_file(tmp_path):
    (tmp_path / "bad.ein").write_text(SYNTAX_ERROR)
    with pytest.raises(ein.CompileError) as caught:
        ein.compile(tmp_path / "bad.ein", random_weights=1)
    assert (caught.value.file, caught.value.line, caught.value.col) == (str(tmp_path / "bad.ein"), 3, 34)


def test_an_unknown_dim_is_said_in_python_words():
    with pytest.raises(ein.CompileError) as caught:
        ein.compile(EXAMPLES / "llama_decoder.ein", random_weights=1, dims={"vocabb": 1000})
    assert str(caught.value) == (
        "dims={'vocabb': 1000}: the model has no dim 'vocabb'; did you mean 'vocab'? "
        "(dims: b, t, past, vocab, hidden, heads, kv_heads, head_dim, inter, layers, cache)")
    assert (caught.value.file, caught.value.line, caught.value.col) == (None, None, None)  # not in the model text
    with pytest.raises(ein.CompileError, match=r"^dims=\{'nonexistent_dim': 2\}: the model has no dim "
                                               r"'nonexistent_dim' \(dims: s, vocab, d, dk, dv\)$"):
        ein.compile(EXAMPLES / "attention.ein", random_weights=1, dims={"nonexistent_dim": 2, "s": 5})
    with pytest.raises(ein.CompileError) as caught:
        ein.compile(EXAMPLES / "llama_decoder.ein", random_weights=1, dims={"past": 512})
    assert str(caught.value) == ("dims={'past': 512}: 'past' is the model's position (the tokens its session state "
                                 "holds before a run), which takes a range: dims={'past': (0, 512)}")


def test_a_fixed_dims_wrong_size_says_how_to_make_it_ranged(linear_relu, tmp_path):
    model, _ = linear_relu
    with pytest.raises(ein.InputError) as caught:
        model.run({"x": np.zeros((5, 4), np.float32)})
    assert str(caught.value) == (
        "input \"x\" expects f32[3, 4], got float32[5, 4]; axis 0 is dim 'n', fixed at 3 in this model: to run "
        "other sizes, make it ranged (ein.compile(..., dims={'n': (1, 5)}), or `dim n = 1..5` in the model)")
    # An artifact keeps the sizes, not the names of fixed dims.
    model.save(tmp_path / "m.einb")
    with pytest.raises(ein.InputError) as caught:
        ein.load(tmp_path / "m.einb").run({"x": np.zeros((3, 2), np.float32)})
    assert str(caught.value) == (
        "input \"x\" expects f32[3, 4], got float32[3, 2]; axis 1 is fixed at 4 in this model: to run other sizes, "
        "compile it with the dim that sizes this axis ranged (ein.compile(..., dims={NAME: (MIN, MAX)}))")
    # Made ranged as the message says, the model takes the size.
    ranged = ein.compile(LINEAR_RELU, random_weights=1, dims={"n": (1, 5)})
    assert ranged.run({"x": np.zeros((5, 4), np.float32)})["y"].shape == (5, 5)


@pytest.mark.parametrize("arguments, message", [
    (dict(precision="bf61"), "precision='bf61': unknown precision; did you mean 'bf16'? "
                             "(precisions: 'fp32', 'bf16', 'fp16', 'int8', 'int4')"),
    (dict(precision="fp8"), "precision='fp8': unknown precision (precisions: 'fp32', 'bf16', 'fp16', 'int8', 'int4')"),
    (dict(target="gpu"), "target='gpu': unknown target; did you mean 'cuda'? (targets: 'cpu', 'cuda')"),
    (dict(device="gpu"), "device='gpu': unknown device; did you mean 'cuda'? (devices: 'cpu', 'cuda', 'cuda:N' for "
                         "the N-th GPU)"),
    (dict(device="cuda:x"), "device='cuda:x': unknown device; did you mean 'cuda:0'? (devices: 'cpu', 'cuda', "
                            "'cuda:N' for the N-th GPU)"),
    (dict(target="cpu", device="cuda"), "target='cpu' and device='cuda' disagree: a model compiled for cpu runs on "
                                        "cpu only (device='cuda' alone compiles for cuda)"),
])
def test_unknown_keyword_values_are_said_in_python_words(arguments, message):
    with pytest.raises(ValueError) as caught:
        ein.compile(LINEAR_RELU, random_weights=1, **arguments)
    assert str(caught.value) == message


def test_shape_error_in_a_model():
    text = LINEAR_RELU.replace("x @ fc.weight", "fc.weight @ x")
    with pytest.raises(ein.CompileError) as caught:
        ein.compile(text, weights=linear_relu_weights())
    assert (caught.value.file, caught.value.line) == ("<source>", 5)


def test_weights_errors_are_located_at_the_declaration():
    weights = linear_relu_weights()
    with pytest.raises(ein.CompileError, match='missing parameter "fc.bias"') as caught:
        ein.compile(LINEAR_RELU, weights={"fc.weight": weights["fc.weight"]})
    assert (caught.value.file, caught.value.line, caught.value.col) == ("<source>", 4, 1)
    with pytest.raises(ein.CompileError, match=r'"fc.weight" is f32\[5, 4\] in the file and f32\[4, 5\]'):
        ein.compile(LINEAR_RELU, weights=dict(weights, **{"fc.weight": weights["fc.weight"].T.copy()}))
    with pytest.raises(ein.CompileError, match=r"is i64\[5\] in the file"):
        ein.compile(LINEAR_RELU, weights=dict(weights, **{"fc.bias": np.arange(5)}))


def test_unreadable_weights_file(tmp_path):
    (tmp_path / "garbage.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ein.CompileError, match="garbage.safetensors") as caught:
        ein.compile(LINEAR_RELU, weights=tmp_path / "garbage.safetensors")
    assert caught.value.file is None


def test_bad_arguments():
    with pytest.raises(ein.CompileError, match='declares 2 parameters \\("fc.weight" first\\): give them as weights'):
        ein.compile(LINEAR_RELU)
    with pytest.raises(ValueError, match="not both"):
        ein.compile(LINEAR_RELU, weights=linear_relu_weights(), random_weights=1)
    with pytest.raises(ValueError, match="positive integer"):
        ein.compile(LINEAR_RELU, random_weights=1, dims={"n": 0})
    with pytest.raises(ValueError, match="threads"):
        ein.compile(LINEAR_RELU, random_weights=1, threads=0)
    with pytest.raises(TypeError, match='weight "fc.bias" is a str'):
        ein.compile(LINEAR_RELU, weights=dict(linear_relu_weights(), **{"fc.bias": "zeros"}))
    with pytest.raises(TypeError, match="complex64, which safetensors cannot hold"):
        ein.compile(LINEAR_RELU, weights=dict(linear_relu_weights(), **{"fc.bias": np.zeros(5, np.complex64)}))
    with pytest.raises(ein.CompileError, match="precision fp16 needs target cuda"):
        ein.compile(LINEAR_RELU, random_weights=1, precision="fp16")
    with pytest.raises(ein.CompileError, match="precision int8 needs target cpu"):
        ein.compile(LINEAR_RELU, random_weights=1, precision="int8", target="cuda")
    with pytest.raises(FileNotFoundError):
        ein.compile("no/such/model.ein", random_weights=1)


@pytest.mark.parametrize("inputs, message", [
    ({"x": np.zeros((3, 4), np.int64)},
     r'input "x" expects f32\[3, 4\], got int64\[3, 4\]: integers are not converted to floats \(cast them first\)'),
    ({"x": np.zeros((4, 3), np.float32)}, r'input "x" expects f32\[3, 4\], got float32\[4, 3\]'),
    ({"x": np.zeros((3, 4), np.float32), "z": np.zeros(1)}, r'the model has no input "z" \(inputs: x\)'),
    ({"xx": np.zeros((3, 4), np.float32)}, r'^the model has no input "xx"; did you mean "x"\? \(inputs: x\)$'),
    ({}, r'input "x" \(f32\[3, 4\]\) is not given'),
    ({"x": [[0.0] * 4] * 3}, r'input "x" expects f32\[3, 4\], got a list, which is not a CPU array'),
])
def test_input_errors_name_the_input(linear_relu, inputs, message):
    model, _ = linear_relu
    with pytest.raises(ein.InputError, match=message) as caught:
        model.run(inputs)
    assert caught.value.name == next((name for name in ("z", "xx") if name in inputs), "x")
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("buffer, message", [
    (np.zeros((3, 5), np.float64), r"got float64\[3, 5\]"),
    (np.zeros((5, 3), np.float32), r"got float32\[5, 3\]"),
    (np.zeros((3, 10), np.float32)[:, ::2], "got a non-contiguous array"),
])
def test_out_buffer_errors(linear_relu, buffer, message):
    model, _ = linear_relu
    with pytest.raises(ein.InputError, match=r'out= buffer for output "y" must be a C-contiguous f32\[3, 5\] array, '
                                             + message):
        model.run({"x": np.zeros((3, 4), np.float32)}, out={"y": buffer})


def test_read_only_out_buffer(linear_relu):
    model, _ = linear_relu
    frozen = np.zeros((3, 5), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ein.InputError, match="not a writable CPU array"):
        model.run({"x": np.zeros((3, 4), np.float32)}, out={"y": frozen})


def test_unknown_out_name(linear_relu):
    model, _ = linear_relu
    with pytest.raises(ein.InputError, match=r'the model has no output "w" \(outputs: y\)'):
        model.run({"x": np.zeros((3, 4), np.float32)}, out={"w": np.zeros(1)})
    with pytest.raises(ein.InputError, match=r'the model has no output "yy"; did you mean "y"\? \(outputs: y\)'):
        model.run({"x": np.zeros((3, 4), np.float32)}, out={"yy": np.zeros(1)})


def test_ids_out_of_range_are_input_errors():
    model = ein.compile(EXAMPLES / "attention.ein", random_weights=1)
    assert model.inputs[0].id_bound == 10
    with pytest.raises(ein.InputError, match=r'input "tokens" element \[4\] is 10, outside \[0, 10\)'):
        model.run({"tokens": np.array([0, 1, 2, 3, 10], np.int32)})


def test_invalid_artifacts(tmp_path):
    (tmp_path / "garbage.einb").write_bytes(b"\0" * 64)
    with pytest.raises(ein.ArtifactError, match="garbage.einb"):
        ein.load(tmp_path / "garbage.einb")
    ein.compile(LINEAR_RELU, random_weights=1).save(tmp_path / "good.einb")
    truncated = (tmp_path / "good.einb").read_bytes()[:-16]
    (tmp_path / "truncated.einb").write_bytes(truncated)
    with pytest.raises(ein.ArtifactError):
        ein.load(tmp_path / "truncated.einb")
    with pytest.raises(FileNotFoundError):
        ein.load(tmp_path / "missing.einb")
    # A file of another kind is named for what it is, not parsed as an artifact.
    (tmp_path / "model.ein").write_text(LINEAR_RELU)
    with pytest.raises(ein.ArtifactError, match=r"model\.ein: not an ein artifact: the file is a text file \(a \.ein "
                                                r"model\? compile it first: einc MODEL\.ein -o MODEL\.einb\)"):
        ein.load(tmp_path / "model.ein")
    np.save(tmp_path / "x.npy", np.zeros(3, np.float32))
    with pytest.raises(ein.ArtifactError, match=r"not an ein artifact: the file is a NumPy array"):
        ein.load(tmp_path / "x.npy")
