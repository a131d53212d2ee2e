"""Model.run: array kinds, out= buffers, threads and memory."""
import array
import threading
import time

import numpy as np
import pytest

import ein
from conftest import LINEAR_RELU, DLPackOnly, linear_relu_reference


def inputs(seed=0):
    return np.random.default_rng(seed).standard_normal((3, 4)).astype(np.float32)


def test_buffer_protocol_inputs(linear_relu):
    model, weights = linear_relu
    x = inputs()
    expected = linear_relu_reference(x, weights)
    for value in (memoryview(x), array.array("f", x.ravel().tolist())):
        if isinstance(value, array.array):
            with pytest.raises(ein.InputError, match=r'input "x" expects f32\[3, 4\], got float32\[12\]'):
                model.run({"x": value})
            value = memoryview(value).cast("B").cast("f", (3, 4))
        np.testing.assert_allclose(model.run({"x": value})["y"], expected, rtol=1e-5, atol=1e-6)


def test_dlpack_input(linear_relu):
    model, weights = linear_relu
    x = inputs(1)
    np.testing.assert_allclose(model.run({"x": DLPackOnly(x)})["y"], linear_relu_reference(x, weights),
                               rtol=1e-5, atol=1e-6)


def test_non_contiguous_views_are_copied(linear_relu):
    model, weights = linear_relu
    wide = np.random.default_rng(2).standard_normal((3, 8)).astype(np.float32)
    for view in (wide[:, ::2], np.asfortranarray(wide[:, :4]), wide[::-1, :4]):
        assert not view.flags.c_contiguous
        np.testing.assert_allclose(model.run({"x": view})["y"], linear_relu_reference(view, weights),
                                   rtol=1e-5, atol=1e-6)


def test_misaligned_input(linear_relu):
    model, weights = linear_relu
    storage = np.zeros(3 * 4 * 4 + 1, np.uint8)
    x = storage[1:].view(np.float32).reshape(3, 4)  # 1 byte past an aligned start
    x[...] = inputs(3)
    np.testing.assert_allclose(model.run({"x": x})["y"], linear_relu_reference(x, weights), rtol=1e-5, atol=1e-6)


def test_out_buffers_are_written_in_place(linear_relu):
    model, weights = linear_relu
    x = inputs(4)
    out = np.full((3, 5), np.nan, np.float32)
    result = model.run({"x": x}, out={"y": out})
    assert result["y"] is out
    np.testing.assert_allclose(out, linear_relu_reference(x, weights), rtol=1e-5, atol=1e-6)


def test_outputs_are_fresh_arrays_each_run(linear_relu):
    model, _ = linear_relu
    first = model.run({"x": inputs(5)})["y"]
    second = model.run({"x": inputs(6)})["y"]
    assert not np.shares_memory(first, second) and not np.array_equal(first, second)
    assert first.flags.c_contiguous and first.flags.writeable and first.ctypes.data % 64 == 0


def test_many_threads_on_one_model_match_serial_runs():
    model = ein.compile(LINEAR_RELU, random_weights=7, threads=1)
    batches = [inputs(seed) for seed in range(8)]
    serial = [model.run({"x": x})["y"] for x in batches]
    mismatches = []

    def worker(index):
        for _ in range(100):
            y = model.run({"x": batches[index]})["y"]
            if not np.array_equal(y, serial[index]):
                mismatches.append(index)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert mismatches == []


def test_threads_per_call_give_the_same_results():
    model = ein.compile(LINEAR_RELU, random_weights=2, dims={"n": 256}, threads=1)
    x = np.random.default_rng(9).standard_normal((256, 4)).astype(np.float32)
    one = model.run({"x": x})["y"]
    np.testing.assert_array_equal(model.run({"x": x}, threads=2)["y"], one)
    assert model.threads == 1
    with pytest.raises(ValueError, match="threads"):
        model.run({"x": x}, threads=0)


def resident_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def test_no_leak_over_10000_runs():
    # Outputs of 20 KB and input copies of 16 KB per run: a leak of either
    # would grow by hundreds of megabytes.
    model = ein.compile(LINEAR_RELU, random_weights=1, dims={"n": 1024})
    x = np.ones((1024, 4), np.float32)
    out = np.empty((1024, 5), np.float32)
    for _ in range(1000):  # warm: the runner's pool, NumPy's allocator
        model.run({"x": x})
    before = resident_bytes()
    for i in range(10000):
        model.run({"x": x}) if i % 2 else model.run({"x": x[:, ::-1]}, out={"y": out})
    grown = resident_bytes() - before
    assert grown < 4 << 20, f"resident memory grew by {grown} bytes over 10000 runs"


# Heavy enough that one run spans many of Python's 5 ms thread switches.
BIG_MATMUL = """\
dim n = 2048, k = 1024, m = 2048
input  x: f32[n, k]
param  w: f32[k, m]
output y = x @ w
"""


def longest_pause_of_this_thread_while(worker):
    """Runs `worker` in a thread and returns the longest time this thread
    went without running Python code meanwhile."""
    thread = threading.Thread(target=worker)
    longest, last = 0.0, time.perf_counter()
    thread.start()
    while thread.is_alive():
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    thread.join()
    return longest


def test_the_gil_is_released_while_kernels_run():
    model = ein.compile(BIG_MATMUL, random_weights=1, threads=1)  # a core left for this thread
    x = np.ones((2048, 1024), np.float32)
    start = time.perf_counter()
    model.run({"x": x})
    one_run = time.perf_counter() - start
    assert one_run > 0.03, "the model is too small to tell"
    # Held for the whole run, the GIL would stop this thread for one_run
    # each time; a loaded machine pauses it now and then, so the best of
    # three attempts counts.
    pauses = [longest_pause_of_this_thread_while(lambda: model.run({"x": x})) for _ in range(3)]
    assert min(pauses) < one_run / 2, f"a run takes {one_run:.3f} s, this thread paused {pauses}"
    session = model.session()
    pauses = [longest_pause_of_this_thread_while(lambda: session.run({"x": x})) for _ in range(3)]
    assert min(pauses) < one_run / 2, f"a run takes {one_run:.3f} s, this thread paused {pauses} (Session.run)"


def test_half_bool_and_integer_tensors():
    model = ein.compile("""\
dim n = 4
input  a: f16[n]
input  keep: bool[n]
input  ids: i64[n]
output y = a * keep + ids
output flags = ids > 1
""", random_weights=1)
    assert [(i.dtype, i.numpy_dtype) for i in model.inputs] == [
        ("f16", np.float16), ("bool", np.bool_), ("i64", np.int64)]
    a, keep, ids = np.array([1, 2, 3, 4], np.float16), np.array([1, 0, 1, 0], bool), np.arange(4)
    outputs = model.run({"a": a, "keep": keep, "ids": ids})
    assert outputs["y"].dtype == np.float16 and outputs["flags"].dtype == np.bool_
    np.testing.assert_array_equal(outputs["y"], a * keep + ids)
    np.testing.assert_array_equal(outputs["flags"], ids > 1)


IDS_MODEL = """\
dim n = 4, vocab = 100, d = 2
input  ids: i32[n]
input  x: f32[n]
param  table: f32[vocab, d]
output rows = embedding(ids, table)
output ids_out = ids + 0
output x_out = x + 0
"""


@pytest.mark.parametrize("run", ["model", "session"])
def test_inputs_convert_by_the_runtimes_one_policy(run):
    # The same policy as ein-run and the C++/C APIs (InputConversionTest):
    # integer ids of any width where they fit, floats of any width rounded.
    model = ein.compile(IDS_MODEL, random_weights=1)
    call = model.run if run == "model" else model.session().run
    x = np.array([0.1, -2.0, np.inf, 1e-3])
    for ids in (np.array([7, 0, 99, 42]), np.array([7, 0, 99, 42], np.uint8), np.array([7, 0, 99, 42], np.int16)):
        outputs = call({"ids": ids, "x": x})
        np.testing.assert_array_equal(outputs["ids_out"], ids.astype(np.int32))
        np.testing.assert_array_equal(outputs["x_out"], x.astype(np.float32))
    too_large = np.array([1, 2, 1 << 40, 3])
    with pytest.raises(ein.InputError, match=r'^input "ids" element \[2\] is 1099511627776, outside \[0, 100\): '
                                             r'the ids index a table of 100 rows$'):
        call({"ids": too_large, "x": x})
    with pytest.raises(ein.InputError, match=r'input "x" element \[1\] is 1e\+300, beyond f32\'s range'):
        call({"ids": np.arange(4), "x": np.array([0.0, 1e300, 0.0, 0.0])})
    with pytest.raises(ein.InputError, match=r'expects i32\[4\], got float64\[4\]: floats are not converted to '
                                             r'integers \(cast them first\)'):
        call({"ids": np.arange(4.0), "x": x})


def test_bf16_as_uint16_bit_patterns():
    model = ein.compile("dim n = 2\ninput x: bf16[n]\noutput y = x * 2\n", random_weights=1)
    assert model.outputs[0].numpy_dtype == np.uint16
    one_and_a_half, three = 0x3FC0, 0x4040  # bf16 is the upper half of a float32
    y = model.run({"x": np.array([one_and_a_half, 0], np.uint16)})["y"]
    np.testing.assert_array_equal(y, np.array([three, 0], np.uint16))
