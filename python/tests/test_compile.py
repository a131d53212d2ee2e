"""ein.compile: sources, weights and options; results checked against NumPy."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import ein
from conftest import (CONFORMANCE_CASES, EXAMPLES, LINEAR_RELU, REPO, DLPackOnly, linear_relu_reference, linear_relu_weights,
                      read_safetensors, write_safetensors)


def attention_reference(tokens, w):
    """examples/models/attention.ein in float64 NumPy."""
    x = w["embed"].astype(np.float64)[tokens]
    q, k, v = x @ w["w_q"], x @ w["w_k"], x @ w["w_v"]
    scores = q @ k.T / np.sqrt(q.shape[1])
    attn = np.exp(scores - scores.max(axis=-1, keepdims=True))
    attn /= attn.sum(axis=-1, keepdims=True)
    return attn @ v, attn


def test_compile_from_text_matches_numpy():
    weights = linear_relu_weights()
    model = ein.compile(LINEAR_RELU, weights=weights)
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    (y,) = model.run({"x": x}).values()
    assert y.dtype == np.float32 and y.shape == (3, 5)
    np.testing.assert_allclose(y, linear_relu_reference(x, weights), rtol=1e-5, atol=1e-6)


def test_a_model_without_parameters_needs_no_weights():
    model = ein.compile("input x: f32[5]\noutput y = round(x * 2.0) + floor(x)\n")
    x = np.array([-1.25, -0.5, 0.25, 1.25, 2.75], np.float32)
    (y,) = model.run({"x": x}).values()
    np.testing.assert_array_equal(y, np.round(x * 2) + np.floor(x))


def test_compile_from_path_with_weights_dict_matches_numpy():
    rng = np.random.default_rng(2)
    weights = {"embed": rng.standard_normal((10, 16)), "w_q": rng.standard_normal((16, 24)),
               "w_k": rng.standard_normal((16, 24)), "w_v": rng.standard_normal((16, 28))}
    weights = {name: value.astype(np.float32) for name, value in weights.items()}
    model = ein.compile(EXAMPLES / "attention.ein", weights=weights)
    tokens = np.array([3, 1, 4, 1, 5], dtype=np.int32)
    outputs = model.run({"tokens": tokens})
    z, attn = attention_reference(tokens, weights)
    np.testing.assert_allclose(outputs["z"], z, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outputs["attn"], attn, rtol=1e-4, atol=1e-6)
    assert model.name == str(EXAMPLES / "attention.ein")


def test_weights_of_other_float_precisions_are_converted():
    weights = linear_relu_weights()
    as_f64 = {name: value.astype(np.float64) for name, value in weights.items()}
    x = np.ones((3, 4), np.float32)
    expected = ein.compile(LINEAR_RELU, weights=weights).run({"x": x})["y"]
    np.testing.assert_array_equal(ein.compile(LINEAR_RELU, weights=as_f64).run({"x": x})["y"], expected)


def test_non_contiguous_weights_are_copied_in_c_order():
    weights = linear_relu_weights()
    transposed_twice = {"fc.weight": np.ascontiguousarray(weights["fc.weight"].T).T, "fc.bias": weights["fc.bias"]}
    assert not transposed_twice["fc.weight"].flags.c_contiguous
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(ein.compile(LINEAR_RELU, weights=transposed_twice).run({"x": x})["y"],
                                  ein.compile(LINEAR_RELU, weights=weights).run({"x": x})["y"])


def test_weights_through_dlpack_and_the_buffer_protocol():
    weights = linear_relu_weights()
    handed_over = {"fc.weight": DLPackOnly(weights["fc.weight"]), "fc.bias": memoryview(weights["fc.bias"])}
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(ein.compile(LINEAR_RELU, weights=handed_over).run({"x": x})["y"],
                                  ein.compile(LINEAR_RELU, weights=weights).run({"x": x})["y"])


def test_unused_weights_warn():
    weights = dict(linear_relu_weights(), **{"head.bias": np.zeros(7, np.float32)})
    with pytest.warns(UserWarning, match="'head.bias' is not a parameter"):
        ein.compile(LINEAR_RELU, weights=weights)


def test_safetensors_path_and_dims(tmp_path):
    model = ein.compile(EXAMPLES / "mhsa.ein", random_weights=3, dims={"s": 7})
    assert [(i.name, i.dtype, i.shape) for i in model.inputs] == [("x", "f32", (7, 16))]
    assert [(o.name, o.shape) for o in model.outputs] == [("y", (7, 16))]
    case = pathlib.Path(__file__).resolve().parents[2] / "tests/conformance/cases/seed001_mhsa"
    from_file = ein.compile(case / "model.ein", weights=case / "weights.safetensors")
    assert from_file.outputs[0].shape == (5, 16)


def test_weights_from_a_checkpoint_folder_or_a_list_of_files(tmp_path):
    """A Hugging Face folder (an index and its shards), or a list of files, gives what one dict gives."""
    weights = linear_relu_weights()
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    expected = ein.compile(LINEAR_RELU, weights=weights).run({"x": x})["y"]
    folder = tmp_path / "ckpt"
    folder.mkdir()
    shards = [folder / "model-00001-of-00002.safetensors", folder / "model-00002-of-00002.safetensors"]
    write_safetensors(shards[0], {"fc.weight": weights["fc.weight"]})
    write_safetensors(shards[1], {"fc.bias": weights["fc.bias"]})
    weight_map = {"fc.weight": shards[0].name, "fc.bias": shards[1].name}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    for given in (folder, str(folder), shards, tuple(str(shard) for shard in shards)):
        np.testing.assert_array_equal(ein.compile(LINEAR_RELU, weights=given).run({"x": x})["y"], expected)
    write_safetensors(tmp_path / "bias.safetensors", {"fc.bias": weights["fc.bias"]})
    with pytest.raises(ein.CompileError, match='bias.safetensors: tensor "fc.bias" is also in .*model-00002-of-00002'):
        ein.compile(LINEAR_RELU, weights=[folder, tmp_path / "bias.safetensors"])
    with pytest.raises(ValueError, match="names no weights files"):
        ein.compile(LINEAR_RELU, weights=[])
    with pytest.raises(TypeError, match="a list of paths"):
        ein.compile(LINEAR_RELU, weights=[folder, 3])


def test_gguf_path_gives_what_its_safetensors_give():
    """llama.cpp's GGUF of the llama_hf_tiny case's weights (llama.cpp's names, q/k rows permuted;
    tests/compiler/weights/gguf) compiles to the model its safetensors file does."""
    case = REPO / "tests/conformance/cases/llama_hf_tiny"
    ids = {"ids": np.load(case / "ids.npy")}
    from_safetensors = ein.compile(case / "model.ein", weights=case / "weights.safetensors", threads=1)
    from_gguf = ein.compile(case / "model.ein", weights=REPO / "tests/compiler/weights/gguf/llama_hf_tiny.gguf",
                            threads=1)
    np.testing.assert_array_equal(from_gguf.run(ids)["logits"], from_safetensors.run(ids)["logits"])


def test_int8_keeps_a_gguf_files_q8_0_format_unless_told_otherwise():
    """Weights holding Q8_0 tensors compile at int8 with q8_0's scale per group of 32, as
    group_size=32 asks; group_size=0 asks for a scale per output column."""
    case = REPO / "tests/conformance/cases/llama_hf_tiny"
    dims = {"vocab": 4, "hidden": 32, "heads": 2, "kv_heads": 1, "head_dim": 16, "inter": 32, "layers": 1}
    gguf = REPO / "tests/compiler/weights/gguf/llama_tied.gguf"
    with pytest.warns(UserWarning, match="rope_freqs"):
        kept = ein.compile(case / "model.ein", weights=gguf, dims=dims, precision="int8").describe()
        columns = ein.compile(case / "model.ein", weights=gguf, dims=dims, precision="int8", group_size=0).describe()
    assert "int8, a scale per group of 32" in kept and "per group" not in columns and "weights=int8" in columns


def test_random_weights_are_deterministic():
    x = np.ones((3, 4), np.float32)
    first = ein.compile(LINEAR_RELU, random_weights=5).run({"x": x})["y"]
    np.testing.assert_array_equal(ein.compile(LINEAR_RELU, random_weights=5).run({"x": x})["y"], first)


def test_dump_ir_writes_every_pass(tmp_path):
    ein.compile(LINEAR_RELU, random_weights=1, dump_ir=tmp_path / "ir")
    names = sorted(p.name for p in (tmp_path / "ir").iterdir())
    assert names[0] == "00-frontend.mlir"
    assert any(name.endswith("-kern-plan-memory.mlir") for name in names)


def test_int8_precision_quantizes_gemm_weights():
    model = ein.compile(LINEAR_RELU, random_weights=1, precision="int8")
    assert model.precision == "int8" and model.target == "cpu"
    assert "i8[" in model.describe()
    reference = ein.compile(LINEAR_RELU, random_weights=1)
    x = np.random.default_rng(0).standard_normal(model.inputs[0].shape).astype(np.float32)
    got, want = model.run({"x": x}), reference.run({"x": x})
    for name in want:
        error = np.abs(got[name] - want[name]).max()
        assert 0 < error <= 0.05 * np.abs(want[name]).max()  # quantized, and close


def q4_0_values(w):
    """The values llama.cpp's q4_0 gives a [out, in] weight (groups of 32 along in)."""
    groups = w.reshape(w.shape[0], -1, 32).astype(np.float32)
    largest = np.take_along_axis(groups, np.abs(groups).argmax(axis=2)[..., None], axis=2)
    d = largest / np.float32(-8)
    inverse = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    q = np.minimum(15, np.trunc(groups * inverse + np.float32(8.5))) - 8
    return (q * d.astype(np.float16).astype(np.float32)).reshape(w.shape)


def test_int4_holds_q4_0_values_exactly():
    """Weights that are already q4_0 values go through int4 unchanged, so an
    int4 artifact differs from the fp32 one only by the 8-bit quantization of
    each gemm input per group of 32 (and bf16 attention where the CPU has it)."""
    case = CONFORMANCE_CASES / "llama_hf_tiny"
    weights = read_safetensors(case / "weights.safetensors")
    for name, w in weights.items():
        if w.ndim == 2 and "embed_tokens" not in name:
            weights[name] = q4_0_values(w)
    fp32 = ein.compile(case / "model.ein", weights=weights)
    int4 = ein.compile(case / "model.ein", weights=weights, precision="int4")
    assert int4.precision == "int4" and "i4[" in int4.describe()
    ids = np.load(case / "ids.npy").astype(np.int32)
    want, got = fp32.run({"ids": ids})["logits"], int4.run({"ids": ids})["logits"]
    error = np.abs(got - want).max()
    assert 0 < error <= 0.03 * np.abs(want).max()
    # Against weights that are not q4_0 values the error is the weights' own.
    plain = read_safetensors(case / "weights.safetensors")
    lossy = ein.compile(case / "model.ein", weights=plain, precision="int4").run({"ids": ids})["logits"]
    exact = ein.compile(case / "model.ein", weights=plain).run({"ids": ids})["logits"]
    assert np.abs(lossy - exact).max() > 3 * error


def q8_0_values(w):
    """The values llama.cpp's q8_0 gives a [k, n] weight (groups of 32 along k):
    d = the group's largest magnitude / 127, q = roundf(w / d) (half away from zero)."""
    groups = w.T.reshape(w.shape[1], -1, 32).astype(np.float32)
    d = np.abs(groups).max(axis=2, keepdims=True) / np.float32(127)
    inverse = np.divide(np.float32(1), d, out=np.zeros_like(d), where=d != 0)
    scaled = groups * inverse
    q = np.sign(scaled) * np.floor(np.abs(scaled) + np.float32(0.5))
    return (q * d.astype(np.float16).astype(np.float32)).reshape(w.shape[1], w.shape[0]).T.copy()


def test_int8_groups_hold_q8_0_values_exactly():
    """With group_size=32, int8 weights are q8_0's: weights that are q8_0
    values, times inputs that quantize exactly (integers up to 127 in each
    group of 32), give the f32 product to f32 rounding; a scale per column
    quantizes the same weights again and misses by far more."""
    text = "input x: f32[5, 96]\nparam w: f32[96, 40]\noutput y = x @ w\n"
    rng = np.random.default_rng(3)
    w = q8_0_values(rng.standard_normal((96, 40)).astype(np.float32) * rng.uniform(0.01, 2, (1, 40)).astype(np.float32))
    x = rng.integers(-127, 128, (5, 96)).astype(np.float32)
    x[:, ::32] = 127  # each group's largest magnitude: its scale is 1
    want = x.astype(np.float64) @ w.astype(np.float64)
    grouped = ein.compile(text, weights={"w": w}, precision="int8", group_size=32)
    assert grouped.precision == "int8" and "int8, a scale per group of 32" in grouped.describe()
    error = np.abs(grouped.run({"x": x})["y"] - want).max() / np.abs(want).max()
    per_column = ein.compile(text, weights={"w": w}, precision="int8")
    column_error = np.abs(per_column.run({"x": x})["y"] - want).max() / np.abs(want).max()
    assert error < 1e-6 and column_error > 100 * error


def test_int8_groups_have_less_logit_error_than_a_scale_per_column():
    case = CONFORMANCE_CASES / "llama_hf_tiny"
    weights = read_safetensors(case / "weights.safetensors")
    ids = np.load(case / "ids.npy").astype(np.int32)
    want = ein.compile(case / "model.ein", weights=weights).run({"ids": ids})["logits"]
    def error(**options):
        got = ein.compile(case / "model.ein", weights=weights, precision="int8", **options).run({"ids": ids})["logits"]
        return np.sqrt(np.mean((got - want) ** 2))
    assert error(group_size=32) < 0.9 * error()


@pytest.mark.parametrize("options, why", [({"precision": "int8", "group_size": 64}, "group size 64 is not one the kernels take"),
                                          ({"precision": "fp32", "group_size": 32}, "a group size is for precisions int8 and int4")])
def test_a_group_size_the_kernels_do_not_take_is_refused(options, why):
    with pytest.raises(ein.CompileError, match=why):
        ein.compile(LINEAR_RELU, random_weights=1, **options)


@pytest.mark.parametrize("value, why", [(np.inf, "not finite: it cannot be quantized to int4"),
                                        (1e7, "beyond int4's range")])
def test_int4_refuses_weights_it_cannot_hold(value, why):
    weights = linear_relu_weights()
    weights["fc.weight"][2, 3] = value
    with pytest.raises(ein.CompileError, match=why):
        ein.compile(LINEAR_RELU, weights=weights, precision="int4")


@pytest.mark.parametrize("options", [{"precision": "int8"}, {"precision": "int8", "group_size": 32},
                                     {"precision": "int4"}])
def test_quantizers_take_subnormal_weights(options):
    """A column of subnormal weights has a scale whose inverse overflows: the weights are
    quantized by the quotient itself, and their scale, subnormal in f32 and zero in f16, gives
    zero at run time (which flushes subnormals): 2e-4 of the output here; zeros stay zeros."""
    weights = linear_relu_weights()
    weights["fc.weight"][:, 1] = np.float32(1e-42) * np.array([1, -2, 0, 3], np.float32)
    weights["fc.weight"][:, 2] = 0
    weights["fc.bias"][1:3] = 0.5
    x = np.full((3, 4), 1e38, np.float32)
    got = ein.compile(LINEAR_RELU, weights=weights, **options).run({"x": x})["y"]
    want = np.maximum(x.astype(np.float64) @ weights["fc.weight"].astype(np.float64) + weights["fc.bias"], 0)
    np.testing.assert_allclose(got[:, 1:3], want[:, 1:3], rtol=0, atol=3e-4)


def test_bf16_precision_is_recorded():
    model = ein.compile(LINEAR_RELU, random_weights=1, precision="bf16")
    assert model.precision == "bf16" and model.target == "cpu"


def test_save_and_load_round_trip(tmp_path, linear_relu):
    model, weights = linear_relu
    model.save(tmp_path / "m.einb")
    loaded = ein.load(tmp_path / "m.einb", threads=2)
    assert loaded.threads == 2
    x = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_array_equal(loaded.run({"x": x})["y"], model.run({"x": x})["y"])
    # A loaded model saves the same bytes it was read from.
    loaded.save(tmp_path / "again.einb")
    assert (tmp_path / "again.einb").read_bytes() == (tmp_path / "m.einb").read_bytes()


def test_describe_is_ein_inspects_summary(linear_relu):
    text = linear_relu[0].describe()
    assert text.startswith("<source>: ein artifact v")
    assert "inputs:\n  x: f32[3, 4]\n" in text and "outputs:\n  y: f32[3, 5]\n" in text
    assert "params: 2 tensors, 100 bytes\n" in text
    assert "gemm" in text and "at <source>:5:" in text


def test_describe_equals_ein_inspect(tmp_path):
    ein_inspect = pathlib.Path(os.environ.get("EIN_BUILD_DIR", REPO / "build")) / "bin" / "ein-inspect"
    if not ein_inspect.exists():
        pytest.skip(f"no {ein_inspect} (build the C++ tools, or set EIN_BUILD_DIR)")
    ein.compile(EXAMPLES / "mhsa.ein", random_weights=1).save(tmp_path / "mhsa.einb")
    printed = subprocess.run([ein_inspect, tmp_path / "mhsa.einb"], check=True, capture_output=True, text=True).stdout
    assert ein.load(tmp_path / "mhsa.einb").describe() == printed


def test_help_documents_the_api():
    assert "safetensors" in ein.compile.__doc__ and "CompileError" in ein.compile.__doc__
    assert "out" in ein.Model.run.__doc__
