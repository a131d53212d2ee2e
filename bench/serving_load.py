"""Bounded load against ein.serve: the BERT-style encoder served by Triton,
ein against ONNX Runtime served the same way, dynamic batching on and off.

For each configuration it starts a server on loopback, runs CONCURRENCY
gRPC clients for DURATION seconds (each sends one sentence at a time, its
length drawn uniformly from the --lengths range, and waits for the answer),
and prints requests/s, p50/p99 latency and the failed requests.

ONNX Runtime runs the same encoder with the same weights (an ONNX graph
built here with onnx.helper from the NumPy weights ein compiles), inside the
same Python backend, batched by the same code (ein._batching): only the
model's run differs. It needs onnx and onnxruntime in the venv (benchmark
only, not in the requirements):

    .venv-python/bin/pip install onnx onnxruntime
    .venv-python/bin/python bench/serving_load.py [--concurrency 32 --duration 60 --lengths 8 256]
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import threading
import time

import numpy as np

import ein

ROOT = pathlib.Path(__file__).resolve().parents[1]
ENCODER = ROOT / "examples" / "models" / "bert_encoder.ein"
# The encoder's sizes (examples/models/bert_encoder.ein).
C, H, D, F, VOCAB, POSITIONS, LAYERS = 64, 4, 16, 256, 1000, 256, 4


def encoder_weights(seed=0):
    """Random weights under the encoder's (Hugging Face BertModel) names."""
    rng = np.random.default_rng(seed)
    def normal(*shape, scale=0.05):
        return (rng.standard_normal(shape) * scale).astype(np.float32)
    weights = {
        "embeddings.word_embeddings.weight": normal(VOCAB, C, scale=1.0),
        "embeddings.position_embeddings.weight": normal(POSITIONS, C, scale=1.0),
        "embeddings.LayerNorm.weight": 1 + normal(C), "embeddings.LayerNorm.bias": normal(C),
    }
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for name, (n, m) in {"attention.self.query": (C, C), "attention.self.key": (C, C),
                             "attention.self.value": (C, C), "attention.output.dense": (C, C),
                             "intermediate.dense": (F, C), "output.dense": (C, F)}.items():
            weights[p + name + ".weight"] = normal(n, m, scale=m ** -0.5)
            weights[p + name + ".bias"] = normal(n)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            weights[p + norm + ".weight"] = 1 + normal(C)
            weights[p + norm + ".bias"] = normal(C)
    return weights


def encoder_onnx(weights):
    """The encoder as an ONNX graph (opset 17) with ranged b and t, op for op
    what bert_encoder.ein says."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, initializers = [], []
    counter = iter(range(1 << 30))

    def constant(value, dtype=np.float32):
        name = f"const{next(counter)}"
        initializers.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def node(op, *inputs, output=None, **attributes):
        out = output or f"{op.lower()}{next(counter)}"
        nodes.append(helper.make_node(op, list(inputs), [out], **attributes))
        return out

    def param(name, value=None):
        initializers.append(numpy_helper.from_array(weights[name] if value is None else value, name))
        return name

    def dense(x, prefix):  # linear(x, W, b) = x @ W^T + b
        transposed = param(prefix + ".weight.T", np.ascontiguousarray(weights[prefix + ".weight"].T))
        return node("Add", node("MatMul", x, transposed), param(prefix + ".bias"))

    def layernorm(x, prefix):
        return node("LayerNormalization", x, param(prefix + ".weight"), param(prefix + ".bias"), axis=-1,
                    epsilon=1e-12)

    def heads(x, prefix, perm):
        return node("Transpose", node("Reshape", dense(x, prefix), constant([0, 0, H, D], np.int64)), perm=perm)

    length = node("Gather", node("Shape", "ids"), constant([1], np.int64))
    positions = node("Slice", param("embeddings.position_embeddings.weight"), constant([0], np.int64), length,
                     constant([0], np.int64))
    x = node("Add", node("Gather", param("embeddings.word_embeddings.weight"), "ids"), positions)
    x = layernorm(x, "embeddings.LayerNorm")
    mask = node("Cast", "mask", to=TensorProto.FLOAT)
    padding = node("Unsqueeze", node("Mul", node("Sub", constant(1.0), mask), constant(-10000.0)),
                   constant([1, 2], np.int64))
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        q = heads(x, p + "attention.self.query", [0, 2, 1, 3])
        k = heads(x, p + "attention.self.key", [0, 2, 3, 1])
        v = heads(x, p + "attention.self.value", [0, 2, 1, 3])
        s = node("Add", node("Mul", node("MatMul", q, k), constant(D ** -0.5)), padding)
        a = node("MatMul", node("Softmax", s, axis=-1), v)
        a = node("Reshape", node("Transpose", a, perm=[0, 2, 1, 3]), constant([0, 0, C], np.int64))
        x = layernorm(node("Add", dense(a, p + "attention.output.dense"), x), p + "attention.output.LayerNorm")
        hidden = dense(x, p + "intermediate.dense")
        gelu = node("Mul", node("Mul", hidden, constant(0.5)),
                    node("Add", constant(1.0), node("Erf", node("Div", hidden, constant(np.sqrt(2.0))))))
        x = layernorm(node("Add", dense(gelu, p + "output.dense"), x), p + "output.LayerNorm")
    keep = node("Unsqueeze", mask, constant([2], np.int64))
    axis_t = constant([1], np.int64)
    node("Div", node("ReduceSum", node("Mul", x, keep), axis_t, keepdims=0),
         node("ReduceSum", keep, axis_t, keepdims=0), output="sentence")
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT32, ["b", "t"]) for name in ("ids", "mask")]
    output = helper.make_tensor_value_info("sentence", TensorProto.FLOAT, ["b", C])
    graph = helper.make_graph(nodes, "bert_encoder", inputs, [output], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


class OnnxRuntimeModel:
    """ONNX Runtime behind an ein.Model's interface (inputs, outputs, dims,
    run), so that ein.serve serves it exactly as it serves ein. The
    signature is the ein artifact's of the same model, beside the .onnx."""

    def __init__(self, path, threads):
        import onnxruntime

        signature = ein.load(pathlib.Path(path).with_suffix(".einb"))
        self.inputs, self.outputs, self.dims = signature.inputs, signature.outputs, signature.dims
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def run(self, inputs):
        return dict(zip([o.name for o in self.outputs], self._session.run(None, dict(inputs))))


def load_onnxruntime(path, threads=1):
    """ein.serve's loader for ONNX Runtime (--loader serving_load:load_onnxruntime)."""
    return OnnxRuntimeModel(path, threads)


def sentence(rng, lengths):
    length = int(rng.integers(lengths[0], lengths[1] + 1))
    return {"ids": rng.integers(0, VOCAB, (1, length), dtype=np.int32), "mask": np.ones((1, length), np.int32)}


def load_run(url, concurrency, duration, lengths, timeout_s):
    """CONCURRENCY clients sending for DURATION seconds: (latencies in s, failures, wall seconds)."""
    import tritonclient.grpc as grpcclient

    latencies, failures, lock = [], [], threading.Lock()
    deadline = time.monotonic() + duration

    def client(seed):
        rng = np.random.default_rng(seed)
        with grpcclient.InferenceServerClient(url) as connection:
            while time.monotonic() < deadline:
                request = sentence(rng, lengths)
                inputs = []
                for name, array in request.items():
                    tensor = grpcclient.InferInput(name, list(array.shape), "INT32")
                    tensor.set_data_from_numpy(array)
                    inputs.append(tensor)
                started = time.monotonic()
                try:
                    connection.infer("encoder", inputs, client_timeout=timeout_s).as_numpy("sentence")
                    with lock:
                        latencies.append(time.monotonic() - started)
                except Exception as error:  # counted, and the first few shown
                    with lock:
                        failures.append(str(error))

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(seed,), daemon=True) for seed in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(duration + timeout_s + 30)
    hung = sum(thread.is_alive() for thread in threads)
    if hung:
        failures.append(f"{hung} clients still waiting after the run")
    return np.array(latencies), failures, time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--duration", type=float, default=60, help="seconds per configuration")
    parser.add_argument("--lengths", type=int, nargs=2, default=(8, 256), metavar=("MIN", "MAX"))
    parser.add_argument("--instances", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="kernel threads per instance")
    parser.add_argument("--max-queue-delay-us", type=int, default=2000)
    parser.add_argument("--max-padding", type=float, nargs="+", default=[1, 1.25, 2], metavar="RATIO",
                        help="ein.serve --max-padding values to run with batching on (default 1, 1.25, 2)")
    parser.add_argument("--runtimes", nargs="+", default=["ein", "ein-python", "onnxruntime"],
                        choices=["ein", "ein-python", "onnxruntime"],
                        help="ein: the native backend (libtriton_ein.so); ein-python: ein through Triton's Python "
                             "backend; onnxruntime: ONNX Runtime through the Python backend")
    parser.add_argument("--timeout", type=float, default=60, help="per-request client timeout, seconds")
    args = parser.parse_args()

    from ein.serve import Server

    weights = encoder_weights()
    with tempfile.TemporaryDirectory(prefix="serving-load-") as folder:
        artifact = pathlib.Path(folder) / "encoder.einb"
        model = ein.compile(ENCODER, weights=weights)
        model.save(artifact)
        servables = {"ein": dict(artifact=artifact, backend="native"),
                     "ein-python": dict(artifact=artifact, backend="python")}
        if "onnxruntime" in args.runtimes:
            import onnx
            onnx_path = artifact.with_suffix(".onnx")
            onnx.save(encoder_onnx(weights), onnx_path)
            check = sentence(np.random.default_rng(1), (args.lengths[1], args.lengths[1]))
            difference = np.abs(load_onnxruntime(onnx_path).run(check)["sentence"] - model.run(check)["sentence"]).max()
            print(f"ONNX Runtime vs ein on one {args.lengths[1]}-token sentence: largest difference {difference:.1e}")
            servables["onnxruntime"] = dict(artifact=onnx_path, files=[artifact], python_path=[str(ROOT / "bench")],
                                            loader="serving_load:load_onnxruntime", backend="python")

        print(f"{args.concurrency} gRPC clients x {args.duration:.0f} s per configuration, one sentence per request, "
              f"lengths {args.lengths[0]}-{args.lengths[1]}; {args.instances} instances x {args.threads} threads")
        print("| runtime | dynamic batching | requests/s | p50 ms | p99 ms | requests | failed |")
        print("|---|---|---|---|---|---|---|")
        # Runtimes alternate within each mode: a shared machine's load drifts over minutes.
        for max_padding in [*args.max_padding, None]:  # None: batching off
            for runtime in args.runtimes:
                batching = max_padding is not None
                with Server(name="encoder", pad_dims=["t"], instances=args.instances, threads=args.threads,
                            dynamic_batching=batching, max_padding=max_padding or 1,
                            max_queue_delay_us=args.max_queue_delay_us, **servables[runtime]) as server:
                    latencies, failures, seconds = load_run(server.grpc_url, args.concurrency, args.duration,
                                                            args.lengths, args.timeout)
                p50, p99 = (np.percentile(latencies, [50, 99]) * 1000) if len(latencies) else (float("nan"),) * 2
                mode = f"on, max padding {max_padding:g}" if batching else "off"
                print(f"| {runtime} | {mode} | {len(latencies) / seconds:.1f} | {p50:.1f} | "
                      f"{p99:.1f} | {len(latencies) + len(failures)} | {len(failures)} |", flush=True)
                for failure in failures[:3]:
                    print(f"    failure: {failure}", file=sys.stderr)


if __name__ == "__main__":
    main()
