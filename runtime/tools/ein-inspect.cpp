// ein-inspect: what an ein artifact holds, for people (default) or scripts
// (--json). The artifact is verified first: a bad one is an error, never a
// partial listing.
//
//   ein-inspect MODEL.einb [--json]
#include <CLI/CLI.hpp>
#include <cstdio>

#include "ein/describe.hpp"
#include "ein/runtime.hpp"
#include "tool_support.hpp"

int main(int argc, char **argv) {
  CLI::App app{"ein-inspect: shows what an ein artifact (.einb) holds", "ein-inspect"};
  std::string path;
  bool json = false;
  app.add_option("model", path, "the artifact (.einb)")->required();
  app.add_flag("--json", json, "print one JSON object instead of a summary");
  CLI11_PARSE(app, argc, argv);

  auto model = ein::Model::load(path, {.prepackWeights = false});
  if (!model.ok()) return ein::tools::fail("ein-inspect", model.status().message());
  if (json) std::printf("%s\n", ein::describeModelJson(*model.value()).c_str());
  else std::fputs(ein::describeModel(*model.value()).c_str(), stdout);
  return 0;
}
