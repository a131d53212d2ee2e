"""ein.Scheduler with the Llama-style decoder (llama_hf_tiny's weights):
requests submitted from several Python threads stream the tokens each prompt
gives alone; cancelling one leaves the others; bad use raises."""
import threading

import pytest

import ein
from conftest import EXAMPLES, REPO

CASE = REPO / "tests" / "conformance" / "cases" / "llama_hf_tiny"


@pytest.fixture(scope="module")
def decoder():
    return ein.compile(EXAMPLES / "llama_decoder.ein", weights=CASE / "weights.safetensors")


def test_requests_from_threads_stream_each_prompts_own_tokens(decoder):
    prompts = [[3, 1, 4], [1] * 120, [5, 9], [2, 6, 5, 3, 5], [7] * 90, [8], [4] * 33]
    options = [dict(max_new_tokens=6 + i, temperature=0.8 * (i % 2), top_k=16, seed=i) for i in range(len(prompts))]
    streamed = [None] * len(prompts)
    with ein.Scheduler(decoder, max_sequences=3, threads=2, step_tokens=32) as scheduler:
        assert scheduler.max_sequences == 3 and scheduler.step_tokens == 32

        def client(i):
            request = scheduler.submit(prompts[i], **options[i])
            streamed[i] = (list(request), request.finish_reason, request.wait())

        threads = [threading.Thread(target=client, args=(i,)) for i in range(len(prompts))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert scheduler.running == 0 and scheduler.waiting == 0
    for i, prompt in enumerate(prompts):
        alone = decoder.generate(prompt, **options[i])
        assert streamed[i] == (alone, "length", alone), f"prompt {i}"


def test_cancelling_one_request_leaves_the_others(decoder):
    with ein.Scheduler(decoder, max_sequences=4, threads=2) as scheduler:
        going = scheduler.submit([5, 9, 2], max_new_tokens=12)
        cancelled = scheduler.submit([1] * 40, max_new_tokens=200)
        first = next(cancelled)
        cancelled.cancel()
        assert going.wait() == decoder.generate([5, 9, 2], max_new_tokens=12)
        rest = cancelled.wait()
        assert cancelled.done and cancelled.finish_reason == "cancelled"
        assert rest[0] == first and rest == decoder.generate([1] * 40, max_new_tokens=len(rest))
        late = scheduler.submit([3], max_new_tokens=200)
    assert late.finish_reason == "cancelled"  # the scheduler shut down
    with pytest.raises(ein.Error, match="the scheduler has shut down"):
        scheduler.submit([3])


def test_a_continued_conversation_starts_from_its_cache(decoder):
    with ein.Scheduler(decoder, max_sequences=2) as scheduler:
        first = scheduler.submit([3, 1, 4, 1, 5, 9, 2, 6], max_new_tokens=5)
        answer = first.wait()
        assert first.cached_tokens == 0
        turn = [3, 1, 4, 1, 5, 9, 2, 6] + answer + [7, 7]
        second = scheduler.submit(turn, max_new_tokens=5)
        assert second.wait() == decoder.generate(turn, max_new_tokens=5)
        assert second.cached_tokens == 8 + 4  # the answer's last token was never fed back


def test_bad_use_raises(decoder):
    with ein.Scheduler(decoder, max_sequences=2) as scheduler:
        with pytest.raises(ein.InputError, match="outside the vocabulary"):
            scheduler.submit([1, 128])
        with pytest.raises(ein.InputError, match="the prompt of 257 tokens does not fit"):
            scheduler.submit([1] * 257)
        with pytest.raises(ValueError, match="prompt=\\[\\]"):
            scheduler.submit([])
    with pytest.raises(ein.Error, match="stepTokens \\(4\\) must be at least maxSequences \\(8\\)"):
        ein.Scheduler(decoder, max_sequences=8, step_tokens=4)
    with pytest.raises(ValueError, match="max_sequences must be an integer >= 1"):
        ein.Scheduler(decoder, max_sequences=0)
    stateless = ein.compile(EXAMPLES / "mhsa.ein", random_weights=1)
    with pytest.raises(ein.Error, match="serves one sequence per run"):
        ein.Scheduler(stateless)


def test_a_request_preempted_for_blocks_goes_on_with_its_own_tokens(decoder):
    # 4 blocks of 16 rows; each request (20 + 40 tokens) needs all 4 by its
    # end. Once the younger holds a block (its prompt runs a step after the
    # older's at the latest, 28 steps before the older needs its last), no
    # one can go on at some row: the younger gives its blocks back, and runs
    # its prompt and tokens so far again after the older has finished.
    # A younger submitted too late (this thread descheduled for those 28
    # steps on a loaded machine) runs after the older without preemption,
    # also right: then the scenario is tried again.
    older_prompt, younger_prompt = [3, 1, 4, 1, 5] * 4, [2, 7, 1, 8, 2] * 4
    for _ in range(3):
        with ein.Scheduler(decoder, max_sequences=2, threads=2, cache_block_rows=16, cache_blocks=4) as scheduler:
            older = scheduler.submit(older_prompt, max_new_tokens=40)
            younger = scheduler.submit(younger_prompt, max_new_tokens=40, temperature=0.8, seed=9)
            assert younger.wait() == decoder.generate(younger_prompt, max_new_tokens=40, temperature=0.8, seed=9)
            assert older.wait() == decoder.generate(older_prompt, max_new_tokens=40)
            assert older.preemptions == 0 and younger.preemptions in (0, 1)
            if younger.preemptions == 1:
                break
    assert younger.preemptions == 1


def test_a_bounded_paged_cache_refuses_what_it_cannot_hold(decoder):
    with ein.Scheduler(decoder, max_sequences=2, threads=2, cache_block_rows=16, cache_blocks=4) as scheduler:
        assert scheduler.cache_blocks == 4 and scheduler.cache_blocks_used == 0
        with pytest.raises(ein.Error, match="the prompt of 65 tokens takes 5 cache blocks of 16 rows; the cache has 4"):
            scheduler.submit([1] * 65)
        assert scheduler.submit([3, 1, 4], max_new_tokens=20).wait() == decoder.generate([3, 1, 4], max_new_tokens=20)
    with ein.Scheduler(decoder, max_sequences=2, cache_block_rows=0) as unpaged:
        assert unpaged.cache_blocks == 0
        assert unpaged.submit([3, 1, 4], max_new_tokens=5).wait() == decoder.generate([3, 1, 4], max_new_tokens=5)
    with pytest.raises(ein.Error, match="cacheBlocks is 16777217"):
        ein.Scheduler(decoder, cache_blocks=(1 << 24) + 1)


def test_beam_searches_run_among_the_requests_as_each_alone(decoder):
    prompts = [[3, 1, 4], [1] * 60, [5, 9]]
    options = dict(num_beams=3, num_return_sequences=2, max_new_tokens=8, length_penalty=0.8,
                   no_repeat_ngram_size=2)
    with ein.Scheduler(decoder, max_sequences=5, threads=2) as scheduler:
        generation = scheduler.submit([2, 7, 1], max_new_tokens=10)
        searches = [scheduler.submit(prompt, **options) for prompt in prompts]
        found = [search.hypotheses() for search in searches]
        for prompt, search, hypotheses in zip(prompts, searches, found):
            alone = decoder.generate(prompt, **options)
            assert [tokens for tokens, _ in hypotheses] == alone
            assert all(isinstance(score, float) for _, score in hypotheses)
            assert hypotheses[0][1] >= hypotheses[1][1]
            assert search.wait() == alone[0] and list(search) == alone[0]
            assert search.finish_reason == "length"
        assert generation.wait() == decoder.generate([2, 7, 1], max_new_tokens=10)
        with pytest.raises(ein.Error, match="a generation, not a beam search"):
            generation.hypotheses()
        with pytest.raises(ein.Error, match="6 beams take a sequence each; the scheduler has 5"):
            scheduler.submit([1], num_beams=6)
        with pytest.raises(ValueError, match="temperature must be 0"):
            scheduler.submit([1], num_beams=2, temperature=0.5)
        with pytest.raises(ValueError, match="go with num_beams > 1"):
            scheduler.submit([1], suppress_tokens=[3])
    with ein.Scheduler(decoder, max_sequences=4, cache_block_rows=16, cache_blocks=4) as bounded:
        with pytest.raises(ein.Error, match="4 beams over a prompt of 20 tokens take 5 cache blocks"):
            bounded.submit([1] * 20, num_beams=4)
