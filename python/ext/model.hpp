// ein.Model's native half: a loaded artifact and the Runner that runs it from
// any number of Python threads (the GIL is released while kernels run).
#pragma once

#include <memory>
#include <string>

#include <nanobind/nanobind.h>

#include "ein/model.hpp"
#include "ein/runner.hpp"

namespace ein::python {

class PyModel {
 public:
  PyModel(std::shared_ptr<const Model> model, int threads);

  static PyModel load(const std::string &path, int threads);
  static PyModel fromArtifact(const std::vector<uint8_t> &artifact, const std::string &name, int threads);

  // [(name, dtype, shape, id_bound)], dtype as the runtime names it ("f32").
  nanobind::list inputs() const;
  nanobind::list outputs() const;
  std::string describe() const;
  void save(const std::string &path) const;
  int threads() const { return runner->options().threads; }
  const Model &model() const { return *loaded; }

  // Runs on `inputs` (name -> array); outputs named in `out` are written
  // there, the others into new NumPy arrays. Returns name -> array.
  nanobind::dict run(nanobind::dict inputs, nanobind::dict out);

 private:
  std::shared_ptr<const Model> loaded;
  std::unique_ptr<Runner> runner;
};

void bindModel(nanobind::module_ &module);

}  // namespace ein::python
