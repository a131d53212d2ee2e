#!/usr/bin/env python3
"""ein fp32/bf16/int8 against ONNX Runtime (fp32, int8 by quantize_dynamic) and
OpenVINO (f32, and its default precision) on the CPU, same weights.

Models: ViT-S/16 (examples/models/vit_small_patch16_224.ein, timm names) at
batch 1 and 8, and a MiniLM-sized BERT encoder (examples/models/bert_encoder.ein
at c 384, 12 heads, f 1536, vocabulary 30522, 512 positions, 4 layers, Hugging
Face names) at (batch, tokens) (1, 16), (8, 128) and (1, 512), with a padding
mask (the last quarter of each sequence but the first padded). Random weights
(written once to .safetensors), static shapes everywhere.

ein: einc --weights at --precision fp32|bf16|int8, timed by `ein-run --bench`.
ONNX Runtime and OpenVINO run the same model written as an ONNX graph
(opset 17, built here from the same arrays: Conv patch embedding,
LayerNormalization, MatMul + Add linears, the erf GELU, Softmax attention);
ONNX Runtime with all graph optimisations, intra_op_num_threads = threads,
sequential execution; its int8 is onnxruntime.quantization.quantize_dynamic
with its defaults (int8 weights per tensor, u8 activations per tensor);
OpenVINO with INFERENCE_NUM_THREADS = threads, one stream, LATENCY, and
INFERENCE_PRECISION_HINT f32 ("ov-f32") or left at its default ("ov-default":
bf16 on CPUs with AVX512_BF16 or AMX). PyTorch eager ("torch-fp32", and
"torch-bf16": the same under torch.autocast("cpu", torch.bfloat16)) runs the
same model written with torch.nn.functional (F.scaled_dot_product_attention)
under inference_mode with torch.set_num_threads(threads); they are left out of
the default engines (add them with --engines) since torch is a large install.
An ein engine may name the ISA table it is forced to: "ein-bf16@avx512bf16"
runs with EIN_CPU_ISA=avx512bf16 (AMX against AVX512_BF16 on one machine).

Every engine runs in its own process, the engines alternate for --rounds
rounds, and each figure is the median of the rounds' medians (--statistic min:
the fastest run of all rounds; --statistic cpu: the median of the rounds' CPU
time per run, for 1 thread on a machine other jobs oversubscribe). Accuracy: the
largest |output - ONNX Runtime fp32| relative to the largest fp32 output, and
for ViT at batch 8 the top-1 agreement with ONNX Runtime fp32.

Needs numpy, safetensors, onnx, onnxruntime and openvino (and torch for the
torch engines):
  python3 -m venv .venv-bench && .venv-bench/bin/pip install numpy safetensors onnx onnxruntime openvino
  .venv-bench/bin/python bench/precision_vs_engines.py [--threads 1,2] [--rounds 3]
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VIT = os.path.join(ROOT, "examples", "models", "vit_small_patch16_224.ein")
BERT = os.path.join(ROOT, "examples", "models", "bert_encoder.ein")
VIT_DIMS = dict(embed=384, heads=6, depth=12, patch=16, image=224, classes=1000)
BERT_DIMS = dict(c=384, h=12, d=32, f=1536, vocab=30522, positions=512, layers=4)
ENGINES = ["ein-fp32", "ein-bf16", "ein-int8", "ort-fp32", "ort-int8", "ov-f32", "ov-default"]


# ---- weights ------------------------------------------------------------------

def vit_weights(seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    e, p, cls = VIT_DIMS["embed"], VIT_DIMS["patch"], VIT_DIMS["classes"]
    w = lambda *shape, s=0.02: (rng.standard_normal(shape) * s).astype(np.float32)
    grid = (VIT_DIMS["image"] // p) ** 2
    t = {"cls_token": w(1, 1, e), "pos_embed": w(1, grid + 1, e), "patch_embed.proj.weight": w(e, 3, p, p),
         "patch_embed.proj.bias": w(e), "norm.weight": 1 + w(e), "norm.bias": w(e), "head.weight": w(cls, e),
         "head.bias": w(cls)}
    for i in range(VIT_DIMS["depth"]):
        q = f"blocks.{i}."
        t.update({q + "norm1.weight": 1 + w(e), q + "norm1.bias": w(e), q + "norm2.weight": 1 + w(e),
                  q + "norm2.bias": w(e), q + "attn.qkv.weight": w(3 * e, e), q + "attn.qkv.bias": w(3 * e),
                  q + "attn.proj.weight": w(e, e), q + "attn.proj.bias": w(e), q + "mlp.fc1.weight": w(4 * e, e),
                  q + "mlp.fc1.bias": w(4 * e), q + "mlp.fc2.weight": w(e, 4 * e), q + "mlp.fc2.bias": w(e)})
    return t


def bert_weights(seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    c, f = BERT_DIMS["c"], BERT_DIMS["f"]
    w = lambda *shape, s=0.02: (rng.standard_normal(shape) * s).astype(np.float32)
    t = {"embeddings.word_embeddings.weight": w(BERT_DIMS["vocab"], c),
         "embeddings.position_embeddings.weight": w(BERT_DIMS["positions"], c),
         "embeddings.LayerNorm.weight": 1 + w(c), "embeddings.LayerNorm.bias": w(c)}
    for i in range(BERT_DIMS["layers"]):
        q = f"encoder.layer.{i}."
        for name, (n, m) in {"attention.self.query": (c, c), "attention.self.key": (c, c),
                             "attention.self.value": (c, c), "attention.output.dense": (c, c),
                             "intermediate.dense": (f, c), "output.dense": (c, f)}.items():
            t[q + name + ".weight"], t[q + name + ".bias"] = w(n, m), w(n)
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[q + name + ".weight"], t[q + name + ".bias"] = 1 + w(c), w(c)
    return t


# ---- ONNX graphs ----------------------------------------------------------------

class Graph:
    """A tiny builder over onnx.helper: every call adds a node and returns its output name."""

    def __init__(self):
        self.nodes, self.inits, self.count = [], [], 0

    def const(self, array, name=None):
        from onnx import numpy_helper
        name = name or f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def op(self, kind, *inputs, **attrs):
        from onnx import helper
        self.count += 1
        out = f"t{self.count}"
        self.nodes.append(helper.make_node(kind, list(inputs), [out], **attrs))
        return out

    def ints(self, *values):
        import numpy as np
        return self.const(np.array(values, np.int64))

    def linear(self, x, weight, bias):  # x @ weight.T + bias, weight [out, in]
        import numpy as np
        return self.op("Add", self.op("MatMul", x, self.const(np.ascontiguousarray(weight.T))), self.const(bias))

    def layernorm(self, x, weight, bias, eps):
        return self.op("LayerNormalization", x, self.const(weight), self.const(bias), axis=-1, epsilon=eps)

    def gelu(self, x):  # 0.5 x (1 + erf(x / sqrt 2)), the form ONNX Runtime and OpenVINO fuse
        import numpy as np
        half, one, root = (self.const(np.array(v, np.float32)) for v in (0.5, 1.0, 0.7071067811865476))
        return self.op("Mul", self.op("Mul", x, half), self.op("Add", self.op("Erf", self.op("Mul", x, root)), one))

    def attention(self, q, k, v, scale, mask=None):  # q, k, v [b, h, t, d]
        import numpy as np
        s = self.op("Mul", self.op("MatMul", q, self.op("Transpose", k, perm=[0, 1, 3, 2])),
                    self.const(np.array(scale, np.float32)))
        if mask is not None:
            s = self.op("Add", s, mask)
        return self.op("MatMul", self.op("Softmax", s, axis=-1), v)

    def save(self, path, inputs, outputs):
        import onnx
        from onnx import helper
        graph = helper.make_graph(self.nodes, "model", inputs, outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        onnx.save(model, path)


def vit_onnx(weights, batch, path):
    import numpy as np
    from onnx import TensorProto, helper
    e, heads, p = VIT_DIMS["embed"], VIT_DIMS["heads"], VIT_DIMS["patch"]
    d, n = e // heads, (VIT_DIMS["image"] // p) ** 2 + 1
    g = Graph()
    x = g.op("Conv", "img", g.const(weights["patch_embed.proj.weight"]), g.const(weights["patch_embed.proj.bias"]),
             kernel_shape=[p, p], strides=[p, p])
    x = g.op("Transpose", g.op("Reshape", x, g.ints(batch, e, n - 1)), perm=[0, 2, 1])
    cls = g.const(np.ascontiguousarray(np.broadcast_to(weights["cls_token"], (batch, 1, e))))
    x = g.op("Add", g.op("Concat", cls, x, axis=1), g.const(weights["pos_embed"]))
    for i in range(VIT_DIMS["depth"]):
        w = lambda name: weights[f"blocks.{i}.{name}"]
        h = g.layernorm(x, w("norm1.weight"), w("norm1.bias"), 1e-6)
        qkv = g.op("Transpose", g.op("Reshape", g.linear(h, w("attn.qkv.weight"), w("attn.qkv.bias")),
                                     g.ints(batch, n, 3, heads, d)), perm=[2, 0, 3, 1, 4])
        q, k, v = (g.op("Squeeze", g.op("Gather", qkv, g.ints(j), axis=0), g.ints(0)) for j in range(3))
        a = g.op("Reshape", g.op("Transpose", g.attention(q, k, v, d ** -0.5), perm=[0, 2, 1, 3]),
                 g.ints(batch, n, e))
        x = g.op("Add", x, g.linear(a, w("attn.proj.weight"), w("attn.proj.bias")))
        h = g.layernorm(x, w("norm2.weight"), w("norm2.bias"), 1e-6)
        h = g.linear(g.gelu(g.linear(h, w("mlp.fc1.weight"), w("mlp.fc1.bias"))), w("mlp.fc2.weight"),
                     w("mlp.fc2.bias"))
        x = g.op("Add", x, h)
    x = g.layernorm(x, weights["norm.weight"], weights["norm.bias"], 1e-6)
    x = g.op("Gather", x, g.const(np.array(0, np.int64)), axis=1)
    g.nodes[-1].output[0] = "cls_out"
    g.linear("cls_out", weights["head.weight"], weights["head.bias"])
    g.nodes[-1].output[0] = "logits"
    g.save(path, [helper.make_tensor_value_info("img", TensorProto.FLOAT, [batch, 3, 224, 224])],
           [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, VIT_DIMS["classes"]])])


def bert_onnx(weights, batch, tokens, path):
    import numpy as np
    from onnx import TensorProto, helper
    c, h, d = BERT_DIMS["c"], BERT_DIMS["h"], BERT_DIMS["d"]
    g = Graph()
    x = g.op("Gather", g.const(weights["embeddings.word_embeddings.weight"]), "ids", axis=0)
    x = g.op("Add", x, g.const(np.ascontiguousarray(weights["embeddings.position_embeddings.weight"][:tokens])))
    x = g.layernorm(x, weights["embeddings.LayerNorm.weight"], weights["embeddings.LayerNorm.bias"], 1e-12)
    keep = g.op("Cast", "mask", to=TensorProto.FLOAT)
    padding = g.op("Reshape", g.op("Mul", g.op("Sub", g.const(np.array(1.0, np.float32)), keep),
                                   g.const(np.array(-10000.0, np.float32))), g.ints(batch, 1, 1, tokens))
    for i in range(BERT_DIMS["layers"]):
        w = lambda name: weights[f"encoder.layer.{i}.{name}"]
        heads = lambda name: g.op("Transpose", g.op("Reshape", g.linear(x, w(name + ".weight"), w(name + ".bias")),
                                                    g.ints(batch, tokens, h, d)), perm=[0, 2, 1, 3])
        q, k, v = heads("attention.self.query"), heads("attention.self.key"), heads("attention.self.value")
        a = g.op("Reshape", g.op("Transpose", g.attention(q, k, v, d ** -0.5, padding), perm=[0, 2, 1, 3]),
                 g.ints(batch, tokens, c))
        a = g.linear(a, w("attention.output.dense.weight"), w("attention.output.dense.bias"))
        x = g.layernorm(g.op("Add", a, x), w("attention.output.LayerNorm.weight"),
                        w("attention.output.LayerNorm.bias"), 1e-12)
        y = g.gelu(g.linear(x, w("intermediate.dense.weight"), w("intermediate.dense.bias")))
        y = g.linear(y, w("output.dense.weight"), w("output.dense.bias"))
        x = g.layernorm(g.op("Add", y, x), w("output.LayerNorm.weight"), w("output.LayerNorm.bias"), 1e-12)
    keep3 = g.op("Unsqueeze", keep, g.ints(2))
    total = g.op("ReduceSum", g.op("Mul", x, keep3), g.ints(1), keepdims=0)
    g.op("Div", total, g.op("ReduceSum", keep3, g.ints(1), keepdims=0))
    g.nodes[-1].output[0] = "sentence"
    g.save(path, [helper.make_tensor_value_info("ids", TensorProto.INT32, [batch, tokens]),
                  helper.make_tensor_value_info("mask", TensorProto.INT32, [batch, tokens])],
           [helper.make_tensor_value_info("sentence", TensorProto.FLOAT, [batch, c])])


# ---- PyTorch (the same model as the ONNX graphs) ----------------------------------

def torch_forward(model, weights, batch, tokens):
    """The model as a function of the feed, on the same weights (torch tensors)."""
    import torch
    import torch.nn.functional as F
    linear = lambda x, name: F.linear(x, weights[name + ".weight"], weights[name + ".bias"])
    norm = lambda x, name, eps: F.layer_norm(x, x.shape[-1:], weights[name + ".weight"], weights[name + ".bias"], eps)
    if model == "vit":
        e, heads, p = VIT_DIMS["embed"], VIT_DIMS["heads"], VIT_DIMS["patch"]

        def forward(img):
            x = F.conv2d(img, weights["patch_embed.proj.weight"], weights["patch_embed.proj.bias"], stride=p)
            x = x.flatten(2).transpose(1, 2)
            x = torch.cat([weights["cls_token"].expand(batch, -1, -1), x], dim=1) + weights["pos_embed"]
            n = x.shape[1]
            for i in range(VIT_DIMS["depth"]):
                b = f"blocks.{i}."
                qkv = linear(norm(x, b + "norm1", 1e-6), b + "attn.qkv").reshape(batch, n, 3, heads, e // heads)
                q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
                a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(batch, n, e)
                x = x + linear(a, b + "attn.proj")
                x = x + linear(F.gelu(linear(norm(x, b + "norm2", 1e-6), b + "mlp.fc1")), b + "mlp.fc2")
            return linear(norm(x, "norm", 1e-6)[:, 0], "head")
        return lambda feed: forward(feed["img"])
    c, h, d = BERT_DIMS["c"], BERT_DIMS["h"], BERT_DIMS["d"]

    def forward(ids, mask):
        x = weights["embeddings.word_embeddings.weight"][ids.long()]
        x = norm(x + weights["embeddings.position_embeddings.weight"][:tokens], "embeddings.LayerNorm", 1e-12)
        keep = mask.to(x.dtype)
        padding = ((1.0 - keep) * -10000.0).reshape(batch, 1, 1, tokens)
        for i in range(BERT_DIMS["layers"]):
            b = f"encoder.layer.{i}."
            heads = lambda name: linear(x, b + name).reshape(batch, tokens, h, d).transpose(1, 2)
            q, k, v = heads("attention.self.query"), heads("attention.self.key"), heads("attention.self.value")
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=padding.to(q.dtype))
            a = linear(a.transpose(1, 2).reshape(batch, tokens, c), b + "attention.output.dense")
            x = norm(a + x, b + "attention.output.LayerNorm", 1e-12)
            y = linear(F.gelu(linear(x, b + "intermediate.dense")), b + "output.dense")
            x = norm(y + x, b + "output.LayerNorm", 1e-12)
        keep3 = keep.unsqueeze(2)
        return (x * keep3).sum(1) / keep3.sum(1)
    return lambda feed: forward(feed["ids"], feed["mask"])


# ---- workers (one engine per process) ------------------------------------------

def worker(args):
    import numpy as np
    from vit_vs_pytorch import time_runs  # this folder is on sys.path: warm-up calls, then the median
    feed = {name: np.load(path) for name, path in json.loads(args.feed).items()}
    threads = int(args.threads)
    if args.worker.startswith("torch"):
        import torch
        from safetensors.torch import load_file
        torch.set_num_threads(threads)
        model, shape = args.config.split(":")
        batch, tokens = (int(shape), 0) if model == "vit" else map(int, shape.split("x"))
        forward = torch_forward(model, load_file(args.weights), batch, tokens)
        tensors = {name: torch.from_numpy(array) for name, array in feed.items()}

        def run():
            with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16, enabled=args.worker == "torch-bf16"):
                return forward(tensors).float().numpy()
    elif args.worker.startswith("ort"):
        import onnxruntime
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = onnxruntime.InferenceSession(args.onnx, options, providers=["CPUExecutionProvider"])
        run = lambda: session.run(None, feed)[0]
    else:
        import openvino as ov
        config = {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY"}
        if args.worker == "ov-f32":
            config["INFERENCE_PRECISION_HINT"] = "f32"
        compiled = ov.Core().compile_model(args.onnx, "CPU", config)
        request = compiled.create_infer_request()
        run = lambda: request.infer(feed)[compiled.output(0)]
    out = np.array(run())
    median, fastest = time_runs(run, args.runs)
    start = time.process_time()
    for _ in range(args.runs):
        run()
    cpu = (time.process_time() - start) * 1e3 / args.runs
    np.save(args.output, out)
    print(json.dumps({"median_ms": median, "min_ms": fastest, "cpu_ms": cpu}))


def run_ein(args, artifact, feed, threads, out_dir, isa=None):
    def bench(runs):
        command = [args.ein_run, artifact, "--threads", str(threads), "--bench", str(runs), "--output-dir", out_dir]
        for name, path in feed.items():
            command += ["--input", f"{name}={path}"]
        env = dict(os.environ, EIN_CPU_ISA=isa) if isa else None
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        text = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return text, (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1e3
    if args.statistic == "cpu":  # the CPU time of `runs` more runs, per run (loading and warm-up cancel)
        return (bench(args.runs + 1)[1] - bench(1)[1]) / args.runs
    return float(re.search(rf"{args.statistic} ([\d.]+) ms", bench(args.runs)[0]).group(1))


def config_case(config, work, weights):
    """A configuration ("vit:8", "bert:8x128") as (tag, model, the .ein source, einc's --dim arguments, the
    inputs, the ONNX graph written into work)."""
    import numpy as np
    model, shape = config.split(":")
    tag = f"{model}_{shape}"
    rng = np.random.default_rng(7)
    onnx = os.path.join(work, f"{tag}.onnx")
    if model == "vit":
        batch = int(shape)
        feed = {"img": rng.standard_normal((batch, 3, 224, 224)).astype(np.float32)}
        vit_onnx(weights["vit"], batch, onnx)
        return tag, model, VIT, ["--dim", f"batch={batch}"], feed, onnx
    batch, tokens = map(int, shape.split("x"))
    mask = np.ones((batch, tokens), np.int32)
    mask[1:, tokens - tokens // 4:] = 0
    feed = {"ids": rng.integers(0, BERT_DIMS["vocab"], (batch, tokens)).astype(np.int32), "mask": mask}
    dims = [x for k, v in BERT_DIMS.items() if k != "layers" for x in ("--dim", f"{k}={v}")]
    bert_onnx(weights["bert"], batch, tokens, onnx)
    return tag, model, BERT, dims + ["--dim", f"b={batch}", "--dim", f"t={tokens}"], feed, onnx


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--einc", default=os.path.join(ROOT, "build", "bin", "einc"))
    parser.add_argument("--ein-run", default=os.path.join(ROOT, "build", "bin", "ein-run"))
    parser.add_argument("--configs", default="vit:1,vit:8,bert:1x16,bert:8x128,bert:1x512")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--runs", type=int, default=10, help="timed runs per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--statistic", choices=["median", "min", "cpu"], default="median",
                        help="per engine: the median of the rounds' medians, the least of their fastest runs "
                             "(on a shared, oversubscribed machine, the run least disturbed), or the median of "
                             "the rounds' CPU time per run (1 thread on an oversubscribed machine: waiting for "
                             "a core does not count)")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--onnx", help=argparse.SUPPRESS)
    parser.add_argument("--feed", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--weights", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    import numpy as np
    from safetensors.numpy import save_file
    engines = args.engines.split(",")
    work = args.workdir or tempfile.mkdtemp(prefix="ein-precision-bench-")
    os.makedirs(work, exist_ok=True)
    weights = {"vit": vit_weights(), "bert": bert_weights()}
    for name, tensors in weights.items():
        save_file(tensors, os.path.join(work, f"{name}.safetensors"))
    rows = []
    for config in args.configs.split(","):
        tag, model, source, dims, feed, onnx_fp32 = config_case(config, work, weights)
        batch = next(iter(feed.values())).shape[0]
        feed_paths = {}
        for name, array in feed.items():
            feed_paths[name] = os.path.join(work, f"{tag}_{name}.npy")
            np.save(feed_paths[name], array)
        onnx_int8 = os.path.join(work, f"{tag}_int8.onnx")
        if "ort-int8" in engines:
            from onnxruntime.quantization import QuantType, quantize_dynamic
            quantize_dynamic(onnx_fp32, onnx_int8, weight_type=QuantType.QInt8)
        artifacts = {}
        for engine in engines:
            if engine.startswith("ein-"):
                precision = engine[4:].split("@")[0]
                artifacts[engine] = os.path.join(work, f"{tag}_ein-{precision}.einb")
                if list(artifacts.values()).count(artifacts[engine]) == 1:  # one compile per precision
                    subprocess.run([args.einc, source, "--weights", os.path.join(work, f"{model}.safetensors"),
                                    "--precision", precision, "-o", artifacts[engine]] + dims, check=True)
        for threads in map(int, args.threads.split(",")):
            medians = {engine: [] for engine in engines}
            outputs = {}
            for _ in range(args.rounds):
                for engine in engines:
                    out_dir = os.path.join(work, f"out_{tag}_{engine}_t{threads}")
                    os.makedirs(out_dir, exist_ok=True)
                    if engine.startswith("ein-"):
                        isa = engine.split("@")[1] if "@" in engine else None
                        medians[engine].append(run_ein(args, artifacts[engine], feed_paths, threads, out_dir, isa))
                        out_name = "logits.npy" if model == "vit" else "sentence.npy"
                        outputs[engine] = os.path.join(out_dir, out_name)
                        continue
                    outputs[engine] = os.path.join(out_dir, "out.npy")
                    command = [sys.executable, os.path.abspath(__file__), "--worker", engine, "--onnx",
                               onnx_int8 if engine == "ort-int8" else onnx_fp32, "--feed", json.dumps(feed_paths),
                               "--output", outputs[engine], "--threads", str(threads), "--runs", str(args.runs),
                               "--config", config, "--weights", os.path.join(work, f"{model}.safetensors")]
                    result = subprocess.run(command, check=True, capture_output=True, text=True)
                    medians[engine].append(json.loads(result.stdout.strip().splitlines()[-1])[args.statistic + "_ms"])
            pick = np.min if args.statistic == "min" else np.median
            ms = {engine: float(pick(values)) for engine, values in medians.items()}
            reference = np.load(outputs["ort-fp32"]).astype(np.float64) if "ort-fp32" in outputs else None
            error, agree = {}, {}
            for engine, path in outputs.items():
                got = np.load(path).astype(np.float64)
                if reference is not None:
                    error[engine] = float(np.abs(got - reference).max() / np.abs(reference).max())
                    if model == "vit" and batch > 1:
                        agree[engine] = int((got.argmax(1) == reference.argmax(1)).sum())
            rows.append((tag, threads, ms, error, agree, batch))
            print(f"{tag} threads {threads}: " + ", ".join(
                f"{engine} {ms[engine]:.2f} ms" + (f" (err {error[engine]:.1e})" if engine in error else "")
                for engine in engines) + "; rounds: " + "; ".join(
                engine + " " + " ".join(f"{v:.1f}" for v in values) for engine, values in medians.items()),
                flush=True)
    print()
    print("| model | threads | " + " | ".join(engines) + " |")
    print("|---|---|" + "---|" * len(engines))
    for tag, threads, ms, _, _, _ in rows:
        print(f"| {tag} | {threads} | " + " | ".join(f"{ms[engine]:.2f}" for engine in engines) + " |")
    print()
    print("max |output - ort-fp32| / max |ort-fp32| (ViT b8: top-1 agreement with ort-fp32)")
    for tag, threads, _, error, agree, batch in rows:
        print(f"{tag} t{threads}: " + ", ".join(
            f"{engine} {error[engine]:.1e}" + (f" ({agree[engine]}/{batch})" if engine in agree else "")
            for engine in engines if engine in error))


if __name__ == "__main__":
    sys.exit(main())
