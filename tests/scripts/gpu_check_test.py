#!/usr/bin/env python3
"""Tests of scripts/gpu-check.py's bookkeeping, which must work the first time
it runs on a GPU machine: reading gtest's output, going on past a test that
crashes or hangs its process, cutting commands at a step's share of the
time, and its options. A stand-in for a gtest binary (this file, run with
--fake-gtest) plays the tests; no GPU is needed.

    python3 tests/scripts/gpu_check_test.py      (ctest: gpu_check_script)"""
import importlib.util
import os
import signal
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "..", "..", "scripts", "gpu-check.py")


def fake_gtest(argv):
    """Plays gtest: Suite.Crash dies with SIGSEGV, Suite.Hang sleeps, Suite.Fails fails, Suite.Skip skips."""
    names = [a.split("=", 1)[1].split(":") for a in argv if a.startswith("--gtest_filter=")][0]
    failed = []
    print(f"[==========] Running {len(names)} tests from 1 test suite.", flush=True)
    for name in names:
        print(f"[ RUN      ] {name}", flush=True)
        if name == "Suite.Crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        if name == "Suite.Hang":
            time.sleep(60)
        if name == "Suite.Fails":
            print("test.cpp:10: Failure\nExpected equality", flush=True)
            print(f"[  FAILED  ] {name} (1 ms)", flush=True)
            failed.append(name)
        elif name == "Suite.Skip":
            print(f"[  SKIPPED ] {name} (0 ms)", flush=True)
        else:
            print(f"[       OK ] {name} (2 ms)", flush=True)
    print(f"[  PASSED  ] {len(names) - len(failed)} tests.")
    if failed:
        print(f"[  FAILED  ] {len(failed)} test, listed below:")
        for name in failed:
            print(f"[  FAILED  ] {name}")
    return 1 if failed else 0


def load_check():
    os.environ["OUT"] = tempfile.mkdtemp(prefix="gpu-check-test-")
    spec = importlib.util.spec_from_file_location("gpu_check", CHECK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class GpuCheckTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.check = load_check()
        cls.fake = [sys.executable, os.path.abspath(__file__), "--fake-gtest"]

    def run_tests(self, names, timeout=30):
        step = self.check.Step("tests")
        wrapper = os.path.join(self.check.OUT, "fake_gtest")
        with open(wrapper, "w") as script:
            script.write(f"#!/bin/sh\nexec {' '.join(self.fake)} \"$@\"\n")
        os.chmod(wrapper, 0o755)
        return self.check.run_tests_resuming(step, wrapper, names, {}, timeout)

    def test_outcomes_of_passing_failing_and_skipped_tests(self):
        output = ("[ RUN      ] A.One\n[       OK ] A.One (3 ms)\n[ RUN      ] A.Two\nboom\n[  FAILED  ] A.Two (1 ms)\n"
                  "[ RUN      ] A.Three\n[  SKIPPED ] A.Three (0 ms)\n[  PASSED  ] 1 test.\n"
                  "[  FAILED  ] 1 test, listed below:\n[  FAILED  ] A.Two\n")
        outcomes, running = self.check.gtest_outcomes(output)
        self.assertEqual(outcomes, {"A.One": "passed", "A.Two": "failed", "A.Three": "skipped"})
        self.assertIsNone(running)

    def test_kernel_choices_are_counted_from_the_executors_verbose_lines(self):
        text = ("ein cuda: gemm at m.ein:3:1: gemv over bf16 weights\n"
                "ein cuda: gemm at m.ein:4:1: tiled gemm (cublasLtMatmulAlgoGetHeuristic: NOT_SUPPORTED)\n"
                "ein cuda: gemm at m.ein:3:1: gemv over bf16 weights\n"
                "ein cuda: attention at m.ein:5:1: flash attention on tensor cores (flash2)\n"
                "ein cuda: NVIDIA H200 (sm_90), precision bf16, 3 steps, arena 64 bytes\n")
        self.assertEqual(self.check.kernel_choices(text),
                         {"gemv over bf16 weights": 2, "tiled gemm": 1, "flash attention on tensor cores (flash2)": 1})

    def test_a_test_that_has_not_ended_is_the_one_running(self):
        outcomes, running = self.check.gtest_outcomes("[ RUN      ] A.One\n[       OK ] A.One (3 ms)\n"
                                                      "[ RUN      ] A/Typed.Two/0\n")
        self.assertEqual(outcomes, {"A.One": "passed"})
        self.assertEqual(running, "A/Typed.Two/0")

    def test_a_crash_is_named_and_the_tests_after_it_still_run(self):
        results = self.run_tests(["Suite.A", "Suite.Crash", "Suite.B", "Suite.Fails", "Suite.Skip", "Suite.C"])
        outcomes = {name: outcome for name, (outcome, _) in results.items()}
        self.assertEqual(outcomes["Suite.A"], "passed")
        self.assertTrue(outcomes["Suite.Crash"].startswith("crashed"), outcomes["Suite.Crash"])
        self.assertEqual(outcomes["Suite.B"], "passed")
        self.assertEqual(outcomes["Suite.Fails"], "failed")
        self.assertIn("Expected equality", results["Suite.Fails"][1])
        self.assertEqual(outcomes["Suite.Skip"], "skipped")
        self.assertEqual(outcomes["Suite.C"], "passed")
        self.assertEqual(len(results), 6)

    def test_a_hung_test_times_out_and_the_rest_are_not_run_past_the_budget(self):
        started = time.time()
        results = self.run_tests(["Suite.A", "Suite.Hang", "Suite.B"], timeout=3)
        outcomes = {name: outcome for name, (outcome, _) in results.items()}
        self.assertEqual(outcomes["Suite.A"], "passed")
        self.assertEqual(outcomes["Suite.Hang"], "timed out")
        self.assertEqual(outcomes["Suite.B"], "passed")  # a new process, after the timeout
        self.assertLess(time.time() - started, 30)

    def test_a_step_cannot_run_past_its_share(self):
        step = self.check.Step("bench-attention")
        step.started = time.time() - self.check.STEP_SECONDS["bench-attention"] + 7  # 7 s of its share left
        started = time.time()
        status, _, err = step.run(["sleep", "30"], 300)
        self.assertEqual(status, 124)
        self.assertLess(time.time() - started, 15)
        step.started = time.time() - self.check.STEP_SECONDS["bench-attention"]  # nothing left: not even started
        status, _, err = step.run(["true"], 300)
        self.assertEqual(status, 124)
        self.assertIn("not run", err)
        status, _, _ = step.run(["true"], 300, within_step=False)  # the source build counts against the budget only
        self.assertEqual(status, 0)

    def test_options_set_the_device_the_budget_and_the_output_folder(self):
        check = self.check
        saved = check.DEVICE, check.BUDGET, check.OUT, os.environ.get("OUT")
        try:
            chosen = tempfile.mkdtemp(prefix="gpu-check-out-")
            names, no_bench = check.parse_options(["tests", "--out", chosen, "--device", "cuda:1", "--budget", "90",
                                                   "conformance", "--no-bench"])
            self.assertEqual(names, ["tests", "conformance"])
            self.assertTrue(no_bench)
            self.assertEqual((check.DEVICE, check.BUDGET, check.OUT), ("cuda:1", 90.0, chosen))
            self.assertEqual(check.device_env(), {"EIN_CUDA_DEVICE": "1"})
            os.environ["OUT"] = chosen  # without --out: $OUT, else a new folder under the current directory
            check.parse_options([])
            self.assertEqual(check.OUT, chosen)
            del os.environ["OUT"]
            names, no_bench = check.parse_options([])
            self.assertEqual((names, no_bench), ([], False))
            self.assertEqual(os.path.dirname(check.OUT), os.path.abspath("gpu-check-results"))
            self.assertFalse(os.path.exists(check.OUT))  # made when a step first writes to it
        finally:
            check.DEVICE, check.BUDGET, check.OUT = saved[:3]
            os.environ["OUT"] = saved[3]

    def test_the_digest_names_failures_and_every_benchmark_line(self):
        import contextlib
        import io
        import json
        self.check.RESULTS.clear()
        self.check.RESULTS["tests"] = {"failures": 1, "seconds": 12.3, "results": [
            {"what": "A.One (EIN_CUDA_SYNC=1)", "ok": True}, {"what": "A.Two (EIN_CUDA_SYNC=1)", "ok": False}]}
        with open(os.path.join(self.check.OUT, "bench.jsonl"), "w") as out:  # lines as the benchmarks print them
            for line in ({"impl": "ein_bf16", "n": 4096, "heads": 16, "head_dim": 128, "batch": 4, "causal": True,
                          "key_tile": 64, "ms": 1.5, "tflops": 183.2},
                         {"impl": "torch_sdpa_flash_bf16", "n": 4096, "heads": 16, "head_dim": 128, "batch": 4,
                          "causal": False, "ms": 0.9, "tflops": 611.0},
                         {"impl": "torch_compile_bf16", "batch": 64, "median_ms": 41.2, "images_per_s": 1553.4,
                          "device": "NVIDIA H200"}):
                out.write(json.dumps(dict(step="bench", **line)) + "\n")
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            self.check.print_digest()
        text = printed.getvalue()
        self.assertIn("tests: 1 ok, 1 failed, 12 s: A.Two (EIN_CUDA_SYNC=1)", text)
        self.assertIn("183.2 TFLOP/s  key tile 64", text)
        self.assertIn("611.0 TFLOP/s", text)
        self.assertIn("1553.4 images/s", text)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--fake-gtest"]:
        sys.exit(fake_gtest(sys.argv[2:]))
    unittest.main()
