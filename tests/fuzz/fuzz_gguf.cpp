// libFuzzer target: the GGUF reader on arbitrary bytes. A file either fails
// with a message naming it or every tensor it lists reads in full: its values
// (dequantized, rows put back in Hugging Face's order), its stored bytes
// where it is served as stored, and its lookup by the name it is served as.
#include <cstddef>
#include <cstdint>

#include "compiler/weights/gguf.hpp"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(reinterpret_cast<const char *>(data), size),
                                                     "fuzz.gguf");
  auto file = ein::weights::GgufFile::fromBuffer(std::move(buffer), "fuzz.gguf");
  if (!file) {
    const std::string message = llvm::toString(file.takeError());
    if (llvm::StringRef(message).find("fuzz.gguf") == llvm::StringRef::npos) __builtin_trap();
    return 0;
  }
  for (const ein::weights::TensorEntry &entry : file->entries()) {
    if (file->find(entry.name) != &entry) __builtin_trap();
    (void)file->stored(entry);
    (void)file->blockQuantization(entry);
    if (auto bytes = file->storedBytes(entry); bytes && bytes->size() != entry.end - entry.begin) __builtin_trap();
    auto values = file->toF32(entry);
    if (!values) llvm::consumeError(values.takeError());
    else if (values->size() != static_cast<size_t>(entry.numElements())) __builtin_trap();
  }
  (void)file->find("lm_head.weight");
  return 0;
}
