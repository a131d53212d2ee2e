#include "compiler/weights/open_weights.hpp"

#include <span>

#include "compiler/weights/gguf.hpp"
#include "file_kind.hpp"
#include "llvm/Support/MemoryBuffer.h"

namespace ein::weights {

llvm::Expected<std::unique_ptr<WeightsFile>> openWeightsFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer)
    return llvm::createStringError(buffer.getError(), (path + ": cannot open: " + buffer.getError().message()).str());
  std::span<const uint8_t> firstBytes(reinterpret_cast<const uint8_t *>((*buffer)->getBufferStart()),
                                      std::min<size_t>((*buffer)->getBufferSize(), 4096));
  if (sniffFileKind(firstBytes) == FileKind::Gguf) {
    llvm::Expected<GgufFile> gguf = GgufFile::fromBuffer(std::move(*buffer), path);
    if (!gguf) return gguf.takeError();
    return std::make_unique<GgufFile>(std::move(*gguf));
  }
  llvm::Expected<SafetensorsFile> safetensors = SafetensorsFile::fromBuffer(std::move(*buffer), path);
  if (!safetensors) return safetensors.takeError();
  return std::make_unique<SafetensorsFile>(std::move(*safetensors));
}

}  // namespace ein::weights
