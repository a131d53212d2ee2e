"""An encoder-decoder's cross-attention cache (keep() in the language): the
encoder runs at a sequence's first run, its keys and values stay in the
session, and later runs read them without the encoder's input. Generation
takes the encoder's inputs as encoder_inputs."""
import json

import numpy as np
import pytest

import ein

# A toy translation model: an encoder over src, a decoder over ids with a
# self-attention cache and cross-attention to the kept encoder keys/values.
MODEL = """
dim t = 1..16, s = 1..6, vocab = 11
position past = 0..16
input src: f32[1, s, 8]
input ids: i64[1, t]
param encoder.weight: f32[8, 8]
param embed.weight: f32[vocab, 8]
param head.weight: f32[vocab, 8]
state cache.k: f32[1, 2, 16, 4]
state cross.k: f32[1, 2, 6, 4]
state cross.v: f32[1, 2, 6, 4]
e = rearrange(gelu(linear(src, encoder.weight)), "b s (h d) -> b h s d", h=2)
ck = keep(cross.k, e, axis=2)
cv = keep(cross.v, e * 2.0, axis=2)
x = rearrange(embedding(ids, embed.weight), "b t (h d) -> b h t d", h=2)
k = append(cache.k, x, axis=2)
a = scaled_dot_product_attention(x, k, k, causal=true)
c = scaled_dot_product_attention(a, ck, cv) + x
output logits = linear(rearrange(c, "b h t d -> b t (h d)"), head.weight)
"""


@pytest.fixture(scope="module")
def model():
    return ein.compile(MODEL, random_weights=3)


def source(scale=1.0):
    return (scale * np.random.default_rng(5).standard_normal((1, 5, 8))).astype(np.float32)


def greedy_by_hand(model, src, start, count):
    """Whole-prefix runs of a fresh session per token: no cache involved."""
    ids = list(start)
    for _ in range(count):
        logits = model.session().run({"src": src, "ids": np.array([ids])})["logits"]
        ids.append(int(np.argmax(logits[0, -1])))
    return ids[len(start):]


def test_the_encoders_input_is_marked_first_run(model):
    inputs = {info.name: info for info in model.inputs}
    assert inputs["src"].first_run and not inputs["ids"].first_run


def test_generate_with_encoder_inputs_equals_whole_prefix_runs(model):
    src = source()
    tokens = model.generate([1, 2], max_new_tokens=8, encoder_inputs={"src": src})
    assert tokens == greedy_by_hand(model, src, [1, 2], 8)
    other = model.generate([1, 2], max_new_tokens=8, encoder_inputs={"src": source(4.0)})
    assert other == greedy_by_hand(model, source(4.0), [1, 2], 8)


def test_later_runs_need_no_encoder_input_and_refuse_one(model):
    session = model.session()
    with pytest.raises(ein.Error, match='input "src"'):
        session.run({"ids": np.array([[1, 2]])})  # the decoder before its encoder
    whole = model.session().run({"src": source(), "ids": np.array([[1, 2, 3]])})["logits"]
    session.run({"src": source(), "ids": np.array([[1, 2]])})
    step = session.run({"ids": np.array([[3]])})["logits"]
    np.testing.assert_allclose(step[0, 0], whole[0, 2], rtol=1e-5, atol=1e-5)
    with pytest.raises(ein.Error, match="first run only"):
        session.run({"src": source(), "ids": np.array([[4]])})
    fork = session.fork()
    np.testing.assert_allclose(fork.run({"ids": np.array([[4]])})["logits"],
                               session.run({"ids": np.array([[4]])})["logits"], rtol=1e-6)


def test_a_batch_of_encoder_inputs_gives_a_result_a_row(model):
    first, second = source(), source(4.0)
    both = {"src": np.concatenate([first, second])}
    alone = [model.generate([1, 2], max_new_tokens=6, encoder_inputs={"src": src}) for src in (first, second)]
    assert model.generate([1, 2], max_new_tokens=6, encoder_inputs=both) == alone
    assert alone[0] != alone[1]
    beams = model.generate([1, 2], max_new_tokens=6, num_beams=2, num_return_sequences=2, encoder_inputs=both)
    assert beams == [model.generate([1, 2], max_new_tokens=6, num_beams=2, num_return_sequences=2,
                                    encoder_inputs={"src": src}) for src in (first, second)]


def test_rows_of_a_model_that_runs_one_sequence_at_a_time_run_one_after_another():
    # The same model, its logits scaled by a mean of its cached keys: a
    # sequence's own value read after a kernel over every sequence's tokens,
    # so it serves one sequence per run (LANGUAGE.md "Many sequences at once").
    one = ein.compile(MODEL.replace(
        'output logits = linear(rearrange(c, "b h t d -> b t (h d)"), head.weight)',
        'h = linear(rearrange(c, "b h t d -> b t (h d)"), head.weight)\n'
        'm = mean(rearrange(mean(k, axis=2, keepdim=true), "b h o d -> b o (h d)"), axis=2, keepdim=true)\n'
        'output logits = h * m'), random_weights=3)
    assert not one._native.serves_many_sequences
    rows = np.concatenate([source(), source(4.0)])
    assert one.generate([1, 2], max_new_tokens=6, encoder_inputs={"src": rows}) == \
        [one.generate([1, 2], max_new_tokens=6, encoder_inputs={"src": rows[i:i + 1]}) for i in range(2)]


def test_a_scheduler_takes_each_requests_encoder_inputs(model):
    sources = [source(), source(4.0), source(0.5)[:, :3]]  # another encoder length too
    alone = [model.generate([1, 2], max_new_tokens=6, encoder_inputs={"src": src}) for src in sources]
    with ein.Scheduler(model, max_sequences=2, threads=2) as scheduler:
        requests = [scheduler.submit([1, 2], max_new_tokens=6, encoder_inputs={"src": src}) for src in sources]
        assert [request.wait() for request in requests] == alone
        assert [request.cached_tokens for request in requests] == [0, 0, 0]
        searches = [scheduler.submit([1, 2], max_new_tokens=6, num_beams=2, num_return_sequences=2,
                                     encoder_inputs={"src": src}) for src in sources]
        assert [[tokens for tokens, _ in search.hypotheses()] for search in searches] == \
            [model.generate([1, 2], max_new_tokens=6, num_beams=2, num_return_sequences=2,
                            encoder_inputs={"src": src}) for src in sources]
        with pytest.raises(ein.Error, match="not given"):
            scheduler.submit([1, 2])
        with pytest.raises(ein.InputError, match="no input"):
            scheduler.submit([1], encoder_inputs={"features": source()})
        with pytest.raises(ein.Error, match="src"):
            scheduler.submit([1], encoder_inputs={"src": source()[0]})


def test_the_decoders_start_ids_may_be_named_as_transformers_names_them(model):
    src = {"src": source()}
    assert model.generate(decoder_start_ids=[1, 2], max_new_tokens=4, encoder_inputs=src) == \
        model.generate([1, 2], max_new_tokens=4, encoder_inputs=src)
    with pytest.raises(TypeError, match="not both"):
        model.generate([1], decoder_start_ids=[1], encoder_inputs=src)
    with pytest.raises(TypeError, match="generate needs a prompt"):
        model.generate(encoder_inputs=src)


def test_encoder_inputs_are_checked(model):
    with pytest.raises(ein.InputError, match="no input"):
        model.generate([1], encoder_inputs={"features": source()})
    with pytest.raises(TypeError, match="encoder_inputs"):
        model.generate([1], encoder_inputs=[source()])


def test_beam_search_with_one_beam_is_greedy_and_more_beams_score_no_worse(model):
    src = {"src": source()}
    greedy = model.generate([1, 2], max_new_tokens=6, encoder_inputs=src)
    assert model.generate([1, 2], max_new_tokens=6, num_beams=1, num_return_sequences=1, encoder_inputs=src) == greedy
    hypotheses = model.generate([1, 2], max_new_tokens=6, num_beams=3, num_return_sequences=3, encoder_inputs=src)
    assert len(hypotheses) == 3 and all(len(h) == 6 for h in hypotheses)
    assert len({tuple(h) for h in hypotheses}) == 3


def test_beam_search_processors_hold(model):
    src = {"src": source()}
    found = model.generate([1, 2], max_new_tokens=12, num_beams=3, num_return_sequences=3, encoder_inputs=src,
                           no_repeat_ngram_size=2, suppress_tokens=[4, 7], begin_suppress_tokens=[5])
    for tokens in found:
        sequence = [1, 2] + tokens
        pairs = list(zip(sequence, sequence[1:]))
        assert len(pairs) == len(set(pairs)), sequence
        assert 4 not in tokens and 7 not in tokens and tokens[0] != 5


def test_beam_search_arguments_are_checked(model):
    src = {"src": source()}
    with pytest.raises(ValueError, match="num_return_sequences must not exceed num_beams"):
        model.generate([1], num_beams=2, num_return_sequences=3, encoder_inputs=src)
    with pytest.raises(ValueError, match="temperature must be 0"):
        model.generate([1], num_beams=2, temperature=0.5, encoder_inputs=src)
    with pytest.raises(ValueError, match="early_stopping"):
        model.generate([1], num_beams=2, early_stopping="soon", encoder_inputs=src)
    with pytest.raises(ValueError, match="num_beams must be an integer >= 1"):
        model.generate([1], num_beams=0, encoder_inputs=src)
    with pytest.raises(ValueError, match="go with num_beams > 1"):
        model.generate([1], no_repeat_ngram_size=2, encoder_inputs=src)


def test_whisper_features_of_the_wrong_shape_are_refused():
    from conftest import REPO
    case = REPO / "tests" / "conformance" / "cases" / "hf_whisper_tiny"
    whisper = ein.from_pretrained(case / "checkpoint")
    features = np.load(case / "input_features.npy")  # [1, 20, 48]
    with pytest.raises(ein.Error, match="input_features"):
        whisper.generate([1], max_new_tokens=2, encoder_inputs={"input_features": features[:, :19]})
    too_long = np.zeros((1, 20, 49), np.float32)  # 2 * max_source_positions frames at most
    with pytest.raises(ein.Error, match="frames"):
        whisper.generate([1], max_new_tokens=2, encoder_inputs={"input_features": too_long})
    with pytest.raises(ein.Error, match='input "input_features"'):
        whisper.generate([1], max_new_tokens=2)  # the decoder before its encoder


def test_log_mel_features_are_whisper_feature_extractors():
    """ein.audio against WhisperFeatureExtractor's features of the same 2 s signal (its first
    200 frames stored, written by transformers 5.24; the rest of the 30 s is the padding's)."""
    import ein.audio
    from conftest import REPO
    t = np.arange(16000 * 2) / 16000
    rng = np.random.default_rng(0)
    signal = (0.5 * np.sin(2 * np.pi * 440 * t) + 0.2 * np.sin(2 * np.pi * 2500 * t * t)
              + 0.05 * rng.standard_normal(t.shape)).astype(np.float32)
    features = ein.audio.log_mel_spectrogram(signal)
    assert features.shape == (80, 3000) and features.dtype == np.float32
    expected = np.load(REPO / "python" / "tests" / "data" / "whisper_features_2s.npy")
    np.testing.assert_allclose(features[:, :200], expected, atol=1e-4)
    # A 440 Hz tone's energy lies in the mel bin whose filter peaks nearest 440 Hz.
    tone = ein.audio.log_mel_spectrogram(np.sin(2 * np.pi * 440 * t), chunk_seconds=None)
    peaks = np.linspace(0, 8000, 201)[np.argmax(ein.audio.mel_filters(), axis=0)]
    assert np.argmax(tone[:, 50]) == np.argmin(np.abs(peaks - 440))
    with pytest.raises(ValueError, match="one channel"):
        ein.audio.log_mel_spectrogram(np.zeros((2, 100)))


def encoder_decoder_cases():
    from conftest import REPO
    cases = REPO / "tests" / "conformance" / "cases"
    return sorted(case.name for case in cases.glob("hf_*") if (case / "generation.json").exists()
                  and "encoder_inputs" in json.loads((case / "generation.json").read_text()))


@pytest.mark.parametrize("name", encoder_decoder_cases())
def test_checkpoint_folders_generate_what_transformers_generates(name):
    """Each encoder-decoder checkpoint case (Whisper, T5, BART, Marian, mBART, M2M100) through
    ein.from_pretrained: greedy tokens and the 4 beams' sequences of transformers' generate."""
    from conftest import REPO
    case = REPO / "tests" / "conformance" / "cases" / name
    spec = json.loads((case / "generation.json").read_text())
    model = ein.from_pretrained(case / "checkpoint")
    encoder_inputs = {input_name: np.load(case / f"{input_name}.npy") for input_name in spec["encoder_inputs"]}
    greedy = model.generate(spec["prompt"], max_new_tokens=len(spec["greedy"]), encoder_inputs=encoder_inputs)
    assert greedy == spec["greedy"]
    search = spec["beam_search"]
    beams = model.generate(spec["prompt"], max_new_tokens=search["max_new_tokens"], encoder_inputs=encoder_inputs,
                           num_beams=search["num_beams"], num_return_sequences=len(search["sequences"]),
                           length_penalty=search["length_penalty"], early_stopping=search["early_stopping"],
                           stop_tokens=[search["eos_token_id"]])
    # transformers pads a hypothesis that ended early with the end id (mT5's case).
    eos, length = search["eos_token_id"], len(search["sequences"][0])
    assert [beam + [eos] * (length - len(beam)) for beam in beams] == search["sequences"]
