// libFuzzer target: the artifact loader and verifier on arbitrary bytes, then
// a run of whatever loads. libFuzzer's byte mutations find framing and
// FlatBuffers damage; fuzz_artifact_fields mutates the fields themselves.
#include "artifact_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ein::fuzz::loadAndRun(data, size);
  return 0;
}
