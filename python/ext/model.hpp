// ein.Model's native half: a loaded artifact and the Runner that runs it from
// any number of Python threads (the GIL is released while kernels run).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <nanobind/nanobind.h>

#include "ein/model.hpp"
#include "ein/runner.hpp"

namespace ein::python {

class PyModel {
 public:
  PyModel(std::shared_ptr<const Model> model, int threads);

  static std::unique_ptr<PyModel> load(const std::string &path, int threads);
  static std::unique_ptr<PyModel> fromArtifact(const std::vector<uint8_t> &artifact, const std::string &name,
                                               int threads);

  // [(name, dtype, shape, id_bound)], dtype as the runtime names it ("f32").
  nanobind::list inputs() const;
  nanobind::list outputs() const;
  // The ranged dims: name -> (min, max); empty for a model of fixed shapes.
  nanobind::dict dims() const;
  std::string describe() const;
  void save(const std::string &path) const;
  int threads() const { return defaultThreads; }
  const Model &model() const { return *loaded; }

  // Runs on `inputs` (name -> array) with `threads` kernel threads (0: the
  // model's); outputs named in `out` are written there, the others into new
  // NumPy arrays. Returns name -> array.
  nanobind::dict run(nanobind::dict inputs, nanobind::dict out, int threads);
  // ein::generate in a new session (a decoder with a key/value cache).
  std::vector<int64_t> generate(const std::vector<int64_t> &prompt, int64_t maxNewTokens, float temperature,
                                int64_t topK, float topP, uint64_t seed, const std::vector<int64_t> &stopTokens,
                                int threads);

 private:
  // The runner with `threads` kernel threads per call, made on first use;
  // runners share the model (and its prepacked weights).
  Runner &runnerFor(int threads);

  std::shared_ptr<const Model> loaded;
  int defaultThreads;
  std::mutex runnersMutex;
  std::map<int, std::unique_ptr<Runner>> runners;
};

void bindModel(nanobind::module_ &module);

}  // namespace ein::python
