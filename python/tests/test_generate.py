"""Generation with the Llama-style decoder (examples/models/llama_decoder.ein):
greedy tokens equal the ones transformers' generate wrote into the committed
case llama_hf_tiny; seeded sampling repeats; and, where torch and transformers
are installed (CI does not install them), live against LlamaForCausalLM."""
import importlib.util
import json

import pytest

import ein
from conftest import EXAMPLES, REPO

CASE = REPO / "tests" / "conformance" / "cases" / "llama_hf_tiny"


@pytest.fixture(scope="module")
def decoder():
    return ein.compile(EXAMPLES / "llama_decoder.ein", weights=CASE / "weights.safetensors")


def test_greedy_tokens_equal_transformers_generate(decoder):
    expected = json.loads((CASE / "generation.json").read_text())
    tokens = decoder.generate(expected["prompt"], max_new_tokens=len(expected["greedy"]))
    assert tokens == expected["greedy"]


def test_sampling_is_seeded_and_stops_at_stop_tokens(decoder):
    prompt = [3, 1, 4, 1, 5]
    first = decoder.generate(prompt, max_new_tokens=10, temperature=0.9, top_k=16, top_p=0.9, seed=11)
    assert first == decoder.generate(prompt, max_new_tokens=10, temperature=0.9, top_k=16, top_p=0.9, seed=11)
    assert len(first) == 10 and all(0 <= t < 128 for t in first)
    stopped = decoder.generate(prompt, max_new_tokens=10, temperature=0.9, top_k=16, top_p=0.9, seed=11,
                               stop_tokens=[first[2]])
    assert stopped == first[:first.index(first[2]) + 1]


def test_generating_to_the_end_of_the_cache_returns_the_tokens(decoder):
    tokens = decoder.generate([1] * 250, max_new_tokens=10)  # the prompt and 6 decode steps fill 256 rows
    assert tokens == decoder.generate([1] * 250, max_new_tokens=7)
    with pytest.raises(ein.Error, match="the prompt of 257 tokens does not fit from position 0: .*ranges over 1..256"):
        decoder.generate([1] * 257, max_new_tokens=1)


def test_a_list_of_prompts_gives_each_its_own_tokens(decoder):
    prompts = [[3, 1, 4], [1] * 200, [5, 9], [2, 6, 5, 3, 5], [7] * 90, [8]]
    for options in (dict(max_new_tokens=10), dict(max_new_tokens=8, temperature=0.9, top_k=16, seed=4)):
        together = decoder.generate(prompts, max_sequences=3, **options)
        assert together == [decoder.generate(p, **options) for p in prompts]
    assert decoder.generate([[1] * 250], max_new_tokens=10) == [decoder.generate([1] * 250, max_new_tokens=10)]
    with pytest.raises(ein.Error, match="prompt 1: the prompt of 257 tokens does not fit"):
        decoder.generate([[1], [1] * 257], max_new_tokens=1)
    with pytest.raises(ValueError, match="max_sequences must be an integer >= 1"):
        decoder.generate([[1]], max_sequences=0)


def test_a_list_of_prompts_searches_each_with_its_beams(decoder):
    prompts = [[3, 1, 4], [1] * 40, [5, 9], [8]]
    for returned in (1, 2):
        many = decoder.generate(prompts, max_new_tokens=6, num_beams=2, num_return_sequences=returned,
                                max_sequences=4)
        assert many == [decoder.generate(prompt, max_new_tokens=6, num_beams=2, num_return_sequences=returned)
                        for prompt in prompts]


def test_live_against_transformers():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    spec = importlib.util.spec_from_file_location("make_llama_case", REPO / "tests" / "conformance" / "make_llama_case.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    llama, state = module.model(seed=4)
    model = ein.compile(EXAMPLES / "llama_decoder.ein", weights=state)
    prompt = torch.randint(0, 128, (1, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = llama.generate(prompt, max_new_tokens=16, do_sample=False, num_beams=1, pad_token_id=0,
                                  eos_token_id=None)[0, 9:].tolist()
    assert model.generate(prompt[0].tolist(), max_new_tokens=16) == expected
