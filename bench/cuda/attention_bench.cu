// Attention throughput of ein's CUDA kernels: the tensor-core flash kernel
// (bf16 or fp16) and the fp32 flash kernel, timed with CUDA events.
// TFLOP/s counts 4 * batch * heads * n^2 * d (QK^T and PV), halved for
// causal attention, the convention of the flash-attention papers and of
// attention_torch.py. Causal runs use the kernels' causal mode, as
// scaled_dot_product_attention(causal=true) compiles to (causal positions n:
// key j seen by query i when j <= i), in which a block of queries skips the
// key tiles none of its rows sees, as SDPA's is_causal does. Tensors are f32
// in memory (as the runtime keeps them); the kernel converts tiles to
// bf16/fp16 in shared memory.
//
//   attention_bench [--precision bf16|fp16|fp32] [--iterations N] [--causal 0|1|both] [--n N]
// prints one JSON line per shape: n, heads, head_dim, batch, causal, key_tile, ms, tflops.
#include <cuda_runtime_api.h>

#include <cmath>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cuda/kernels.hpp"

namespace ec = ein::cuda;

#define CHECK(call)                                                                               \
  do {                                                                                            \
    cudaError_t error_ = (call);                                                                  \
    if (error_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(error_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

int main(int argc, char **argv) {
  std::string precision = "bf16", causalModes = "both";
  int iterations = 20;
  int64_t onlyN = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--precision")) precision = argv[i + 1];
    else if (!std::strcmp(argv[i], "--iterations")) iterations = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--causal")) causalModes = argv[i + 1];
    else if (!std::strcmp(argv[i], "--n")) onlyN = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "attention_bench: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  const std::string impl = precision == "fp32" ? "ein_fp32" : "ein_flash2_" + precision;
  const int64_t heads = 16, tokens = 16384;  // batch * n = 16k tokens, as the FlashAttention-2 benchmarks
  for (int causal : {0, 1}) {
    if ((causalModes == "0" && causal) || (causalModes == "1" && !causal)) continue;
    for (int64_t d : {64, 128})
      for (int64_t n : {1024, 4096, 16384}) {
        if (onlyN && n != onlyN) continue;
        const int64_t batch = tokens / n > 0 ? tokens / n : 1;
        const size_t elements = size_t(batch * heads * n * d);
        float *q, *k, *v, *out;
        CHECK(cudaMalloc(&q, elements * 4));
        CHECK(cudaMalloc(&k, elements * 4));
        CHECK(cudaMalloc(&v, elements * 4));
        CHECK(cudaMalloc(&out, elements * 4));
        std::vector<float> host(elements);
        for (size_t i = 0; i < elements; ++i) host[i] = float((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
        CHECK(cudaMemcpy(q, host.data(), elements * 4, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(k, host.data(), elements * 4, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy(v, host.data(), elements * 4, cudaMemcpyHostToDevice));

        // Layout [batch, n, heads, d] (as a fused qkv projection leaves it): batch axes (batch, heads).
        ec::AttentionLaunch launch;
        launch.batch.rank = 2;
        launch.batch.size[0] = batch;
        launch.batch.size[1] = heads;
        launch.queries = launch.keys = n;
        launch.headDim = launch.valueDim = d;
        launch.scale = 1.0f / std::sqrt(float(d));
        auto view = [&](float *data) {
          ec::DeviceView out;
          out.data = data;
          out.stride[0] = n * heads * d;
          out.stride[1] = d;
          out.stride[2] = heads * d;
          out.stride[3] = 1;
          return out;
        };
        launch.q = view(q);
        launch.k = view(k);
        launch.v = view(v);
        launch.out = view(out);
        launch.causalPositions = causal ? n : 0;
        const ec::Precision arithmetic = precision == "fp16" ? ec::Precision::Fp16 : ec::Precision::Bf16;
        void *scratch = nullptr;  // flash2's 16-bit keys and values, converted in each run (timed with it)
        CHECK(cudaMalloc(&scratch, ec::attentionFlash2ScratchBytes(launch)));
        auto once = [&]() {
          if (precision == "fp32") return ec::launchAttentionF32Flash(launch, nullptr);
          return ec::launchAttentionFlash2(launch, arithmetic, scratch, nullptr);
        };
        CHECK(once());
        CHECK(cudaDeviceSynchronize());
        cudaEvent_t start, stop;
        CHECK(cudaEventCreate(&start));
        CHECK(cudaEventCreate(&stop));
        CHECK(cudaEventRecord(start));
        for (int i = 0; i < iterations; ++i) CHECK(once());
        CHECK(cudaEventRecord(stop));
        CHECK(cudaEventSynchronize(stop));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        ms /= float(iterations);
        const double flops = 4.0 * double(batch) * heads * double(n) * n * d / (causal ? 2 : 1);
        const int tile = precision == "fp32" ? 0 : ec::kFlash2Keys;
        std::printf("{\"impl\": \"%s\", \"n\": %lld, \"heads\": %lld, \"head_dim\": %lld, \"batch\": %lld, "
                    "\"causal\": %s, \"key_tile\": %d, \"ms\": %.4f, \"tflops\": %.2f}\n",
                    impl.c_str(), (long long)n, (long long)heads, (long long)d, (long long)batch,
                    causal ? "true" : "false", tile, ms, flops / (ms * 1e-3) / 1e12);
        std::fflush(stdout);
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
        cudaFree(q);
        cudaFree(k);
        cudaFree(v);
        cudaFree(out);
        cudaFree(scratch);
      }
  }
  return 0;
}
