// Google Benchmark microbenchmarks of the CPU kernels the runtime selects
// (ein-run's kernels), one rig per shape and thread count. Counters:
// GFLOPS for the gemms and attention, bytes_per_second (read + written) for
// the memory-bound row kernels.
//   build-kernels/bin/ein_kernel_bench --benchmark_filter=Gemm
#include <benchmark/benchmark.h>

#include <cmath>

#include "bench_support.hpp"
#include "ein/generate.hpp"

namespace ein::bench {
namespace {

void setThreadsLabel(benchmark::State &state, int threads) { state.SetLabel(std::to_string(threads) + " threads"); }

// c[m, n] = a[m, k] . b[k, n], b pre-packed: args m, k, n, threads. Cold:
// the packed weights are flushed from the caches before each run, as in a
// whole model (whose weights are read once per run).
// bf16: bf16 weights (einc --precision bf16), so the bf16 gemm
// (bf16_gemm_amx on AMX, bf16_gemm_avx512bf16 where the CPU has AVX512_BF16),
// else the f32 gemm on weights widened while packing.
// int8: int8 weights (einc --precision int8): the s8 gemm (gemm_s8_dynamic,
// s8_gemm_amx on AMX, s8_gemm_avx512vnni where the CPU has AVX512_VNNI), rows
// of a quantized per call. EIN_CPU_ISA picks a lower table (bench/gemm_isa.py).
void BM_GemmWeights(benchmark::State &state, bool coldWeights, ein::DType weights = ein::DType::F32,
                    bool groupScales = false) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  KernelRig rig;
  detail::Gemm gemm = weightGemm(rig, m, k, n, weights, groupScales);
  rig.finish(gemm, threads);
  for (auto _ : state) {
    if (coldWeights) {
      state.PauseTiming();
      rig.evictPackedWeights();
      state.ResumeTiming();
    }
    rig.run();
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * m * n * k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  setThreadsLabel(state, threads);
}
// ViT-S/16's and ViT-B/16's gemm shapes (batch 1 and 8) and BERT-base's fc1
// at 8 x 128 tokens, 1 and 2 threads (bench/gemm_isa.py compares the ISA
// tables on some of them).
void vitGemmShapes(benchmark::internal::Benchmark *bench) {
  bench->ArgsProduct({{197}, {384}, {1152}, {1, 2}})
      ->ArgsProduct({{197}, {384}, {1536}, {1, 2}})
      ->ArgsProduct({{197}, {1536}, {384}, {1, 2}})
      ->ArgsProduct({{1576}, {384}, {1152}, {1, 2}})
      ->ArgsProduct({{1576}, {384}, {1536}, {1, 2}})
      ->ArgsProduct({{197}, {768}, {3072}, {1, 2}})
      ->ArgsProduct({{1024}, {768}, {3072}, {1, 2}})
      ->UseRealTime();
}
BENCHMARK_CAPTURE(BM_GemmWeights, cached, false)->Apply(vitGemmShapes);
// T5-base's encoder at 512 tokens (fused q/k/v 2304, fc1 3072, fc2 3072 ->
// 768), 2 threads: the f32 encoder bench/encoder_decoder.py times.
BENCHMARK_CAPTURE(BM_GemmWeights, t5_cold, true)
    ->ArgsProduct({{512}, {768}, {2304, 3072}, {1, 2}})
    ->ArgsProduct({{512}, {3072}, {768}, {1, 2}})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_GemmWeights, cold, true)->Apply(vitGemmShapes);
BENCHMARK_CAPTURE(BM_GemmWeights, bf16_cached, false, ein::DType::BF16)->Apply(vitGemmShapes);
BENCHMARK_CAPTURE(BM_GemmWeights, bf16_cold, true, ein::DType::BF16)->Apply(vitGemmShapes);
BENCHMARK_CAPTURE(BM_GemmWeights, int8_cached, false, ein::DType::I8)->Apply(vitGemmShapes);
BENCHMARK_CAPTURE(BM_GemmWeights, int8_cold, true, ein::DType::I8)->Apply(vitGemmShapes);
BENCHMARK_CAPTURE(BM_GemmWeights, int8_groups_cached, false, ein::DType::I8, true)->Apply(vitGemmShapes);
BENCHMARK_CAPTURE(BM_GemmWeights, int4_cached, false, ein::DType::I4)->Apply(vitGemmShapes);

// Batch-1 decode's gemms, as in a 125M Llama (hidden 768: fused q/k/v 1280,
// fused gate/up 4096, lm_head 32000; down 2048 -> 768), at 1 to 8 rows (the
// gemv up to kGemvMaxRows, then the tiles), cold: weight_GBps is the packed
// weights streamed per second, to set against BM_StreamRead's plain read of
// as many bytes in the same process (memory-bound: the goal is its speed).
// Then the 1.1B Llama's at one row, 2 threads (hidden 2048: fused q/k/v
// 2560, fused gate/up 11264, lm_head 32000; down 5632 -> 2048): per-panel
// streams 2.75x longer along k than the 125M's.
void decodeGemmShapes(benchmark::internal::Benchmark *bench) {
  bench->ArgsProduct({{1, 2, 4, 5, 8}, {768}, {1280, 4096, 32000}, {1, 2}})
      ->ArgsProduct({{1, 2, 4, 5, 8}, {2048}, {768}, {1, 2}})
      ->ArgsProduct({{1}, {2048}, {2560, 11264, 32000}, {2}})
      ->ArgsProduct({{1}, {5632}, {2048}, {2}})
      ->UseRealTime();
}
void BM_DecodeGemm(benchmark::State &state, ein::DType weights, bool groupScales = false) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  KernelRig rig;
  detail::Gemm gemm = weightGemm(rig, m, k, n, weights, groupScales);
  rig.finish(gemm, threads);
  for (auto _ : state) {
    state.PauseTiming();
    rig.evictPackedWeights();
    state.ResumeTiming();
    rig.run();
  }
  state.counters["weight_GBps"] =
      benchmark::Counter(static_cast<double>(rig.packedBytes()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  setThreadsLabel(state, threads);
}
BENCHMARK_CAPTURE(BM_DecodeGemm, f32, ein::DType::F32)->Apply(decodeGemmShapes);
BENCHMARK_CAPTURE(BM_DecodeGemm, bf16, ein::DType::BF16)->Apply(decodeGemmShapes);
BENCHMARK_CAPTURE(BM_DecodeGemm, int8, ein::DType::I8)->Apply(decodeGemmShapes);
BENCHMARK_CAPTURE(BM_DecodeGemm, int8_groups, ein::DType::I8, true)->Apply(decodeGemmShapes);
BENCHMARK_CAPTURE(BM_DecodeGemm, int4, ein::DType::I4)->Apply(decodeGemmShapes);

// Many sequences decoding at once (a server's step: one row per sequence),
// on the 1.1B Llama's gemms (hidden 2048: fused q/k/v 2560, fused gate/up
// 11264; down 5632 -> 2048), cold: between the gemv's few rows and
// prefill's many, both the weights' bytes and the arithmetic count, so both
// counters are reported.
void manySequencesGemmShapes(benchmark::internal::Benchmark *bench) {
  bench->ArgsProduct({{5, 8, 12, 16, 24, 32, 64}, {2048}, {2560, 11264}, {2}})
      ->ArgsProduct({{5, 8, 12, 16, 24, 32, 64}, {5632}, {2048}, {2}})
      ->UseRealTime();
}
void BM_ManySequencesGemm(benchmark::State &state, ein::DType weights, bool groupScales = false) {
  BM_DecodeGemm(state, weights, groupScales);
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * m * n * k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
// The same with the weights left in the caches: the arithmetic alone.
BENCHMARK_CAPTURE(BM_GemmWeights, many_sequences_bf16_cached, false, ein::DType::BF16)->Apply(manySequencesGemmShapes);
BENCHMARK_CAPTURE(BM_GemmWeights, many_sequences_f32_cached, false, ein::DType::F32)->Apply(manySequencesGemmShapes);
BENCHMARK_CAPTURE(BM_GemmWeights, many_sequences_int8_cached, false, ein::DType::I8)->Apply(manySequencesGemmShapes);
BENCHMARK_CAPTURE(BM_ManySequencesGemm, f32, ein::DType::F32)->Apply(manySequencesGemmShapes);
BENCHMARK_CAPTURE(BM_ManySequencesGemm, bf16, ein::DType::BF16)->Apply(manySequencesGemmShapes);
BENCHMARK_CAPTURE(BM_ManySequencesGemm, int8, ein::DType::I8)->Apply(manySequencesGemmShapes);
BENCHMARK_CAPTURE(BM_ManySequencesGemm, int8_groups, ein::DType::I8, true)->Apply(manySequencesGemmShapes);
BENCHMARK_CAPTURE(BM_ManySequencesGemm, int4, ein::DType::I4)->Apply(manySequencesGemmShapes);

// The plain streaming read the decode gemms are held to: the sum of a cold
// buffer of MiB (arg 0) by the ISA table's vector reduction, split into one
// contiguous run per thread (arg 1), as the gemv splits its panels. The
// buffer is allocated as the packed weights are (AlignedBuffer: huge pages
// where the kernel offers them; a 2-thread read of 4 KiB pages measured 0
// to 17% slower on a Zen 4 VM, depending on the minute).
void BM_StreamRead(benchmark::State &state) {
  const int64_t floats = state.range(0) * (1 << 20) / 4;
  const int threads = static_cast<int>(state.range(1));
  StatusOr<detail::AlignedBuffer> allocated = detail::AlignedBuffer::allocate(static_cast<size_t>(floats) * 4, "read",
                                                                                  detail::Pages::Huge);
  if (!allocated.ok()) return state.SkipWithError(allocated.status().message().c_str());
  auto *buffer = reinterpret_cast<float *>(allocated->data());
  std::fill(buffer, buffer + floats, 1.0f);
  std::unique_ptr<detail::ThreadPool> pool = threads > 1 ? std::make_unique<detail::ThreadPool>(threads) : nullptr;
  const detail::cpu::IsaKernels &isa = detail::cpu::bestKernels();
  std::vector<float> sums(static_cast<size_t>(threads));
  auto read = [&](int64_t run, int) {
    const int64_t begin = floats * run / threads, end = floats * (run + 1) / threads;
    sums[static_cast<size_t>(run)] = isa.reduceRow(buffer + begin, end - begin, detail::ReduceKind::Sum);
  };
  for (auto _ : state) {
    state.PauseTiming();
    for (int64_t at = 0; at < floats; at += 16) flushLine(buffer + at);
    state.ResumeTiming();
    if (pool)
      pool->run(threads, read);
    else
      read(0, 0);
    benchmark::DoNotOptimize(sums.data());
  }
  state.counters["weight_GBps"] =
      benchmark::Counter(static_cast<double>(floats) * 4e-9, benchmark::Counter::kIsIterationInvariantRate);
  setThreadsLabel(state, threads);
}
// The packed sizes of the decode gemms above: 3.75, 12, 94 and 6 MiB (f32);
// 1 GiB, beyond any L3, is the DRAM read bandwidth bench/llm_decode.py reports.
BENCHMARK(BM_StreamRead)->ArgsProduct({{4, 12, 96, 1024}, {1, 2}})->UseRealTime();

// Attention scores as an unfused batched gemm: s[h, i, j] = q[h, i, :] . k[h, j, :]
// with k read transposed (packed per call): args heads, tokens, threads.
void BM_GemmBatchedScores(benchmark::State &state) {
  const int64_t h = state.range(0), n = state.range(1), d = 64;
  const int threads = static_cast<int>(state.range(2));
  KernelRig rig;
  detail::Gemm gemm;
  gemm.batch = {h};
  gemm.m = n;
  gemm.n = n;
  gemm.k = d;
  gemm.a = denseView(rig.tensor(h * n * d), {h, n, d});
  gemm.b = detail::View{rig.tensor(h * n * d), 0, {n * d, 1, d}};
  gemm.c = denseView(rig.tensor(h * n * n), {h, n, n});
  rig.finish(gemm, threads);
  for (auto _ : state) rig.run();
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * h * n * n * d * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  setThreadsLabel(state, threads);
}
BENCHMARK(BM_GemmBatchedScores)->ArgsProduct({{6}, {197}, {1, 2}})->UseRealTime();

// Flash attention, q, k, v, out [b=1, h, n, d]: args heads, tokens, d, mask (0
// none, 1 additive [n, n] f32, 2 boolean keep [n, n], 3 a padding mask as
// BERT's: one additive row of n, -inf on the last half of the keys,
// broadcast over queries, 4 the same with finfo.min (-3.4e38, PyTorch's usual
// fill); all broadcast over heads; 5 additive [h, n, n], a mask per head as
// T5's relative position bias), threads. 3 and 4 against 0 show whether
// the masked keys' underflowing exponentials cost anything (subnormals on
// Intel cores): reading the row is next to nothing.
// bf16: the step of a bf16 artifact (einc --precision bf16): q . k and p . v
// on the bf16 tile (AMX's or AVX512_BF16's; f32 on tables without one).
void BM_FlashAttention(benchmark::State &state, bool bf16) {
  const int64_t h = state.range(0), n = state.range(1), d = state.range(2);
  const int64_t mask = state.range(3);
  const int threads = static_cast<int>(state.range(4));
  KernelRig rig;
  detail::Attention op;
  op.batch = {1, h};
  op.queries = op.keys = n;
  op.headDim = op.valueDim = d;
  op.scale = 1.0f / std::sqrt(float(d));
  op.bf16 = bf16;
  op.q = denseView(rig.tensor(h * n * d), {1, h, n, d});
  op.k = denseView(rig.tensor(h * n * d), {1, h, n, d});
  op.v = denseView(rig.tensor(h * n * d), {1, h, n, d});
  op.out = denseView(rig.tensor(h * n * d), {1, h, n, d});
  if (mask != 0) {
    op.maskKind = mask == 1 ? detail::MaskKind::Add : detail::MaskKind::Keep;
    op.mask = detail::View{rig.tensor(n * n, mask == 1 ? ein::DType::F32 : ein::DType::Bool), 0, {0, 0, n, 1}};
  }
  if (mask == 5) {
    op.maskKind = detail::MaskKind::Add;
    op.mask = detail::View{rig.tensor(h * n * n), 0, {0, n * n, n, 1}};
  }
  if (mask == 3 || mask == 4) {  // padding: the last half of the keys masked with -inf or finfo.min (additive)
    op.maskKind = detail::MaskKind::Add;
    uint32_t id = rig.tensor(n);
    float *values = rig.values(id);
    const float fill = mask == 3 ? -INFINITY : -3.4028235e38f;
    for (int64_t j = 0; j < n; ++j) values[j] = j < n / 2 ? 0.0f : fill;
    op.mask = detail::View{id, 0, {0, 0, 0, 1}};
  }
  rig.finish(op, threads);
  for (auto _ : state) rig.run();
  state.counters["GFLOPS"] =
      benchmark::Counter(4.0 * h * n * n * d * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["scratch_MiB"] = static_cast<double>(rig.scratchBytes()) / (1 << 20);
  setThreadsLabel(state, threads);
}
void flashAttentionShapes(benchmark::internal::Benchmark *bench) {
  bench->ArgsProduct({{6}, {197}, {64}, {0, 1, 2}, {1, 2}})        // ViT-S/16
      ->ArgsProduct({{96}, {128}, {32, 64}, {0, 3}, {1, 2}})        // MiniLM, BERT-base at 8 x 128 tokens
      ->ArgsProduct({{8}, {1024}, {64}, {0, 1, 3, 4}, {1, 2}})
      ->ArgsProduct({{12}, {512}, {64}, {0, 1, 5}, {2}})  // T5-base's encoder
      ->Args({8, 8192, 64, 0, 2})
      ->Args({8, 8192, 64, 1, 2})
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}
BENCHMARK_CAPTURE(BM_FlashAttention, f32, false)->Apply(flashAttentionShapes);
BENCHMARK_CAPTURE(BM_FlashAttention, bf16, true)->Apply(flashAttentionShapes);

// A decode step's attention in a Llama of bench/llm_decode.py: 4 key heads
// of 64, 3 query heads each (the 125M shape) or 8 (the 1.1B's), one token,
// against a cache of `context` rows out of 2304, f32 or bf16 (bf16 and int8
// artifacts), flushed from the caches before each run as the model's other
// layers leave it. Args: context, bf16 cache, threads, query heads a key head.
void BM_DecodeAttention(benchmark::State &state) {
  const int64_t kvHeads = 4, groups = state.range(3), d = 64, rows = 2304, context = state.range(0);
  const ein::DType cache = state.range(1) ? ein::DType::BF16 : ein::DType::F32;
  const int threads = static_cast<int>(state.range(2));
  KernelRig rig;
  detail::Attention op;
  op.batch = {kvHeads};
  op.queries = groups;
  op.keys = context;
  op.headDim = op.valueDim = d;
  op.scale = 0.125f;
  op.bf16 = op.bf16KeyValues = cache == ein::DType::BF16;
  op.q = denseView(rig.tensor(kvHeads * groups * d), {kvHeads, groups, d});
  const uint32_t k = rig.tensor(kvHeads * rows * d, cache), v = rig.tensor(kvHeads * rows * d, cache);
  op.k = denseView(k, {kvHeads, rows, d});
  op.v = denseView(v, {kvHeads, rows, d});
  op.out = denseView(rig.tensor(kvHeads * groups * d), {kvHeads, groups, d});
  rig.finish(op, threads);
  for (auto _ : state) {
    state.PauseTiming();
    rig.evictTensor(k);
    rig.evictTensor(v);
    state.ResumeTiming();
    rig.run();
  }
  const double bytes = 2.0 * kvHeads * context * d * (cache == ein::DType::BF16 ? 2 : 4);
  state.counters["cache_GBps"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOPS"] = benchmark::Counter(4.0 * kvHeads * groups * context * d * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  setThreadsLabel(state, threads);
}
// The 1.1B's many sequences at once run each sequence's attention on one
// thread (a few hundred keys); a single sequence splits its keys over two.
BENCHMARK(BM_DecodeAttention)
    ->ArgsProduct({{128, 2048}, {0, 1}, {1, 2}, {3}})
    ->ArgsProduct({{256}, {1}, {1}, {8}})
    ->ArgsProduct({{1024, 2048}, {0, 1}, {2}, {8}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// Talking heads with both mixes, [1, 6, 197, 64]: arg threads.
void BM_TalkingHeads(benchmark::State &state) {
  const int64_t h = 6, n = 197, d = 64;
  const int threads = static_cast<int>(state.range(0));
  KernelRig rig;
  detail::TalkingHeadsAttention op;
  op.batch = {1};
  op.heads = h;
  op.queries = op.keys = n;
  op.headDim = op.valueDim = d;
  op.scale = 0.125f;
  op.q = denseView(rig.tensor(h * n * d), {1, h, n, d});
  op.k = denseView(rig.tensor(h * n * d), {1, h, n, d});
  op.v = denseView(rig.tensor(h * n * d), {1, h, n, d});
  op.out = denseView(rig.tensor(h * n * d), {1, h, n, d});
  op.preMix = denseView(rig.tensor(h * h), {h, h});
  op.postMix = denseView(rig.tensor(h * h), {h, h});
  rig.finish(op, threads);
  for (auto _ : state) rig.run();
  state.counters["GFLOPS"] =
      benchmark::Counter(4.0 * h * n * n * d * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  setThreadsLabel(state, threads);
}
BENCHMARK(BM_TalkingHeads)->Arg(1)->Arg(2)->UseRealTime();

// Row kernels over [rows, width] f32, large enough (64 MiB in) to stream
// from DRAM: args rows, width, threads.
void rowBench(benchmark::State &state, detail::Kernel kernel, KernelRig &rig, double bytesPerIteration) {
  const int threads = static_cast<int>(state.range(2));
  rig.finish(std::move(kernel), threads);
  for (auto _ : state) rig.run();
  state.SetBytesProcessed(static_cast<int64_t>(bytesPerIteration * state.iterations()));
  setThreadsLabel(state, threads);
}

// With residualSum, y = layernorm(x + residual) and the sum is written too;
// variant Rms is RMSNorm (no centring, no beta).
void BM_LayerNorm(benchmark::State &state, bool residualSum,
                  detail::LayerNormVariant variant = detail::LayerNormVariant::Variance) {
  const int64_t rows = state.range(0), width = state.range(1);
  KernelRig rig;
  detail::LayerNorm op;
  op.shape = {rows, width};
  op.x = denseView(rig.tensor(rows * width), {rows, width});
  if (residualSum) {
    op.residual = denseView(rig.tensor(rows * width), {rows, width});
    op.sum = denseView(rig.tensor(rows * width), {rows, width});
  }
  op.y = denseView(rig.tensor(rows * width), {rows, width});
  op.gamma = denseView(rig.tensor(width), {width});
  if (variant != detail::LayerNormVariant::Rms) op.beta = denseView(rig.tensor(width), {width});
  op.variant = variant;
  op.epsilon = 1e-6f;
  rowBench(state, op, rig, (residualSum ? 16.0 : 8.0) * rows * width);
}

void BM_Softmax(benchmark::State &state) {
  const int64_t rows = state.range(0), width = state.range(1);
  KernelRig rig;
  detail::Softmax op;
  op.shape = {rows, width};
  op.x = denseView(rig.tensor(rows * width), {rows, width});
  op.y = denseView(rig.tensor(rows * width), {rows, width});
  rowBench(state, op, rig, 8.0 * rows * width);
}

// Softmax of [rows, width] with the last half of each row masked (padding):
// arg mask 0 none, 1 -inf, 2 finfo.min (-3.4e38, PyTorch's usual fill), for
// the underflow check: masked should cost what unmasked does. args rows,
// width, mask, threads.
void BM_SoftmaxMasked(benchmark::State &state) {
  const int64_t rows = state.range(0), width = state.range(1), mask = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  KernelRig rig;
  detail::Softmax op;
  op.shape = {rows, width};
  const uint32_t x = rig.tensor(rows * width);
  float *values = rig.values(x);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = width / 2; j < width && mask != 0; ++j)
      values[i * width + j] = mask == 1 ? -INFINITY : -3.4028235e38f;
  op.x = denseView(x, {rows, width});
  op.y = denseView(rig.tensor(rows * width), {rows, width});
  rig.finish(op, threads);
  for (auto _ : state) rig.run();
  state.SetBytesProcessed(static_cast<int64_t>(8.0 * rows * width * state.iterations()));
  setThreadsLabel(state, threads);
}
BENCHMARK(BM_SoftmaxMasked)->ArgsProduct({{256}, {1024}, {0, 1, 2}, {1, 2}})->UseRealTime();

void BM_ReduceMean(benchmark::State &state) {
  const int64_t rows = state.range(0), width = state.range(1);
  KernelRig rig;
  detail::Reduce op;
  op.shape = {rows, width};
  op.reducedRank = 1;
  op.kind = detail::ReduceKind::Mean;
  op.x = denseView(rig.tensor(rows * width), {rows, width});
  op.y = denseView(rig.tensor(rows), {rows});
  rowBench(state, op, rig, 4.0 * rows * width);
}

// y = gelu(x + b), b broadcast over rows.
void BM_ElementwiseBiasGelu(benchmark::State &state) {
  const int64_t rows = state.range(0), width = state.range(1);
  KernelRig rig;
  detail::Elementwise op;
  op.shape = {rows, width};
  op.inputs = {denseView(rig.tensor(rows * width), {rows, width}), detail::View{rig.tensor(width), 0, {0, 1}}};
  op.output = denseView(rig.tensor(rows * width), {rows, width});
  op.program = {{detail::Opcode::Add, 0, 1, 0, 0.0f}, {detail::Opcode::Gelu, 2, 0, 0, 0.0f}};
  rowBench(state, op, rig, 8.0 * rows * width);
}

// Half of a decode step's rotary embedding (a Llama's q, one sequence's
// tokens): out[h, t, :32] = x[t, h, :32] * cos[t] - x[t, h, 32:] * sin[t],
// x a row of the fused q/k/v projection (2560 wide), cos and sin shared by
// the heads: rows of 32 lanes, where the interpreter's per-block work
// shows. args heads, tokens, threads.
void BM_ElementwiseRotaryHalf(benchmark::State &state) {
  const int64_t heads = state.range(0), tokens = state.range(1), half = 32, width = 2560;
  const int threads = static_cast<int>(state.range(2));
  KernelRig rig;
  detail::Elementwise op;
  op.shape = {heads, tokens, half};
  const uint32_t x = rig.tensor(tokens * width), cos = rig.tensor(tokens * half), sin = rig.tensor(tokens * half);
  op.inputs = {detail::View{x, 0, {2 * half, width, 1}}, detail::View{cos, 0, {0, half, 1}},
               detail::View{x, half, {2 * half, width, 1}}, detail::View{sin, 0, {0, half, 1}}};
  op.output = detail::View{rig.tensor(heads * tokens * 2 * half), 0, {tokens * 2 * half, 2 * half, 1}};
  op.program = {{detail::Opcode::Mul, 0, 1, 0, 0.0f},
                {detail::Opcode::Mul, 2, 3, 0, 0.0f},
                {detail::Opcode::Sub, 4, 5, 0, 0.0f}};
  rig.finish(op, threads);
  for (auto _ : state) rig.run();
  setThreadsLabel(state, threads);
}
BENCHMARK(BM_ElementwiseRotaryHalf)->ArgsProduct({{4, 32}, {1, 16}, {1}})->UseRealTime();

#define EIN_ROW_SHAPES ArgsProduct({{16384}, {1024}, {1, 2}})->Args({197, 384, 1})->Args({197, 384, 2})->UseRealTime()
BENCHMARK_CAPTURE(BM_LayerNorm, plain, false)->EIN_ROW_SHAPES;
BENCHMARK_CAPTURE(BM_LayerNorm, residual_sum, true)->EIN_ROW_SHAPES;
BENCHMARK_CAPTURE(BM_LayerNorm, rms_residual_sum, true, detail::LayerNormVariant::Rms)->EIN_ROW_SHAPES;
BENCHMARK(BM_Softmax)->EIN_ROW_SHAPES;
BENCHMARK(BM_ReduceMean)->EIN_ROW_SHAPES;
BENCHMARK(BM_ElementwiseBiasGelu)->EIN_ROW_SHAPES;

// Choosing the next token from one row of logits (a decode step's, per
// sequence): greedy, and sampling at temperature 0.8 with all tokens, the
// top 40 or the top 0.9 of the mass. The logits fall off as a power of the
// token's rank (Zipf's law, as a language model's do), the ranks scattered
// over the ids. Args: vocabulary, top-k, top-p x 100 (-1: greedy).
void BM_ChooseToken(benchmark::State &state) {
  const int64_t vocab = state.range(0);
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) logits[static_cast<size_t>(i)] = -1.5f * std::log1p(static_cast<float>(i * 7919 % vocab));
  ein::GenerationOptions options;
  options.temperature = state.range(2) < 0 ? 0.0f : 0.8f;
  options.topK = state.range(1);
  options.topP = state.range(2) < 0 ? 1.0f : static_cast<float>(state.range(2)) / 100.0f;
  uint64_t sampler = 1;
  for (auto _ : state) benchmark::DoNotOptimize(ein::chooseToken(logits, options, sampler));
}
BENCHMARK(BM_ChooseToken)
    ->Args({32000, 0, -1})
    ->Args({32000, 0, 100})
    ->Args({32000, 40, 100})
    ->Args({32000, 0, 90})
    ->Args({128256, 0, 100})
    ->Unit(benchmark::kMicrosecond);

// The gemvs' arithmetic alone: one row against ~0.5 MB of packed weights
// left in L2, 1 thread. A gemv's cold stream (BM_DecodeGemm) overlaps this
// work with the reads, so the lower this ceiling (int4: two vpdpbusd a byte
// pair where int8 takes one), the earlier its lines must be requested.
BENCHMARK_CAPTURE(BM_GemmWeights, gemv_int4_cached, false, ein::DType::I4)->Args({1, 768, 1280, 1})->UseRealTime();
BENCHMARK_CAPTURE(BM_GemmWeights, gemv_int8_groups_cached, false, ein::DType::I8, true)
    ->Args({1, 768, 640, 1})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_GemmWeights, gemv_int8_cached, false, ein::DType::I8)->Args({1, 768, 640, 1})->UseRealTime();
BENCHMARK_CAPTURE(BM_GemmWeights, gemv_bf16_cached, false, ein::DType::BF16)->Args({1, 768, 320, 1})->UseRealTime();

}  // namespace
}  // namespace ein::bench

BENCHMARK_MAIN();
