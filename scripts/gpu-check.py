#!/usr/bin/env python3
"""Checks the CUDA backend on a GPU machine with the kit scripts/gpu-kit.sh made.

    python3 -u gpu-kit/check.py [STEP ...] [--out DIR] [--device cuda:N] [--no-bench] [--budget SECONDS]

What the machine needs: an NVIDIA GPU of compute capability 8.0 or newer;
a driver that supports CUDA 13 (R580 or newer, with nvidia-smi); cuBLASLt 13
(libcublasLt.so.13, from the CUDA 13 toolkit or PyTorch's nvidia wheels);
python3 with numpy (conformance, vit-*) and torch built with CUDA (bench-*);
compute-sanitizer (sanitize; it comes with the toolkit). The prebuilt
binaries need glibc 2.36 (bin/), or glibc 2.34 and GCC 12's libstdc++
(bin-dynamic/); on an older system the source fallback is built first (2-4
minutes), which needs nvcc from the CUDA 13 toolkit, CMake 3.20 and a C++20
compiler. No network access is needed. The ViT steps write ViT-B/16 with its
weights (~350 MB a precision) into the temporary folder ($TMPDIR), about
1.5 GB for both steps. Run the script with the python3 that has PyTorch: its
nvidia wheels are searched for cuBLASLt.

Three files hold what the steps find, in the output folder (--out DIR, else
$OUT if set, else gpu-check-results/DATE-TIME under the current directory;
an existing folder's three files are replaced): results.json (every step's
results, rewritten after each), check.log (every command and its output) and
bench.jsonl (the benchmarks' lines). Steps, the most valuable first:
  env              versions, glibc against what the prebuilt binaries need, ldd of
                   each binary; builds the source fallback when they cannot run
  tests            cuda_runtime_tests in one process with EIN_CUDA_SYNC=1 (a test
                   that crashes it is named, and the rest run on in a new one),
                   then in one process without it
  conformance      every conformance case at fp32, bf16 and fp16 through
                   ein-run --device cuda, against the expected outputs
  bench-attention  attention TFLOP/s (flash2 at bf16 and fp16, causal and not)
                   against torch SDPA
  vit-accuracy     ViT-B/16 batch 64: ein fp32 against ein bf16 logits (same weights)
  bench-vit        ViT-B/16 batch 64 images/s: ein fp32/bf16, PyTorch eager, torch.compile;
                   where ein's bf16 time goes (EIN_PROFILE)
  bench-decode     a 1.1B Llama shape: prefill of 128 tokens and 32 greedy decode steps
                   with the key/value cache on the GPU (fp32, bf16), decode's weight
                   GB/s, EIN_PROFILE of a decode, transformers' eager bf16 beside it
  sanitize         compute-sanitizer memcheck and racecheck on the attention,
                   layernorm and gemm tests
  correctness      env, tests and conformance (what --no-bench runs with no step named)
  all              every step in the order above
With no step named: correctness, then (unless --no-bench) the benchmarks, a
few minutes (13 at most by the steps' shares, plus 2-4 for a source build);
sanitize takes up to 7 more.
A failing command or engine is recorded and the next one runs; every step
prints its summary, and the output ends with a digest of what failed and
every benchmark figure; the exit status is 1 when anything failed. No command
runs past its step's share (STEP_SECONDS: a hung kernel costs its step, not
the steps after it), nor, with --budget, past that many seconds from the
start (set it under a CI job's time limit, so that the digest is still
printed); one that would is cut short and recorded as timed out. The source
build, when needed, counts against --budget only."""
import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

KIT = os.path.dirname(os.path.abspath(__file__))


def output_folder(chosen=None):
    """Where the three files go: --out, else $OUT, else a new folder under ./gpu-check-results."""
    return os.path.abspath(chosen or os.environ.get("OUT")
                           or os.path.join("gpu-check-results", time.strftime("%Y%m%d-%H%M%S")))


OUT = output_folder()  # made by the first step that writes to it
# The source fallback's build folder (build-from-source.sh's BUILD_DIR).
SOURCE_BUILD = os.environ.get("EIN_KIT_BUILD_DIR") or os.path.join(KIT, "build")
# bf16/fp16 widen the cases' tolerances to these (runtime/src/backends/cuda/README.md).
WIDENED = {"fp32": 0.0, "bf16": 2e-2, "fp16": 5e-3}
STARTED = time.time()
BUDGET = float("inf")  # seconds for the whole invocation (--budget; none by default)
STEPS = ["env", "tests", "conformance", "bench-attention", "vit-accuracy", "bench-vit", "bench-decode", "sanitize"]
# The most seconds each step's commands may take, the source build apart. Well above what each
# should need on an H100 (env ~15, tests ~30, conformance ~60, attention ~60, ViT ~30 and ~150).
STEP_SECONDS = {"env": 60, "tests": 120, "conformance": 150, "bench-attention": 150, "vit-accuracy": 90,
                "bench-vit": 300, "bench-decode": 240, "sanitize": 400}


def library_folders():
    """Folders that may hold libcublasLt.so.13: the toolkit ($CUDA_HOME, else its
    usual folders), and PyTorch's nvidia wheels (nvidia/cu13/lib, nvidia/cublas/lib)
    on any sys.path entry of the python3 that runs this script."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    places = ([os.path.join(home, "lib64"), os.path.join(home, "targets", "x86_64-linux", "lib")] if home else []) + [
        "/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/cuda-13/lib64"]
    for entry in sys.path:
        places += sorted({os.path.dirname(p) for p in glob.glob(os.path.join(entry, "nvidia", "**", "libcublasLt.so*"),
                                                                   recursive=True)})
    found = [p for p in dict.fromkeys(places) if glob.glob(os.path.join(p, "libcublasLt.so*"))]
    return found


# LD_LIBRARY_PATH is searched before the binaries' RUNPATH (the toolkit's folders); one set
# beforehand comes after these.
os.environ["LD_LIBRARY_PATH"] = ":".join(library_folders() + [p for p in [os.environ.get("LD_LIBRARY_PATH")] if p])


RESULTS = {}  # step name -> its results, as OUT/results.json holds them
LOGGED_OUTPUT = 200_000  # characters of one command's output kept in the log (its end)


class Step:
    """One step's log and results; results.json is rewritten after every record,
    so what ran is in the output folder even if the run is cut off."""

    def __init__(self, name):
        self.name, self.results, self.failures = name, [], 0
        self.exempt_seconds = 0.0  # time spent in commands outside the step's share
        self.started = time.time()
        os.makedirs(OUT, exist_ok=True)
        self.log(f"==== {name}")
        print(f"== {name}", flush=True)

    def log(self, text):
        with open(os.path.join(OUT, "check.log"), "a") as log:
            log.write(text if text.endswith("\n") else text + "\n")

    def run(self, command, timeout=300, env=None, quiet=False, within_step=True):
        """Runs `command`; returns (exit status, stdout, stderr). A timeout is status 124.
        It is cut short at the end of the whole budget and, unless `within_step` is
        false (the source build), at the end of this step's share."""
        started = time.time()
        full_env = dict(os.environ, **(env or {}))
        end = STARTED + BUDGET - 5
        if within_step:
            end = min(end, self.started + STEP_SECONDS.get(self.name, BUDGET) + self.exempt_seconds)
        left = end - started
        if left < 5:
            self.log(f"$ {' '.join(command)}   # not run: the time budget is spent")
            print(f"   not run (budget spent): {os.path.basename(command[0])}", flush=True)
            return 124, "", "not run: the time budget is spent"
        timeout = min(timeout, left)
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=full_env)
            status, out, err = result.returncode, result.stdout, result.stderr
        except subprocess.TimeoutExpired as expired:
            status = 124
            out = expired.stdout.decode(errors="replace") if isinstance(expired.stdout, bytes) else expired.stdout or ""
            err = f"timed out after {timeout:.0f} s"
        except OSError as error:
            status, out, err = 127, "", str(error)
        if not within_step:
            self.exempt_seconds += time.time() - started
        prefix = " ".join(f"{k}={v}" for k, v in (env or {}).items())
        self.log(f"$ {prefix + ' ' if prefix else ''}{' '.join(command)}   # exit {status}, "
                 f"{time.time() - started:.1f} s\n{(out + err)[-LOGGED_OUTPUT:]}")
        if not quiet and status != 0:
            print(f"   exit {status}: {' '.join(os.path.basename(c) if i == 0 else c for i, c in enumerate(command))}",
                  flush=True)
        return status, out, err

    def record(self, ok, what, **fields):
        entry = dict(what=what, ok=ok, **fields)
        self.results.append(entry)
        self.failures += not ok
        detail = ", ".join(f"{k} {v}" for k, v in fields.items() if k not in ("output",))
        print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}", flush=True)
        self.save()

    def save(self):
        RESULTS[self.name] = {"failures": self.failures, "seconds": round(time.time() - self.started, 1),
                              "results": self.results}
        with open(os.path.join(OUT, "results.json"), "w") as out:
            json.dump(RESULTS, out, indent=1)

    def bench_lines(self, lines):
        """Appends benchmark lines (dicts) to OUT/bench.jsonl, each naming this step."""
        with open(os.path.join(OUT, "bench.jsonl"), "a") as out:
            out.writelines(json.dumps(dict(step=self.name, **line)) + "\n" for line in lines)

    def finish(self):
        self.save()
        print(f"== {self.name}: {len(self.results) - self.failures} ok, {self.failures} failed, "
              f"{time.time() - self.started:.0f} s", flush=True)
        return self.failures


def glibc_version():
    text = os.confstr("CS_GNU_LIBC_VERSION") or "glibc 0"  # "glibc 2.39"
    return tuple(int(p) for p in text.split()[-1].split(".")[:2])


PREBUILT = ["bin", "bin-dynamic"]  # libstdc++ linked in (glibc >= 2.36), or the system's (glibc >= 2.34)


def prebuilt_fits(step, folder):
    """Whether the binaries in KIT/folder have their GLIBC_ needs met and each of
    them starts (a missing GLIBCXX_ version or library shows there)."""
    needs = json.load(open(os.path.join(KIT, folder, "requirements.json")))
    have = glibc_version()
    for name, need in needs.items():
        version = tuple(int(p) for p in need.get("GLIBC", "0").split("."))
        if version > have:
            step.log(f"{folder}/{name} needs GLIBC_{need['GLIBC']}, this machine has glibc {'.'.join(map(str, have))}")
            return False
    for name, probe in (("ein-run", "--help"), ("ein-inspect", "--help"), ("cuda_runtime_tests", "--gtest_list_tests")):
        status, _, _ = step.run([os.path.join(KIT, folder, name), probe], 30, quiet=True)
        if status != 0:
            return False
    return True


def binaries(step):
    """The folder of ein-run, ein-inspect, cuda_runtime_tests and attention_bench
    that run here: bin/, else bin-dynamic/, else the source build (made now if missing)."""
    if os.environ.get("EIN_KIT_FORCE_SOURCE") != "1":
        for folder in PREBUILT:
            if prebuilt_fits(step, folder):
                return os.path.join(KIT, folder)
    built = os.path.join(SOURCE_BUILD, "bin")
    if not os.path.exists(os.path.join(built, "attention_bench")):
        print("   the prebuilt binaries do not run here: building gpu-kit/src (a few minutes)", flush=True)
        status, _, err = step.run(["bash", os.path.join(KIT, "build-from-source.sh"), SOURCE_BUILD], timeout=480,
                                  env={"EIN_KIT_LIBRARY_DIRS": ":".join(library_folders())}, within_step=False)
        if status != 0:
            raise RuntimeError("the source build failed: " + err.strip()[-500:])
    return built


def device_args():
    return ["--device", DEVICE] if DEVICE else ["--device", "cuda"]


def device_env():
    index = DEVICE.split(":")[1] if DEVICE and ":" in DEVICE else None
    return {"EIN_CUDA_DEVICE": index} if index is not None else {}


# ---- steps ------------------------------------------------------------------------------------

def step_env():
    step = Step("env")
    have = glibc_version()
    step.record(True, "glibc", version=".".join(map(str, have)))
    for command in (["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap", "--format=csv,noheader"],
                    ["nvcc", "--version"], ["cmake", "--version"], ["c++", "--version"], ["uname", "-a"]):
        status, out, err = step.run(command, 60)
        line = (out.strip().splitlines() or [err.strip()])[-1 if command[0] == "nvcc" else 0]
        step.record(status == 0, command[0], output=line)
    status, out, err = step.run([sys.executable, "-c", "import torch, numpy; print(torch.__version__, "
                                 "torch.version.cuda, torch.cuda.get_device_name(0), numpy.__version__)"], 120)
    step.record(status == 0, "torch", output=(out or err).strip()[-200:])
    step.record(bool(library_folders()), "libcublasLt folders", output=":".join(library_folders()) or "none found")
    for folder in PREBUILT:
        needs = json.load(open(os.path.join(KIT, folder, "requirements.json")))
        step.record(True, f"prebuilt {folder}", needs=needs, run_here=prebuilt_fits(step, folder))
    try:
        folder = binaries(step)
        step.record(True, "binaries used", folder=folder)
        # libein_cuda.so: the CUDA backend ein-run and the tests load, beside them (prebuilt) or in ../lib.
        backend = [p for p in (os.path.join(folder, "libein_cuda.so"), os.path.join(folder, "..", "lib", "libein_cuda.so"))
                   if os.path.exists(p)]
        step.record(bool(backend), "libein_cuda.so", path=backend[0] if backend else "not found")
        for name in ("ein-run", "ein-inspect", "cuda_runtime_tests", "attention_bench", *backend):
            status, out, err = step.run(["ldd", os.path.join(folder, name)], 30)
            missing = [line.strip() for line in out.splitlines() if "not found" in line]
            cublas = [line.strip() for line in out.splitlines() if "cublasLt" in line]
            step.record(status == 0 and not missing, f"ldd {os.path.basename(name)}", cublasLt=cublas[0] if cublas else "-",
                        missing=missing)
        status, out, err = step.run([os.path.join(folder, "cuda_runtime_tests"), "--gtest_list_tests"], 60)
        step.record(status == 0, "cuda_runtime_tests --gtest_list_tests",
                    tests=sum(1 for line in out.splitlines() if line.startswith("  ")))
    except RuntimeError as error:
        step.record(False, "binaries", output=str(error))
    return step.finish()


def test_names(folder, step):
    status, out, _ = step.run([os.path.join(folder, "cuda_runtime_tests"), "--gtest_list_tests"], 60, quiet=True)
    names, suite = [], ""
    for line in out.splitlines():
        if not line.startswith(" "):
            suite = line.split("#")[0].strip()
        elif line.strip():
            names.append(suite + line.split("#")[0].strip())
    return names


def gtest_counts(output):
    counts = {}
    for kind in ("PASSED", "SKIPPED", "FAILED"):
        found = re.search(rf"\[\s+{kind}\s+\] (\d+) tests?", output)
        counts[kind.lower()] = int(found.group(1)) if found else 0
    return counts


def gtest_outcomes(output):
    """What each test that ran in a gtest binary's output came to, in order:
    {name: "passed" | "failed" | "skipped"}, and the test that had started and
    not ended when the output stops (None when every started test ended)."""
    outcomes, running = {}, None
    for line in output.splitlines():
        found = re.match(r"\[ (RUN|\s*OK|\s*FAILED|\s*SKIPPED) \s*\] (\S+)", line)
        if not found or "." not in found.group(2):  # the summary lines name counts, not tests
            continue
        kind, name = found.group(1).strip(), found.group(2)
        if kind == "RUN":
            running = name
        elif name == running:  # the summary after the run repeats "[  FAILED  ] name": not a new outcome
            outcomes[name] = {"OK": "passed", "FAILED": "failed", "SKIPPED": "skipped"}[kind]
            running = None
    return outcomes, running


def run_tests_resuming(step, binary, names, env, timeout):
    """Runs the tests `names` of a gtest binary in as few processes as it takes:
    one, unless a test crashes it or hangs; then that test is recorded as such
    and the tests after it run on in a new process. Returns {name: (outcome,
    output tail or "")}; a test never reached within the time is "not run"."""
    results, remaining = {}, list(names)
    while remaining:
        status, out, err = step.run([binary, "--gtest_filter=" + ":".join(remaining)], timeout, env=env, quiet=True)
        outcomes, running = gtest_outcomes(out)
        for name, outcome in outcomes.items():
            results[name] = (outcome, "" if outcome != "failed" else test_output(out, name))
        if running is not None:
            results[running] = ("timed out" if status == 124 else f"crashed (exit {status})", (out + err)[-1500:])
        elif not outcomes or status == 124:  # nothing started, or cut short between tests: no test to blame
            for name in remaining:
                if name not in results:
                    results[name] = ("not run", (out + err)[-400:])
        remaining = [name for name in remaining if name not in results]
        if not remaining and running is None and status not in (0, 1):  # every test ended, then the process died
            results["(the process, after its tests)"] = (f"crashed (exit {status})", (out + err)[-1500:])
    return results


def test_output(output, name):
    """The lines one test printed between its RUN and its end."""
    lines = output.splitlines()
    first = next((at for at, line in enumerate(lines) if line.startswith("[ RUN") and line.endswith(" " + name)), 0)
    return "\n".join(lines[first:first + 40])[-1500:]


def step_tests():
    step = Step("tests")
    folder = binaries(step)
    tests = os.path.join(folder, "cuda_runtime_tests")
    names = test_names(folder, step)
    step.record(bool(names), "cuda_runtime_tests --gtest_list_tests", tests=len(names))
    # Synchronous first: an asynchronous kernel error is reported by the test whose kernel made it.
    for name, (outcome, output) in run_tests_resuming(step, tests, names, dict(device_env(), EIN_CUDA_SYNC="1"),
                                                      240).items():
        step.record(outcome == "passed", f"{name} (EIN_CUDA_SYNC=1)", outcome=outcome,
                    **({"output": output} if output else {}))
    status, out, err = step.run([tests], 240, env=device_env())
    step.record(status == 0 and gtest_counts(out)["failed"] == 0 and gtest_counts(out)["skipped"] == 0,
                "cuda_runtime_tests, all, asynchronous", **gtest_counts(out),
                **({} if status == 0 else {"output": (out + err)[-1500:]}))
    return step.finish()


def step_sanitize():
    step = Step("sanitize")
    folder = binaries(step)
    sanitizer = shutil.which("compute-sanitizer") or next(
        (p for p in ["/usr/local/cuda/bin/compute-sanitizer", "/usr/local/cuda/compute-sanitizer/compute-sanitizer"]
         if os.path.exists(p)), None)
    if not sanitizer:
        step.record(False, "compute-sanitizer", output="not found")
        return step.finish()
    # The large-m gemm is left out: 3 million outputs under the sanitizer take too long, and
    # the same kernel runs in the other gemm tests.
    filters = {"attention": "CudaAttention*:CudaKernels.Attention*:CudaKernels.TalkingHeads",
               "layernorm": "CudaKernels.SoftmaxLayerNormReduce",
               "gemm": "CudaKernels.Gemm*:-CudaKernels.GemmTiledWithLargeM"}
    for tool, timeout in (("memcheck", 150), ("racecheck", 180)):
        for what, gtest_filter in filters.items():
            status, out, err = step.run([sanitizer, "--tool", tool, "--error-exitcode", "3",
                                         os.path.join(folder, "cuda_runtime_tests"), f"--gtest_filter={gtest_filter}"],
                                        timeout, env=device_env())
            summary = re.findall(r"=+ (?:ERROR SUMMARY|RACECHECK SUMMARY): .*", out + err)
            counts = gtest_counts(out)
            ran = counts["passed"] > 0 and counts["skipped"] == 0 and counts["failed"] == 0
            step.record(status == 0 and ran, f"{tool} {what}", summary=summary[-1] if summary else "-", **counts,
                        **({} if status == 0 else {"output": (out + err)[-1500:]}))
    return step.finish()


def step_conformance():
    import numpy as np
    step = Step("conformance")
    folder = binaries(step)
    for name in sorted(os.listdir(os.path.join(KIT, "cases"))):
        case_dir = os.path.join(KIT, "cases", name)
        spec = json.load(open(os.path.join(case_dir, "case.json")))
        for precision in ("fp32", "bf16", "fp16"):
            # As conformance_test.cpp: a case may widen a precision's atol ("bf16_atol": logits).
            atol = max(spec["tolerance"]["atol"], WIDENED[precision], spec["tolerance"].get(f"{precision}_atol", 0.0))
            rtol = max(spec["tolerance"]["rtol"], WIDENED[precision])
            out_dir = tempfile.mkdtemp()
            command = [os.path.join(folder, "ein-run"), os.path.join(case_dir, f"model_{precision}.einb"),
                       *device_args(), "--output-dir", out_dir]
            for input_name in spec["inputs"]:
                command += ["--input", f"{input_name}={os.path.join(case_dir, input_name + '.npy')}"]
            status, out, err = step.run(command, 120, env={"EIN_CUDA_SYNC": "1"})
            if status != 0:
                step.record(False, f"{name} {precision}", output="ein-run failed: " + err.strip()[-400:])
                continue
            ok, errors = True, {}
            for output in spec["outputs"]:
                got = np.load(os.path.join(out_dir, output + ".npy")).astype(np.float64)
                want = np.load(os.path.join(case_dir, "expected", output + ".npy")).astype(np.float64)
                if got.shape != want.shape:
                    ok = False
                    errors[output] = f"shape {got.shape} != {want.shape}"
                    continue
                ok &= bool(np.isclose(got, want, atol=atol, rtol=rtol, equal_nan=True).all())
                finite = np.isfinite(want) & np.isfinite(got)
                errors[output] = float(np.max(np.abs(got - want)[finite])) if finite.any() else 0.0
            step.record(ok, f"{name} {precision}", max_abs_error=errors, atol=atol, rtol=rtol)
        generation = os.path.join(case_dir, "generation.json")
        if os.path.exists(generation):
            check_generation(step, folder, case_dir, name, json.load(open(generation)))
    return step.finish()


def check_generation(step, folder, case_dir, name, expected):
    """A decoder with a key/value cache in the session: its prompt, then token
    by token on the device (the cache on the GPU, one run per token), at fp32
    token for token what transformers' greedy generate gave; at bf16 and fp16
    the tokens that agree before the first difference are recorded. An
    encoder-decoder's encoder inputs are the case's .npy files it names."""
    prompt, greedy = expected["prompt"], expected["greedy"]
    encoder = [arg for input_name in expected.get("encoder_inputs", [])
               for arg in ("--input", f"{input_name}={os.path.join(case_dir, input_name + '.npy')}")]
    for precision in ("fp32", "bf16", "fp16"):
        command = [os.path.join(folder, "ein-run"), os.path.join(case_dir, f"model_{precision}.einb"), *device_args(),
                   *encoder, "--generate", str(len(greedy)), "--prompt-ids", ",".join(map(str, prompt))]
        status, out, err = step.run(command, 60, env={"EIN_CUDA_SYNC": "1"})
        found = re.search(r"^tokens: ([\d,]*)$", out, re.M)
        if status != 0 or not found:
            step.record(False, f"{name} generate {precision}", output="ein-run failed: " + (err or out).strip()[-400:])
            continue
        tokens = [int(t) for t in found.group(1).split(",") if t]
        agreeing = next((i for i, (a, b) in enumerate(zip(tokens, greedy)) if a != b), min(len(tokens), len(greedy)))
        step.record(precision != "fp32" or tokens == greedy, f"{name} generate {precision}",
                    tokens_agreeing=f"{agreeing} of {len(greedy)}", tokens=tokens)


def refilled_artifact(stripped, work, block_floats=1 << 22):
    """A kit artifact whose weight segment was cut off, refilled in `work`. Each
    parameter's stored tensor (ein-inspect --json's params: offset, bytes,
    dtype) gets the same N(0, 0.02) values, the scale of timm's and
    transformers' initialisation, a block of `block_floats` repeated, in its
    stored type (f32, or bf16 / f16 gemm weights), so every precision's
    artifact holds the same weights, rounded as einc rounds them. The rest of
    the segment (folded constants) is zeros."""
    import numpy as np
    size = int(open(stripped + ".weights_bytes").read())
    tensors = {(t["stored"]["offset"], t["stored"]["bytes"], t["stored"]["dtype"])
               for t in json.load(open(stripped + ".json"))["params"]["tensors"]}
    block = np.random.default_rng(2).standard_normal(block_floats, dtype=np.float32) * 0.02
    typed = {"f32": block.tobytes(), "f16": block.astype(np.float16).tobytes(),
             # to nearest even, as einc rounds
             "bf16": ((block.view(np.uint32) + 0x7FFF + ((block.view(np.uint32) >> 16) & 1)) >> 16)
             .astype(np.uint16).tobytes()}
    artifact = os.path.join(work, os.path.basename(stripped))
    with open(artifact, "wb") as out:
        out.write(open(stripped, "rb").read())
        base = out.tell()
        out.truncate(base + size)
        for offset, length, dtype in sorted(tensors):
            values = typed[dtype]
            out.seek(base + offset)
            for start in range(0, length, len(values)):
                out.write(values[:length - start])
    return artifact


def vit_artifact(precision, work):
    """The ViT-B/16 batch-64 artifact with its weights refilled."""
    return refilled_artifact(os.path.join(KIT, "vit", f"vit_b16_batch64_{precision}.einb"), work)


def vit_images(work, batch=64):
    import numpy as np
    path = os.path.join(work, "img.npy")
    if not os.path.exists(path):
        np.save(path, np.random.default_rng(1).standard_normal((batch, 3, 224, 224), dtype=np.float32))
    return path


def step_vit_accuracy():
    import numpy as np
    step = Step("vit-accuracy")
    folder = binaries(step)
    work = tempfile.mkdtemp()
    images = vit_images(work)
    logits = {}
    for precision in ("fp32", "bf16"):
        out_dir = os.path.join(work, precision)
        status, out, err = step.run([os.path.join(folder, "ein-run"), vit_artifact(precision, work), *device_args(),
                                     "--input", f"img={images}", "--output-dir", out_dir], 300)
        if status != 0:
            step.record(False, f"ein-run ViT-B/16 {precision}", output=err.strip()[-400:])
            continue
        logits[precision] = np.load(glob.glob(os.path.join(out_dir, "*.npy"))[0]).astype(np.float64)
        step.record(bool(np.isfinite(logits[precision]).all()), f"ein-run ViT-B/16 {precision}",
                    shape=list(logits[precision].shape), max_abs_logit=float(np.abs(logits[precision]).max()))
    if len(logits) == 2:
        reference, got = logits["fp32"], logits["bf16"]
        scale = float(np.abs(reference).max())
        error = float(np.abs(got - reference).max())
        agreement = float((got.argmax(-1) == reference.argmax(-1)).mean())
        # bf16 GEMMs and attention through 12 blocks: a few 1e-2 of the logits' scale at most.
        step.record(error <= 5e-2 * scale, "ViT-B/16 bf16 against fp32 logits", max_abs_error=error,
                    relative_to_max_logit=error / scale if scale else float("nan"), top1_agreement=agreement,
                    images=int(reference.shape[0]))
    return step.finish()


def step_bench_attention():
    step = Step("bench-attention")
    folder = binaries(step)
    bench = os.path.join(folder, "attention_bench")
    sdpa = [sys.executable, os.path.join(KIT, "attention_torch.py"), "--dtype"]
    # One process per engine and precision, causal and not (a process start costs more than its runs).
    for engine, command in (("ein flash2 bf16", [bench, "--precision", "bf16"]),
                            ("torch SDPA bf16", sdpa + ["bf16"]),
                            ("ein flash2 fp16", [bench, "--precision", "fp16"]),
                            ("torch SDPA fp16", sdpa + ["fp16"])):
        status, out, err = step.run(command + ["--causal", "both"], 120, env=device_env())
        rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        step.bench_lines(rows)
        step.record(status == 0 and len(rows) == 12, engine,
                    tflops={f"n{r['n']} d{r['head_dim']}{' causal' if r['causal'] else ''}": r["tflops"] for r in rows},
                    **({} if status == 0 else {"output": err.strip()[-400:]}))
    return step.finish()


def torch_vit_worker(mode, precision, runs):
    """One PyTorch engine in its own process (so a torch.compile failure or hang
    costs only itself): prints one JSON line."""
    import numpy as np
    import torch
    sys.path.insert(0, KIT)
    from vit_vs_pytorch import timm_weights, torch_vit
    model = torch_vit(768, 12).cuda().eval()
    model.load_state_dict({k: torch.from_numpy(v) for k, v in timm_weights(768, seed=0).items()})
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    x = torch.from_numpy(np.random.default_rng(1).standard_normal((64, 3, 224, 224), dtype=np.float32)).cuda()
    module = torch.compile(model) if mode == "compile" else model
    dtype = torch.bfloat16 if precision == "bf16" else None
    with torch.inference_mode(), torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
        for _ in range(5):
            module(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(runs):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            module(x)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
    median = sorted(times)[len(times) // 2]
    print(json.dumps({"impl": f"torch_{mode}_{precision}", "batch": 64, "median_ms": round(median, 3),
                      "images_per_s": round(64 / median * 1e3, 1), "device": torch.cuda.get_device_name(0)}))


def step_bench_vit(runs=20):
    step = Step("bench-vit")
    folder = binaries(step)
    work = tempfile.mkdtemp()
    images = vit_images(work)
    for precision in ("fp32", "bf16"):
        status, out, err = step.run([os.path.join(folder, "ein-run"), vit_artifact(precision, work), *device_args(),
                                     "--input", f"img={images}", "--bench", str(runs), "--output-dir", work], 120)
        found = re.search(r"median ([\d.]+) ms", out + err)
        if status == 0 and found:
            median = float(found.group(1))
            line = {"impl": f"ein_cuda_{precision}", "batch": 64, "median_ms": median,
                    "images_per_s": round(64 / median * 1e3, 1)}
            step.bench_lines([line])
            step.record(True, f"ein ViT-B/16 {precision}", **line)
        else:
            step.record(False, f"ein ViT-B/16 {precision}", output=(out + err).strip()[-400:])
    # Where ein's bf16 time goes: each kind of step's device time (EIN_PROFILE waits for every step).
    status, out, err = step.run([os.path.join(folder, "ein-run"), vit_artifact("bf16", work), *device_args(),
                                 "--input", f"img={images}", "--bench", "3", "--output-dir", work], 60,
                                env={"EIN_PROFILE": "1", "EIN_CUDA_VERBOSE": "1"})
    step.record(status == 0, "ein ViT-B/16 bf16 profile", profile=profile_lines(err), kernels=kernel_choices(err))
    # bf16 first: the comparison the goal names; each torch.compile takes a minute or two.
    for precision, mode in (("bf16", "eager"), ("bf16", "compile"), ("fp32", "eager"), ("fp32", "compile")):
        status, out, err = step.run([sys.executable, os.path.abspath(__file__), "torch-vit-worker", mode, precision,
                                     str(runs)], 200 if mode == "compile" else 90)
        rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        if status == 0 and rows:
            step.bench_lines(rows[-1:])
            step.record(True, f"torch {mode} ViT-B/16 {precision}", **rows[-1])
        else:
            step.record(False, f"torch {mode} ViT-B/16 {precision}", output=err.strip()[-400:])
    return step.finish()


def profile_lines(text):
    """EIN_PROFILE's lines, each "kind: ms in calls"."""
    found = re.findall(r"^profile: (.+?)\s+([\d.]+) ms in (\d+) calls$", text, re.M)
    return {kind.strip(): f"{float(ms):.2f} ms in {calls}" for kind, ms, calls in found}


KERNEL_CHOICES = ("gemv over bf16 weights", "cuBLASLt over bf16 weights", "cuBLASLt", "tiled gemm",
                  "flash attention on tensor cores (flash2)", "flash attention in fp32")


def kernel_choices(text):
    """EIN_CUDA_VERBOSE's kernel choices ("ein cuda: STEP: CHOICE"), counted over every prepare."""
    pattern = "|".join(re.escape(choice) for choice in KERNEL_CHOICES)
    return dict(collections.Counter(re.findall(rf"^ein cuda: .*?: ({pattern})(?: \(.*\))?$", text, re.M)))


LLAMA_PROMPT, LLAMA_NEW_TOKENS = 128, 32


def torch_llama_worker(runs):
    """transformers' LlamaForCausalLM at the kit's 1.1B shape, bf16, random
    weights, greedy generate with its default (dynamic) cache: one JSON line."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                         num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    ids = torch.randint(0, 32000, (1, LLAMA_PROMPT), device="cuda")
    def timed(function):
        torch.cuda.synchronize()
        start = time.perf_counter()
        function()
        torch.cuda.synchronize()
        return time.perf_counter() - start
    with torch.inference_mode():
        generate = lambda: model.generate(ids, max_new_tokens=LLAMA_NEW_TOKENS, min_new_tokens=LLAMA_NEW_TOKENS,
                                          do_sample=False)
        timed(generate)  # warm-up
        prefill = sorted(timed(lambda: model(ids)) for _ in range(runs))[runs // 2]
        total = sorted(timed(generate) for _ in range(runs))[runs // 2]
    decode = (total - prefill) / (LLAMA_NEW_TOKENS - 1)
    print(json.dumps({"impl": "torch_eager_bf16", "prompt": LLAMA_PROMPT, "prefill_tokens_per_s":
                      round(LLAMA_PROMPT / prefill, 1), "decode_tokens_per_s": round(1 / decode, 1),
                      "device": torch.cuda.get_device_name(0)}))


def step_bench_decode():
    """The 1.1B Llama shape (kit llama/: TinyLlama's sizes, cache 2048): a
    128-token prompt, then 32 greedy tokens one run each, the cache on the GPU;
    decode's weight bytes per second against the GPU's memory bandwidth; then
    where a decode's time goes (EIN_PROFILE), and transformers' eager bf16."""
    step = Step("bench-decode")
    folder = binaries(step)
    work = tempfile.mkdtemp()
    prompt = ",".join(str((i * 7919) % 32000) for i in range(LLAMA_PROMPT))
    for precision in ("fp32", "bf16"):
        stripped = os.path.join(KIT, "llama", f"llama_1b_{precision}.einb")
        if not os.path.exists(stripped):
            step.record(False, f"ein Llama 1.1B {precision}", output="the kit has no " + stripped)
            continue
        weights = int(open(stripped + ".weights_bytes").read())
        artifact = refilled_artifact(stripped, work)
        command = [os.path.join(folder, "ein-run"), artifact, *device_args(), "--generate", str(LLAMA_NEW_TOKENS),
                   "--prompt-ids", prompt]
        status, out, err = step.run(command, 90)
        prefill = re.search(r"^prefill: (\d+) tokens in ([\d.]+) ms", out, re.M)
        decode = re.search(r"^decode: (\d+) tokens in ([\d.]+) ms", out, re.M)
        if status != 0 or not prefill or not decode:
            step.record(False, f"ein Llama 1.1B {precision}", output=(out + err).strip()[-400:])
        else:
            decode_rate = int(decode.group(1)) / float(decode.group(2)) * 1e3
            line = {"impl": f"ein_cuda_{precision}", "prompt": LLAMA_PROMPT,
                    "prefill_tokens_per_s": round(int(prefill.group(1)) / float(prefill.group(2)) * 1e3, 1),
                    "decode_tokens_per_s": round(decode_rate, 1), "weights_gb": round(weights / 1e9, 3),
                    "decode_weight_gb_per_s": round(weights * decode_rate / 1e9, 1)}
            step.bench_lines([line])
            step.record(True, f"ein Llama 1.1B {precision}", **line)
        if precision == "bf16":
            status, out, err = step.run(command[:-3] + ["8", "--prompt-ids", prompt], 60,
                                        env={"EIN_PROFILE": "1", "EIN_CUDA_VERBOSE": "1"})
            step.record(status == 0, f"ein Llama 1.1B {precision} profile", profile=profile_lines(err),
                        kernels=kernel_choices(err))
        os.remove(artifact)
    status, out, err = step.run([sys.executable, os.path.abspath(__file__), "torch-llama-worker", "3"], 150)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if status == 0 and rows:
        step.bench_lines(rows[-1:])
        step.record(True, "torch eager Llama 1.1B bf16", **rows[-1])
    else:
        step.record(False, "torch eager Llama 1.1B bf16", output=err.strip()[-400:])
    return step.finish()


RUNNERS = {"env": step_env, "tests": step_tests, "sanitize": step_sanitize, "conformance": step_conformance,
           "vit-accuracy": step_vit_accuracy, "bench-attention": step_bench_attention, "bench-vit": step_bench_vit,
           "bench-decode": step_bench_decode}
DEVICE = None


def parse_options(argv):
    """Sets DEVICE, BUDGET and OUT from the options in `argv`; returns the
    step names and whether --no-bench was given."""
    global DEVICE, BUDGET, OUT
    argv, chosen_out = list(argv), None
    for option in ("--device", "--budget", "--out"):
        if option in argv:
            value = argv[argv.index(option) + 1]
            del argv[argv.index(option):argv.index(option) + 2]
            if option == "--device":
                DEVICE = value
            elif option == "--budget":
                BUDGET = float(value)
            else:
                chosen_out = value
    OUT = output_folder(chosen_out)
    return [a for a in argv if not a.startswith("--")], "--no-bench" in argv


def main(argv):
    if argv[:1] == ["torch-vit-worker"]:
        torch_vit_worker(argv[1], argv[2], int(argv[3]))
        return 0
    if argv[:1] == ["torch-llama-worker"]:
        torch_llama_worker(int(argv[1]))
        return 0
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    names, no_bench = parse_options(argv)
    steps = []
    for name in names or ["correctness"] + ([] if no_bench else ["bench-attention", "bench-vit", "bench-decode"]):
        if name == "correctness":
            steps += ["env", "tests", "conformance"]
        elif name == "all":
            steps += STEPS
        elif name in RUNNERS:
            steps.append(name)
        else:
            print(f"check.py: unknown step {name!r} (steps: {', '.join(STEPS)}, correctness, all)")
            return 2
    os.makedirs(OUT, exist_ok=True)
    for name in ("results.json", "check.log", "bench.jsonl"):  # this run's files only
        if os.path.exists(os.path.join(OUT, name)):
            os.remove(os.path.join(OUT, name))
    failures, summary = 0, []
    for name in steps:
        try:
            failed = RUNNERS[name]()
        except Exception as error:  # one broken step must not hide the others' summaries
            print(f"FAIL {name}: {type(error).__name__}: {error}", flush=True)
            failed = 1
        failures += failed
        summary.append(f"{name}: {'ok' if not failed else f'{failed} failed'}")
    print_digest()
    print("summary: " + "; ".join(summary) + f" (in {OUT}: results.json, check.log, bench.jsonl)", flush=True)
    return 1 if failures else 0


def print_digest():
    """What failed and every benchmark figure, in a few lines at the end of the
    output, where a terminal's or a CI log's tail shows them."""
    print("== digest", flush=True)
    for name, step in RESULTS.items():
        failed = [entry["what"] for entry in step["results"] if not entry["ok"]]
        print(f"{name}: {len(step['results']) - len(failed)} ok, {len(failed)} failed, {step['seconds']:.0f} s"
              + (": " + "; ".join(failed) if failed else ""))
    path = os.path.join(OUT, "bench.jsonl")
    for line in (json.loads(text) for text in (open(path) if os.path.exists(path) else [])):
        if "tflops" in line:
            causal = " causal" if line["causal"] else "       "
            print(f"  {line['impl']:<24} n {line['n']:>5} d {line['head_dim']:>3}{causal}"
                  f"  {line['ms']:9.3f} ms  {line['tflops']:7.1f} TFLOP/s" +
                  (f"  key tile {line['key_tile']}" if "key_tile" in line else ""))
        elif "decode_tokens_per_s" in line:
            print(f"  {line['impl']:<24} Llama 1.1B prompt {line['prompt']}  prefill "
                  f"{line['prefill_tokens_per_s']:8.1f} tokens/s  decode {line['decode_tokens_per_s']:7.1f} tokens/s" +
                  (f"  {line['decode_weight_gb_per_s']:7.1f} GB/s of weights" if "decode_weight_gb_per_s" in line
                   else ""))
        else:
            print(f"  {line['impl']:<24} ViT-B/16 batch {line['batch']}  {line['median_ms']:9.2f} ms  "
                  f"{line['images_per_s']:8.1f} images/s")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
