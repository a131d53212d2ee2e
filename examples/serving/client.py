"""Queries the encoder that serve.sh serves, over HTTP and gRPC with
tritonclient, and checks every answer against ein run here on the same
random weights.

    examples/serving/serve.sh &                       # wait for "serving ..."
    .venv-python/bin/python examples/serving/client.py [--requests 32]
"""
import argparse
import concurrent.futures
import pathlib

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

import ein

MODEL_SOURCE = pathlib.Path(__file__).resolve().parents[1] / "models" / "bert_encoder.ein"


def sentence_request(rng):
    """A few sentences of random token ids, padded to the longest with mask 0."""
    rows = int(rng.integers(1, 5))
    lengths = rng.integers(1, 257, rows)
    ids = np.zeros((rows, lengths.max()), np.int32)
    mask = np.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, :length] = rng.integers(0, 1000, length)
        mask[row, :length] = 1
    return ids, mask


def infer(protocol, url, model, ids, mask):
    """The sentence embeddings of one request, over HTTP or gRPC."""
    client_module = httpclient if protocol == "http" else grpcclient
    with client_module.InferenceServerClient(url) as client:
        inputs = [client_module.InferInput("ids", list(ids.shape), "INT32"),
                  client_module.InferInput("mask", list(mask.shape), "INT32")]
        inputs[0].set_data_from_numpy(ids)
        inputs[1].set_data_from_numpy(mask)
        return client.infer(model, inputs).as_numpy("sentence")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--http-url", default="127.0.0.1:8000")
    parser.add_argument("--grpc-url", default="127.0.0.1:8001")
    parser.add_argument("--model", default="bert_encoder")
    parser.add_argument("--requests", type=int, default=32, help="sent 8 at a time, half over each protocol")
    args = parser.parse_args()

    local = ein.compile(MODEL_SOURCE, random_weights=1)
    rng = np.random.default_rng(0)
    requests = [sentence_request(rng) for _ in range(args.requests)]
    protocols = [("http", args.http_url) if i % 2 == 0 else ("grpc", args.grpc_url) for i in range(args.requests)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda job: infer(*job[0], args.model, *job[1]), zip(protocols, requests)))
    worst = 0.0
    for (ids, mask), (protocol, _), sentence in zip(requests, protocols, answers):
        expected = local.run({"ids": ids, "mask": mask})["sentence"]
        worst = max(worst, float(np.abs(sentence - expected).max()))
        print(f"{protocol:4} ids {ids.shape[0]}x{ids.shape[1]:<3} -> sentence {sentence.shape}")
    print(f"{args.requests} requests; largest difference from ein run here: {worst:.2e}")
    return 0 if worst < 1e-4 else 1


if __name__ == "__main__":
    raise SystemExit(main())
