"""Ranged dims: one compiled model for every batch size and length."""
import threading

import numpy as np
import pytest

import ein

# Masked mean pooling of a linear layer over tokens: the ranged dims b and t
# size the inputs, and the padding mask must agree with x on both.
POOL = """
dim b = 1..8, t = 1..32, c = 4, o = 3
input x: f32[b, t, c]
input keep: f32[b, t]
param w: f32[o, c]
y = relu(linear(x, w))
k = rearrange(keep, "b t -> b t 1")
output pooled = reduce(y * k, "b t o -> b o", "sum") / reduce(k, "b t o -> b o", "sum")
output first = y[:, 0]
"""


def reference(x, keep, w):
    y = np.maximum(x.astype(np.float64) @ w.astype(np.float64).T, 0)
    k = keep[:, :, None].astype(np.float64)
    return (y * k).sum(axis=1) / k.sum(axis=1), y[:, 0]


@pytest.fixture(scope="module")
def pool():
    w = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    return ein.compile(POOL, weights={"w": w}), w


def example(b, t, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((b, t, 4)).astype(np.float32)
    keep = (rng.random((b, t)) < 0.7).astype(np.float32)
    keep[:, 0] = 1  # every row keeps a token
    return x, keep


def test_inputs_show_the_dims_and_their_ranges(pool):
    model, _ = pool
    assert model.dims == {"b": (1, 8), "t": (1, 32)}
    assert [(i.name, i.shape) for i in model.inputs] == [("x", ("b", "t", 4)), ("keep", ("b", "t"))]
    assert [(o.name, o.shape) for o in model.outputs] == [("pooled", ("b", 3)), ("first", ("b", 3))]
    assert "dims: b = 1..8, t = 1..32" in model.describe()


def test_one_model_runs_every_shape_in_its_ranges(pool):
    model, w = pool
    for seed, (b, t) in enumerate([(1, 1), (1, 7), (3, 16), (8, 32), (2, 5), (3, 16)]):
        x, keep = example(b, t, seed)
        got = model.run({"x": x, "keep": keep})
        pooled, first = reference(x, keep, w)
        assert got["pooled"].shape == (b, 3) and got["first"].shape == (b, 3)
        np.testing.assert_allclose(got["pooled"], pooled, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got["first"], first, rtol=1e-5, atol=1e-6)


def test_out_buffers_take_the_shape_of_this_run(pool):
    model, w = pool
    x, keep = example(2, 9, 3)
    out = np.empty((2, 3), np.float32)
    got = model.run({"x": x, "keep": keep}, out={"pooled": out})
    assert got["pooled"] is out
    np.testing.assert_allclose(out, reference(x, keep, w)[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(ein.InputError, match=r'out= buffer for output "pooled" must be a C-contiguous f32\[2, 3\]'):
        model.run({"x": x, "keep": keep}, out={"pooled": np.empty((8, 3), np.float32)})


@pytest.mark.parametrize(
    "x_shape, keep_shape, message",
    [
        ((2, 33, 4), (2, 33), r"t ranges over 1\.\.32"),
        ((9, 3, 4), (9, 3), r"b ranges over 1\.\.8"),
        ((2, 0, 4), (2, 0), r"t ranges over 1\.\.32"),
        ((2, 5, 4), (2, 6), r'input "keep" axis 1 is 6, but t = 5 \(from input "x" axis 1\)'),
        ((2, 5, 5), (2, 5), r'input "x" expects f32\[b, t, 4\], got float32\[2, 5, 5\]'),
        ((2, 5), (2, 5), r'input "x" expects f32\[b, t, 4\], got float32\[2, 5\]'),
    ],
)
def test_shapes_outside_the_ranges_or_disagreeing_are_input_errors(pool, x_shape, keep_shape, message):
    model, _ = pool
    with pytest.raises(ein.InputError, match=message):
        model.run({"x": np.zeros(x_shape, np.float32), "keep": np.ones(keep_shape, np.float32)})


def test_threads_at_different_shapes_get_their_own_results(pool):
    model, w = pool
    shapes = [(1 + i % 8, 1 + (7 * i) % 32) for i in range(16)]
    failures = []

    def worker(index):
        b, t = shapes[index]
        x, keep = example(b, t, 100 + index)
        for _ in range(20):
            got = model.run({"x": x, "keep": keep})["pooled"]
            if not np.allclose(got, reference(x, keep, w)[0], rtol=1e-5, atol=1e-6):
                failures.append((b, t))
                return

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(shapes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_dims_argument_pins_or_ranges_a_dim():
    pinned = ein.compile(POOL, random_weights=1, dims={"t": 5})
    assert pinned.dims == {"b": (1, 8)} and pinned.inputs[0].shape == ("b", 5, 4)
    ranged = ein.compile(POOL, random_weights=1, dims={"b": (2, 4)})
    assert ranged.dims == {"b": (2, 4), "t": (1, 32)}
    with pytest.raises(ValueError, match=r"must be a positive integer or a \(min, max\) pair"):
        ein.compile(POOL, random_weights=1, dims={"t": (9, 3)})


# The BERT-style example (examples/models/bert_encoder.ein) against a float64
# NumPy transcription of the same Hugging Face BertModel computation, at
# shapes across its ranges (t = 37: no multiple of any kernel tile).
ENCODER = __import__("pathlib").Path(__file__).resolve().parents[2] / "examples" / "models" / "bert_encoder.ein"
C, H, F, VOCAB, POSITIONS, LAYERS = 64, 4, 256, 1000, 256, 4


def encoder_weights(seed=0):
    rng = np.random.default_rng(seed)
    normal = lambda *shape: (0.1 * rng.standard_normal(shape)).astype(np.float32)
    weights = {
        "embeddings.word_embeddings.weight": normal(VOCAB, C),
        "embeddings.position_embeddings.weight": normal(POSITIONS, C),
        "embeddings.LayerNorm.weight": 1 + normal(C),
        "embeddings.LayerNorm.bias": normal(C),
    }
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for name in ["attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"]:
            weights[p + name + ".weight"], weights[p + name + ".bias"] = normal(C, C), normal(C)
        weights[p + "intermediate.dense.weight"], weights[p + "intermediate.dense.bias"] = normal(F, C), normal(F)
        weights[p + "output.dense.weight"], weights[p + "output.dense.bias"] = normal(C, F), normal(C)
        for norm in ["attention.output.LayerNorm", "output.LayerNorm"]:
            weights[p + norm + ".weight"], weights[p + norm + ".bias"] = 1 + normal(C), normal(C)
    return weights


def encoder_reference(ids, mask, weights):
    w = {name: value.astype(np.float64) for name, value in weights.items()}
    linear = lambda x, name: x @ w[name + ".weight"].T + w[name + ".bias"]

    def layernorm(x, name):
        mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-12) * w[name + ".weight"] + w[name + ".bias"]

    gelu = lambda x: 0.5 * x * (1 + np.vectorize(__import__("math").erf)(x / np.sqrt(2)))
    b, t = ids.shape
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:t]
    x = layernorm(x, "embeddings.LayerNorm")
    padding = ((1 - mask) * -10000.0)[:, None, None, :]
    heads = lambda y: y.reshape(b, t, H, C // H).transpose(0, 2, 1, 3)
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        q, k, v = (heads(linear(x, p + "attention.self." + n)) for n in ("query", "key", "value"))
        s = q @ k.transpose(0, 1, 3, 2) * (C // H) ** -0.5 + padding
        s = np.exp(s - s.max(-1, keepdims=True))
        a = (s / s.sum(-1, keepdims=True)) @ v
        a = linear(a.transpose(0, 2, 1, 3).reshape(b, t, C), p + "attention.output.dense")
        x = layernorm(a + x, p + "attention.output.LayerNorm")
        y = linear(gelu(linear(x, p + "intermediate.dense")), p + "output.dense")
        x = layernorm(y + x, p + "output.LayerNorm")
    keep = mask[:, :, None].astype(np.float64)
    return (x * keep).sum(1) / keep.sum(1)


def test_bert_encoder_matches_float64_at_every_shape():
    weights = encoder_weights()
    model = ein.compile(ENCODER, weights=weights)
    assert model.dims == {"b": (1, 16), "t": (1, 256)}
    rng = np.random.default_rng(1)
    for b, t in [(1, 1), (1, 7), (3, 16), (2, 37), (16, 256)]:
        ids = rng.integers(0, VOCAB, (b, t)).astype(np.int32)
        mask = np.ones((b, t), np.int32)
        for row in range(b):
            mask[row, rng.integers(1, t + 1):] = 0  # padding after a random length, at least one token
        got = model.run({"ids": ids, "mask": mask})["sentence"]
        np.testing.assert_allclose(got, encoder_reference(ids, mask, weights), rtol=1e-4, atol=1e-4,
                                   err_msg=f"b={b}, t={t}")


# Tables computed from constants, sliced where the dims say: a fixed-size
# slice at an offset over a ranged dim has no value until the run's dims are
# known (it folded once as if t were -1). argmax over a ranged axis too.
CONSTANT_SLICES = """
dim t = 1..16, v = 6
input logits: f32[t, v]
output last = arange(t, t + 1)
output previous_two = arange(t - 2, t) * 10
output angle = sin(f32(arange(16)))[t - 1:t]
output best = argmax(logits)
output when = argmin(logits, 0, keepdim=true)
"""


def test_constant_tables_slice_at_the_runs_dims():
    model = ein.compile(CONSTANT_SLICES, dims={"t": (2, 16)})
    for t in (2, 5, 16):
        logits = np.random.default_rng(t).standard_normal((t, 6)).astype(np.float32)
        got = model.run({"logits": logits})
        np.testing.assert_array_equal(got["last"], [t])
        np.testing.assert_array_equal(got["previous_two"], [10 * (t - 2), 10 * (t - 1)])
        np.testing.assert_allclose(got["angle"], [np.sin(np.float32(t - 1))], rtol=1e-6)
        np.testing.assert_array_equal(got["best"], logits.argmax(-1))
        np.testing.assert_array_equal(got["when"], logits.argmin(0)[None])


# Splitting an axis by a size over ranged dims: "(b t) c -> b t c" with b=b
# of the (b t) merged before, the einops round trip of a flattened batch.
SPLIT_BY_RANGED = """
dim b = 1..4, t = 1..8, c = 3
input x: f32[b, t, c]
flat = rearrange(x, "b t c -> (b t) c")
output back = rearrange(flat * 2, "(b t) c -> b t c", b=b)
output heads = rearrange(rearrange(x, "b t c -> b (t c)"), "b (t c) -> b c t", t=t)
"""


def test_axes_split_by_sizes_over_ranged_dims():
    model = ein.compile(SPLIT_BY_RANGED)
    for b, t in [(1, 1), (2, 5), (4, 8)]:
        x = np.random.default_rng(b * t).standard_normal((b, t, 3)).astype(np.float32)
        got = model.run({"x": x})
        np.testing.assert_array_equal(got["back"], x * 2)
        np.testing.assert_array_equal(got["heads"], x.transpose(0, 2, 1))
    with pytest.raises(ein.CompileError, match=r"t \+ 1 is not a multiple of t at every value of the dims"):
        ein.compile("dim t = 1..8\ninput x: f32[t + 1]\noutput y = rearrange(x, \"(t c) -> t c\", t=t)\n")
