"""ein._batching, without a server: per-request checks, merging with padding,
and each request's own rows back."""
import numpy as np
import pytest

import ein
from ein._batching import RequestError, check_request, run_batch, signature

from conftest import EXAMPLES

# Requests of different batch sizes and lengths; rows and lengths differ
# so that a row or length mixed up between requests shows.
SHAPES = [(1, 8), (3, 37), (2, 1), (1, 256), (4, 100), (2, 37)]


@pytest.fixture(scope="module")
def encoder():
    return ein.compile(EXAMPLES / "bert_encoder.ein", random_weights=1)


def bert_request(b, t, seed, padding=3):
    """ids and a mask whose last ``padding`` tokens (of rows after the first) are padding."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 1000, (b, t), dtype=np.int32)
    mask = np.ones((b, t), np.int32)
    mask[1:, max(1, t - padding):] = 0
    return {"ids": ids, "mask": mask}


def expect_alone(encoder, requests, results):
    """Each result is what the request gives run alone."""
    for request, result in zip(requests, results):
        alone = encoder.run(request)["sentence"]
        assert result["sentence"].shape == alone.shape
        np.testing.assert_allclose(result["sentence"], alone, rtol=1e-5, atol=1e-5)


def run_shapes(encoder, monkeypatch):
    """The ids shape of every run of the encoder from now on."""
    shapes = []
    original = type(encoder).run
    monkeypatch.setattr(type(encoder), "run", lambda self, inputs, **kw: shapes.append(inputs["ids"].shape)
                        or original(self, inputs, **kw))
    return shapes


def test_merged_requests_get_their_own_rows(encoder, monkeypatch):
    sig = signature(encoder, ["t"])
    requests = [bert_request(b, t, seed) for seed, (b, t) in enumerate(SHAPES[:4])]
    shapes = run_shapes(encoder, monkeypatch)
    results = run_batch(encoder, sig, requests, max_padding=float("inf"))
    assert shapes == [(7, 256)]
    monkeypatch.undo()
    expect_alone(encoder, requests, results)


def test_padding_stays_within_max_padding(encoder, monkeypatch):
    sig = signature(encoder, ["t"])
    requests = [bert_request(b, t, seed) for seed, (b, t) in enumerate(SHAPES)]
    shapes = run_shapes(encoder, monkeypatch)
    results = run_batch(encoder, sig, requests, max_padding=1.5)
    # Longest first, elements padded <= 1.5 x real: 1x256 takes no other
    # (5x256 for 656 real); 4x100 takes 3x37 (7x100 for 511) but not 2x37
    # (9x100 for 585); 2x37 takes 1x8 (3x37 for 82) but not 2x1 (5x37 for 84).
    # The cheapest runs go first.
    assert shapes == [(2, 1), (3, 37), (1, 256), (7, 100)]
    monkeypatch.undo()
    expect_alone(encoder, requests, results)


def test_without_padding_only_equal_lengths_merge(encoder, monkeypatch):
    sig = signature(encoder)
    requests = [bert_request(b, t, seed) for seed, (b, t) in enumerate(SHAPES)]
    shapes = run_shapes(encoder, monkeypatch)
    results = run_batch(encoder, sig, requests, max_padding=float("inf"))
    assert sorted(shapes) == sorted([(1, 8), (5, 37), (2, 1), (1, 256), (4, 100)])
    monkeypatch.undo()
    expect_alone(encoder, requests, results)


def test_more_rows_than_the_batch_dim_allows_run_in_several_batches(encoder, monkeypatch):
    sig = signature(encoder, ["t"])
    requests = [bert_request(6, 5 + i, i) for i in range(4)]  # 24 rows, b <= 16
    shapes = run_shapes(encoder, monkeypatch)
    results = run_batch(encoder, sig, requests, max_padding=float("inf"))
    assert shapes == [(12, 6), (12, 8)]
    monkeypatch.undo()
    expect_alone(encoder, requests, results)


@pytest.mark.parametrize("change, message", [
    (lambda r: {**r, "extra": r["ids"]}, r'unknown input "extra"; the model takes \[ids, mask\]'),
    (lambda r: {"ids": r["ids"]}, r'input "mask" is missing'),
    (lambda r: {**r, "ids": r["ids"].astype(np.float32)}, r'input "ids" expects i32\[b, t\], got f32\[2, 5\]'),
    (lambda r: {**r, "mask": r["mask"][:, :, None]}, r'input "mask" expects i32\[b, t\], got i32\[2, 5, 1\]'),
    (lambda r: bert_request(2, 300, 0), r'input "ids" axis 1 is 300, but t ranges over 1\.\.256'),
    (lambda r: bert_request(17, 4, 0), r'input "ids" axis 0 is 17, but b ranges over 1\.\.16'),
    (lambda r: {**r, "mask": r["mask"][:, :4]}, r'input "mask" axis 1 is 4, but t = 5 \(from input "ids" axis 1\)'),
    (lambda r: {**r, "ids": np.full((2, 5), 1000, np.int32)}, r'input "ids" holds id 1000, outside \[0, 1000\)'),
    (lambda r: {**r, "ids": np.full((2, 5), -2, np.int32)}, r'input "ids" holds id -2, outside \[0, 1000\)'),
])
def test_a_malformed_request_fails_alone(encoder, change, message):
    sig = signature(encoder, ["t"])
    bad = change(bert_request(2, 5, 9))
    with pytest.raises(RequestError, match=message):
        check_request(sig, bad)
    good = [bert_request(b, t, seed) for seed, (b, t) in enumerate(SHAPES[:3])]
    results = run_batch(encoder, sig, [good[0], bad, good[1], good[2]], max_padding=float("inf"))
    assert isinstance(results[1], RequestError)
    expect_alone(encoder, good, [results[0], results[2], results[3]])


def test_a_merged_run_that_fails_is_retried_one_by_one(encoder):
    """A failure only the runtime sees (here a stand-in model that refuses
    one request's ids) fails that request and no other."""
    class Refuses42:
        inputs, outputs, dims = encoder.inputs, encoder.outputs, encoder.dims

        def run(self, inputs):
            if (inputs["ids"] == 42).any():
                raise ein.InputError("input \"ids\" holds the refused id 42")
            return encoder.run(inputs)

    sig = signature(encoder, ["t"])
    requests = [bert_request(2, 6, 1), {"ids": np.full((1, 3), 42, np.int32), "mask": np.ones((1, 3), np.int32)},
                bert_request(1, 9, 2)]
    results = run_batch(Refuses42(), sig, requests, max_padding=float("inf"))
    assert isinstance(results[1], RequestError) and "refused id 42" in str(results[1])
    expect_alone(encoder, [requests[0], requests[2]], [results[0], results[2]])


def test_models_that_cannot_be_served_are_refused_by_name(encoder):
    fixed = ein.compile(EXAMPLES / "mhsa.ein", random_weights=1)
    with pytest.raises(ValueError, match="a served model needs a batch dim"):
        signature(fixed)
    with pytest.raises(ValueError, match=r'cannot pad dim "b": the ranged dims besides the batch dim "b" are \[t\]'):
        signature(encoder, ["b"])
