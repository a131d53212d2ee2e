// ein's packed-weight gemm against oneDNN's matmul with packed weights
// (weights in the layout oneDNN picks, reordered once, as ein packs at load)
// on ViT and BERT shapes, at 1 and 2 threads, in one run. Prints each median
// and ein's speed relative to oneDNN (oneDNN time / ein time: > 1 means ein
// is faster). ein and oneDNN alternate shape by shape (the machine's speed
// drifts); run with OMP_WAIT_POLICY=passive so oneDNN's idle OpenMP threads
// do not spin into ein's runs.
// bf16: ein's bf16 artifact gemm (bf16 weights, f32 activations rounded to
// bf16 as it packs them) against oneDNN's bf16 matmul (bf16 weights and
// activations, the activations converted before timing: oneDNN's own
// advantage), f32 outputs for both: OpenVINO's bf16 FullyConnected is that
// matmul (AMX where the CPU has it: DNNL_VERBOSE=1 names the kernel).
//   OMP_WAIT_POLICY=passive build/bin/ein_gemm_vs_onednn [rounds] [f32|bf16]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench_support.hpp"

namespace {

struct Shape {
  int64_t m, k, n;
};

// The median of repeated runs: at least 15 and at least 0.3 s, after warm-up.
double medianMs(const std::function<void()> &body) {
  for (int i = 0; i < 5; ++i) body();
  std::vector<double> times;
  const auto start = std::chrono::steady_clock::now();
  while (times.size() < 15 || std::chrono::steady_clock::now() - start < std::chrono::milliseconds(300)) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double einMs(const Shape &s, int threads, bool bf16) {
  ein::bench::KernelRig rig;
  ein::detail::Gemm gemm = ein::bench::weightGemm(rig, s.m, s.k, s.n, bf16 ? ein::DType::BF16 : ein::DType::F32);
  rig.finish(gemm, threads);
  return medianMs([&] { rig.run(); });
}

double onednnMs(const Shape &s, int threads, bool bf16) {
  using namespace dnnl;
  omp_set_num_threads(threads);
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  const auto operands = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  memory::desc aF32({s.m, s.k}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc aDesc({s.m, s.k}, operands, memory::format_tag::ab);
  memory::desc bPlain({s.k, s.n}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc bAny({s.k, s.n}, operands, memory::format_tag::any);
  memory::desc cDesc({s.m, s.n}, memory::data_type::f32, memory::format_tag::ab);
#if DNNL_VERSION_MAJOR >= 3
  matmul::primitive_desc pd(eng, aDesc, bAny, cDesc);
#else
  matmul::primitive_desc pd(matmul::desc(aDesc, bAny, cDesc), eng);
#endif
  std::vector<float> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.k * s.n)), c(static_cast<size_t>(s.m * s.n));
  std::mt19937 generator(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (float &x : a) x = uniform(generator);
  for (float &x : b) x = uniform(generator);
  memory aPlain(aF32, eng, a.data()), bMem(bPlain, eng, b.data()), cMem(cDesc, eng, c.data());
  memory aMem(aDesc, eng);
  reorder(aPlain, aMem).execute(strm, aPlain, aMem);  // bf16: converted before timing
  memory bPacked(pd.weights_desc(), eng);
  reorder(bMem, bPacked).execute(strm, bMem, bPacked);  // packed once, as at load
  strm.wait();
  matmul mm(pd);
  return medianMs([&] {
    mm.execute(strm, {{DNNL_ARG_SRC, aMem}, {DNNL_ARG_WEIGHTS, bPacked}, {DNNL_ARG_DST, cMem}});
    strm.wait();
  });
}

}  // namespace

int main(int argc, char **argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 2;
  const bool bf16 = argc > 2 && std::string(argv[2]) == "bf16";
  const std::vector<Shape> shapes = {{197, 384, 1152}, {197, 384, 1536},  {197, 1536, 384},  {1576, 384, 1152},
                                     {1576, 384, 1536}, {1576, 1536, 384}, {1024, 384, 1536}, {197, 768, 3072}};
  const std::vector<int> threadCounts = {1, 2};
  const size_t configs = shapes.size() * threadCounts.size();
  std::vector<double> ein(configs, 1e30), dnn(configs, 1e30);
  // Best median over the rounds (the machine may be shared).
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < configs; ++i) {
      ein[i] = std::min(ein[i], einMs(shapes[i / 2], threadCounts[i % 2], bf16));
      dnn[i] = std::min(dnn[i], onednnMs(shapes[i / 2], threadCounts[i % 2], bf16));
    }
  }
  const dnnl_version_t *version = dnnl_version();
  std::printf("ein (%s) vs oneDNN %d.%d.%d matmul, packed weights, %s, best median of %d rounds\n",
              ein::detail::cpu::bestKernels().name, version->major, version->minor, version->patch,
              bf16 ? "bf16" : "f32", rounds);
  std::printf("%-18s %7s %10s %10s %10s %10s %12s\n", "m x k x n", "threads", "ein ms", "oneDNN ms", "ein GF/s",
              "oneDNN GF/s", "ein/oneDNN");
  for (size_t i = 0; i < configs; ++i) {
    const Shape &s = shapes[i / 2];
    const double flops = 2.0 * s.m * s.k * s.n * 1e-6;  // per ms -> GFLOP/s
    char name[32];
    std::snprintf(name, sizeof name, "%lldx%lldx%lld", (long long)s.m, (long long)s.k, (long long)s.n);
    std::printf("%-18s %7d %10.3f %10.3f %10.1f %10.1f %11.2fx\n", name, threadCounts[i % 2], ein[i], dnn[i],
                flops / ein[i], flops / dnn[i], dnn[i] / ein[i]);
  }
  return 0;
}
