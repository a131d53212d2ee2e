"""ein.Session: state kept from run to run, reset, fork, and streaming
generation that yields Model.generate's tokens one next() at a time, on the
Llama-style decoder (examples/models/llama_decoder.ein) with random weights."""
import threading

import numpy as np
import pytest

import ein
from conftest import LINEAR_RELU

PROMPT = [3, 1, 4, 1, 5]
SAMPLING = dict(temperature=0.9, top_k=16, top_p=0.9, seed=11)


def ids(tokens):
    return {"ids": np.array([tokens], np.int64)}


@pytest.mark.parametrize("options", [{}, SAMPLING], ids=["greedy", "sampled"])
def test_streaming_yields_model_generate_tokens(llama_decoder, options):
    expected = llama_decoder.generate(PROMPT, max_new_tokens=12, **options)
    assert len(expected) == 12
    session = llama_decoder.session()
    assert list(session.generate(PROMPT, max_new_tokens=12, **options)) == expected
    # Generation stops after a stop token, as Model.generate does.
    stop = expected[4]
    session.reset()  # a new sequence: the cache holds the first generation's tokens
    stopped = list(session.generate(PROMPT, max_new_tokens=12, stop_tokens=[stop], **options))
    assert stopped == llama_decoder.generate(PROMPT, max_new_tokens=12, stop_tokens=[stop], **options)
    assert stopped == expected[:expected.index(stop) + 1]


def test_each_token_is_computed_when_asked_for(llama_decoder):
    session = ein.Session(llama_decoder)
    generation = session.generate(PROMPT, max_new_tokens=5)
    assert session.position == 0  # nothing has run yet
    first = next(generation)
    assert session.position == len(PROMPT)  # the prefill only
    next(generation)
    assert session.position == len(PROMPT) + 1  # one decode step: the first token
    assert generation.tokens == llama_decoder.generate(PROMPT, max_new_tokens=2) and generation.tokens[0] == first


def test_breaking_early_leaves_the_session_usable(llama_decoder):
    expected = llama_decoder.generate(PROMPT, max_new_tokens=10)
    session = llama_decoder.session()
    taken = []
    for token in session.generate(PROMPT, max_new_tokens=10):
        taken.append(token)
        if len(taken) == 3:
            break
    assert taken == expected[:3]
    # The third token was chosen but not yet run: going on from it continues the sequence.
    assert session.position == len(PROMPT) + 2
    assert list(session.generate(taken[-1:], max_new_tokens=7)) == expected[3:]
    session.reset()
    assert session.position == 0
    assert list(session.generate(PROMPT, max_new_tokens=10)) == expected


def test_zero_new_tokens_runs_the_prompt_only(llama_decoder):
    session = llama_decoder.session()
    assert list(session.generate(PROMPT, max_new_tokens=0)) == []
    assert session.position == len(PROMPT)


def test_a_superseded_generation_cannot_go_on(llama_decoder):
    session = llama_decoder.session()
    generation = session.generate(PROMPT, max_new_tokens=5)
    next(generation)
    session.reset()
    with pytest.raises(ein.Error, match="this generation cannot go on: its session has run, been reset or begun "
                                        "another generation since its last token"):
        next(generation)
    assert list(session.generate(PROMPT, max_new_tokens=3)) == llama_decoder.generate(PROMPT, max_new_tokens=3)


def test_run_appends_to_the_state_and_reset_empties_it(llama_decoder):
    session = llama_decoder.session()
    first = session.run(ids(PROMPT))["logits"]
    assert first.shape == (1, len(PROMPT), 128) and session.position == len(PROMPT)
    session.run(ids([7]))
    assert session.position == len(PROMPT) + 1
    session.reset()
    assert session.position == 0
    np.testing.assert_array_equal(session.run(ids(PROMPT))["logits"], first)
    # Model.run is a new sequence every call; the session's first run is one too.
    np.testing.assert_array_equal(llama_decoder.run(ids(PROMPT))["logits"], first)


def test_fork_equals_an_unforked_run(llama_decoder):
    session = llama_decoder.session()
    session.run(ids(PROMPT))
    fork = session.fork()
    assert fork.position == session.position == len(PROMPT)
    unforked = llama_decoder.session()
    unforked.run(ids(PROMPT))
    expected = unforked.run(ids([9]))["logits"]
    np.testing.assert_array_equal(fork.run(ids([9]))["logits"], expected)
    # The two go on apart: the original has not seen the fork's token.
    assert session.position == len(PROMPT) and fork.position == len(PROMPT) + 1
    np.testing.assert_array_equal(session.run(ids([9]))["logits"], expected)
    np.testing.assert_array_equal(session.fork().run(ids([2]))["logits"], fork.run(ids([2]))["logits"])


def test_fork_mid_generation_continues_alike(llama_decoder):
    expected = llama_decoder.generate(PROMPT, max_new_tokens=8)
    session = llama_decoder.session()
    generation = session.generate(PROMPT, max_new_tokens=8)
    head = [next(generation) for _ in range(4)]
    fork = session.fork()
    assert list(fork.generate(head[-1:], max_new_tokens=4)) == expected[4:]
    assert head + list(generation) == expected  # forking did not end the original's generation


def test_last_generation_has_the_timing(llama_decoder):
    session = llama_decoder.session()
    assert session.last_generation is None
    generation = session.generate(PROMPT, max_new_tokens=6)
    next(generation)
    next(generation)
    so_far = session.last_generation
    assert (so_far.prompt_tokens, so_far.decode_tokens) == (len(PROMPT), 1)
    list(generation)
    stats = generation.stats
    assert stats == session.last_generation
    assert (stats.prompt_tokens, stats.decode_tokens) == (len(PROMPT), 5)
    assert stats.prefill_seconds > 0 and stats.decode_seconds > 0
    assert stats.prefill_tokens_per_s == pytest.approx(len(PROMPT) / stats.prefill_seconds)
    assert stats.decode_tokens_per_s == pytest.approx(5 / stats.decode_seconds)
    lines = str(stats).splitlines()
    assert lines[0].startswith("prefill: 5 tokens in ") and lines[0].endswith(" tokens/s)")
    assert lines[1].startswith("decode: 5 tokens in ")


def test_sessions_on_threads_generate_alike(llama_decoder):
    expected = llama_decoder.generate(PROMPT, max_new_tokens=6, **SAMPLING)
    results = [None] * 3

    def worker(index):
        results[index] = list(llama_decoder.session().generate(PROMPT, max_new_tokens=6, **SAMPLING))

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(len(results))]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(timeout=60)
    assert results == [expected] * len(results)


def test_session_of_a_model_without_state(linear_relu):
    model, _ = linear_relu
    session = model.session(threads=2)
    assert session.threads == 2 and session.device == "cpu" and session.position == 0
    x = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_array_equal(session.run({"x": x})["y"], model.run({"x": x})["y"])
    assert session.position == 0
    with pytest.raises(ein.InputError, match="keeps no state \\(a key/value cache\\): generation needs a decoder"):
        session.generate([1, 2], max_new_tokens=2)
    with pytest.raises(ein.InputError, match=r'the model has no input "xs"; did you mean "x"\? \(inputs: x\)'):
        session.run({"xs": x})
    with pytest.raises(TypeError, match="Session takes an ein.Model"):
        ein.Session(LINEAR_RELU)


@pytest.mark.parametrize("arguments, message", [
    (dict(prompt=[]), r"prompt=\[\]: the prompt must hold at least one token id"),
    (dict(max_new_tokens=-1), "max_new_tokens must be an integer >= 0, got -1"),
    (dict(temperature=-0.5), r"temperature must be a finite number >= 0 \(0: greedy\), got -0.5"),
    (dict(top_p=0.0), r"top_p must lie in \(0, 1\] \(1: every token\), got 0.0"),
    (dict(top_k=-2), r"top_k must be an integer >= 0 \(0: every token\), got -2"),
    (dict(prompt=[1, -3]), "a prompt token id must be an integer >= 0, got -3"),
])
def test_bad_generation_arguments(llama_decoder, arguments, message):
    arguments = dict(dict(prompt=PROMPT), **arguments)
    with pytest.raises(ValueError, match=message):
        llama_decoder.session().generate(**arguments)
    with pytest.raises(ValueError, match=message):
        llama_decoder.generate(**arguments)


def test_a_full_cache_ends_the_generation_and_keeps_the_session(llama_decoder):
    session = llama_decoder.session()
    generation = session.generate([1] * 250, max_new_tokens=10)
    assert generation.finish_reason is None
    tokens = list(generation)
    assert len(tokens) == 7 and session.position == 256  # 250 + 6 decode steps filled the cache
    assert generation.finish_reason == "length"
    with pytest.raises(ein.Error, match="the prompt of 1 tokens does not fit from position 256: .*holds 256 rows"):
        session.generate([1], max_new_tokens=1)
    session.reset()
    first = llama_decoder.generate(PROMPT, max_new_tokens=1)[0]
    stopped = session.generate(PROMPT, max_new_tokens=5, stop_tokens=[first])
    assert list(stopped) == [first] and stopped.finish_reason == "stop"
    session.reset()
    assert list(session.generate(PROMPT, max_new_tokens=2)) == llama_decoder.generate(PROMPT, max_new_tokens=2)


def test_a_prompt_outside_the_vocabulary(llama_decoder):
    message = r'prompt token 1 is 128, outside the vocabulary \[0, 128\) of input "ids"'
    with pytest.raises(ein.InputError, match=message):
        llama_decoder.session().generate([1, 128], max_new_tokens=2)
    with pytest.raises(ein.InputError, match=message):
        llama_decoder.generate([1, 128], max_new_tokens=2)
