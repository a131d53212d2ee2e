#!/usr/bin/env python3
"""ein against OpenVINO in one process, run for run: a comparison that holds on
a machine whose speed changes under it (a shared VM whose AMX units slow down
for minutes at a time), where engines timed one after another in their own
processes (bench/precision_vs_engines.py) can land in different modes.

The models, weights, inputs and OpenVINO settings are precision_vs_engines.py's
(ViT-S/16 at batch 1 and 8, the MiniLM-sized BERT encoder with a padding mask).
ein runs through its C API from the shared library (build/lib/libein.so,
ctypes), OpenVINO through its Python API; each iteration runs ein once, then
OpenVINO once (the order alternating), so both see the same moment of the
machine. Reported per configuration: each engine's median and fastest run,
and the median over iterations of ein's time / OpenVINO's (below 1: ein is
faster), the figure to quote.

Needs numpy, safetensors, onnx and openvino:
  .venv-bench/bin/python bench/paired_vs_openvino.py [--precision bf16] [--threads 1,2] [--runs 40]
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import precision_vs_engines as engines  # noqa: E402  (the shared models and settings)

ROOT = engines.ROOT
DTYPES = {"float32": 0, "int32": 3, "int64": 4}  # ein_dtype_t


class SessionOptions(ctypes.Structure):
    _fields_ = [("threads", ctypes.c_int), ("device", ctypes.c_int)]


class EinSession:
    """One session of an artifact through libein.so's C API, its inputs set (copied) once."""

    def __init__(self, lib, artifact, feed, threads):
        self.lib = lib
        for name in ("ein_model_load", "ein_session_create", "ein_session_set_input", "ein_session_run"):
            getattr(lib, name).restype = ctypes.c_void_p
        lib.ein_status_message.restype = ctypes.c_char_p
        self.model, self.session = ctypes.c_void_p(), ctypes.c_void_p()
        self.check(lib.ein_model_load(artifact.encode(), ctypes.byref(self.model)))
        options = SessionOptions(threads, 0)
        self.check(lib.ein_session_create(self.model, ctypes.byref(options), ctypes.byref(self.session)))
        for name, array in feed.items():
            shape = (ctypes.c_int64 * array.ndim)(*array.shape)
            self.check(lib.ein_session_set_input(self.session, name.encode(), DTYPES[array.dtype.name], shape,
                                                 ctypes.c_size_t(array.ndim), ctypes.c_void_p(array.ctypes.data),
                                                 ctypes.c_size_t(array.nbytes)))

    def check(self, status):
        if status:
            message = self.lib.ein_status_message(ctypes.c_void_p(status)).decode()
            self.lib.ein_status_free(ctypes.c_void_p(status))
            raise RuntimeError(message)

    def run(self):
        self.check(self.lib.ein_session_run(self.session))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--einc", default=os.path.join(ROOT, "build", "bin", "einc"))
    parser.add_argument("--lib", default=os.path.join(ROOT, "build", "lib", "libein.so"))
    parser.add_argument("--configs", default="vit:1,vit:8,bert:1x16,bert:8x128,bert:1x512")
    parser.add_argument("--precision", default="bf16", help="ein's: fp32, bf16 or int8 (OpenVINO: its default)")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--runs", type=int, default=40, help="timed iterations (after 3 untimed)")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()

    import numpy as np
    import openvino as ov
    from safetensors.numpy import save_file
    work = args.workdir or tempfile.mkdtemp(prefix="ein-paired-bench-")
    os.makedirs(work, exist_ok=True)
    weights = {"vit": engines.vit_weights(), "bert": engines.bert_weights()}
    for name, tensors in weights.items():
        save_file(tensors, os.path.join(work, f"{name}.safetensors"))
    lib = ctypes.CDLL(args.lib)
    core = ov.Core()
    print(f"| model | threads | ein {args.precision} median (min) ms | OpenVINO default median (min) ms | "
          f"ein / OpenVINO, median of pairs |")
    print("|---|---|---|---|---|")
    for config in args.configs.split(","):
        tag, model, source, dims, feed, onnx = engines.config_case(config, work, weights)
        artifact = os.path.join(work, f"{tag}_ein-{args.precision}.einb")
        subprocess.run([args.einc, source, "--weights", os.path.join(work, f"{model}.safetensors"), "--precision",
                        args.precision, "-o", artifact] + dims, check=True)
        for threads in map(int, args.threads.split(",")):
            ein = EinSession(lib, artifact, feed, threads)
            compiled = core.compile_model(core.read_model(onnx), "CPU", {
                "INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY"})
            request = compiled.create_infer_request()
            ov_feed = {i.get_any_name(): feed[i.get_any_name()].astype(
                np.int64 if i.get_element_type() == ov.Type.i64 else feed[i.get_any_name()].dtype)
                for i in compiled.inputs}
            runners = [ein.run, lambda: request.infer(ov_feed)]
            times = [[], []]
            for iteration in range(args.runs + 3):
                order = (0, 1) if iteration % 2 == 0 else (1, 0)
                for which in order:
                    start = time.perf_counter()
                    runners[which]()
                    if iteration >= 3:
                        times[which].append((time.perf_counter() - start) * 1e3)
            ein_ms, ov_ms = np.array(times[0]), np.array(times[1])
            print(f"| {tag} | {threads} | {np.median(ein_ms):.2f} ({ein_ms.min():.2f}) | "
                  f"{np.median(ov_ms):.2f} ({ov_ms.min():.2f}) | {np.median(ein_ms / ov_ms):.3f} |", flush=True)


if __name__ == "__main__":
    main()
