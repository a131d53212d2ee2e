#include "compiler/weights/open_weights.hpp"

#include <algorithm>
#include <map>
#include <span>

#include "compiler/weights/checkpoint_names.hpp"
#include "compiler/weights/gguf.hpp"
#include "compiler/weights/weights_set.hpp"
#include "file_kind.hpp"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

namespace ein::weights {
namespace {

constexpr llvm::StringLiteral kIndexName = "model.safetensors.index.json";
constexpr llvm::StringLiteral kSingleName = "model.safetensors";
// A checkpoint of a trillion parameters has an index of a few megabytes; a
// larger file is not one, and is refused before it is parsed.
constexpr uint64_t kMaxIndexBytes = 100'000'000;

llvm::Error errorAt(const llvm::Twine &path, const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), (path + ": " + message).str());
}

std::string joinPath(llvm::StringRef folder, llvm::StringRef name) {
  llvm::SmallString<256> path(folder);
  llvm::sys::path::append(path, name);
  return path.str().str();
}

// "a, b, c and 4 more".
std::string listNames(llvm::ArrayRef<std::string> names) {
  constexpr size_t kShown = 3;
  std::string text = llvm::join(names.take_front(kShown), ", ");
  if (names.size() > kShown) text += " and " + std::to_string(names.size() - kShown) + " more";
  return text;
}

// What a PyTorch checkpoint starts with, if `firstBytes` are one: torch.save
// writes a zip whose pickle is "<name>/data.pkl" (PyTorch 1.6 and later), or
// a bare pickle (protocol 2 and later start with 0x80 and the protocol).
std::optional<llvm::StringRef> pickleKind(std::span<const uint8_t> firstBytes) {
  if (firstBytes.size() >= 2 && firstBytes[0] == 0x80 && firstBytes[1] >= 2 && firstBytes[1] <= 5)
    return llvm::StringRef("a Python pickle (a PyTorch checkpoint from torch.save?)");
  llvm::StringRef text(reinterpret_cast<const char *>(firstBytes.data()), firstBytes.size());
  if (text.starts_with("PK\x03\x04") && text.contains("data.pkl"))
    return llvm::StringRef("a PyTorch checkpoint (torch.save's zip of pickles)");
  return std::nullopt;
}

// `text` as a Python string literal.
std::string pythonString(llvm::StringRef text) {
  std::string literal = "'";
  for (char c : text) {
    if (c == '\\' || c == '\'') literal += '\\';
    literal += c;
  }
  return literal + "'";
}

// A command that writes each pickle checkpoint of `files` (a Python
// expression for a list of paths; `imports` what it needs besides torch) as
// a safetensors file beside it, under the same tensor names. clone():
// save_file refuses tensors that share memory (tied weights).
std::string conversionCommand(llvm::StringRef imports, llvm::StringRef files) {
  return ("python -c \"import " + imports + "torch; from safetensors.torch import save_file; "
          "[save_file({k: v.contiguous().clone() for k, v in torch.load(f, weights_only=True).items()}, "
          "f.rsplit('.', 1)[0] + '.safetensors') for f in " + files + "]\"")
      .str();
}

// The command that converts the pickle checkpoints at `paths`.
std::string conversionCommand(llvm::ArrayRef<std::string> paths) {
  std::vector<std::string> literals;
  for (const std::string &path : paths) literals.push_back(pythonString(path));
  std::string list = "[";
  list += llvm::join(literals, ", ");
  return conversionCommand("", list + "]");
}

// Unpickling runs code from the file: ein refuses it, and says how to
// convert it.
std::string refusePickle(llvm::StringRef kind, llvm::StringRef path) {
  return ("the file is " + kind +
          ", not a safetensors weights file; ein never loads pickle, which runs code from the file. Convert "
          "it to safetensors, keeping its tensor names: " +
          conversionCommand({path.str()}))
      .str();
}

bool isPickleName(llvm::StringRef name) {
  return llvm::any_of(std::initializer_list<llvm::StringRef>{".bin", ".pt", ".pth", ".ckpt"},
                      [&](llvm::StringRef suffix) { return name.ends_with_insensitive(suffix); });
}

// The files of a folder that may be weights, by name, each list sorted.
struct FolderContents {
  std::vector<std::string> indexes;      // *.safetensors.index.json
  std::vector<std::string> safetensors;  // *.safetensors
  std::vector<std::string> gguf;         // *.gguf
  std::vector<std::string> pickles;      // *.bin, *.pt, *.pth, *.ckpt
};

llvm::Expected<FolderContents> listFolder(llvm::StringRef folder) {
  FolderContents contents;
  std::error_code error;
  for (llvm::sys::fs::directory_iterator it(folder, error), end; it != end && !error; it.increment(error)) {
    // is_regular_file follows links: a Hugging Face cache's snapshot folder
    // links each file to its blob.
    if (!llvm::sys::fs::is_regular_file(it->path())) continue;
    std::string name = llvm::sys::path::filename(it->path()).str();
    llvm::StringRef ref(name);
    if (ref.ends_with_insensitive(".safetensors.index.json")) contents.indexes.push_back(name);
    else if (ref.ends_with_insensitive(".safetensors")) contents.safetensors.push_back(name);
    else if (ref.ends_with_insensitive(".gguf")) contents.gguf.push_back(name);
    else if (isPickleName(ref)) contents.pickles.push_back(name);
  }
  if (error) return errorAt(folder, "cannot list the folder: " + error.message());
  for (auto *names : {&contents.indexes, &contents.safetensors, &contents.gguf, &contents.pickles})
    llvm::sort(*names);
  return contents;
}

// A shard's name must stay inside the index's folder: an untrusted index
// could otherwise name any file on the machine.
bool isPlainFileName(llvm::StringRef name) {
  return !name.empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('\\') &&
         !name.contains('\0');
}

// The index's "weight_map", tensor name -> shard file name, checked: an
// object of strings, each a file name in the index's folder. llvm::json
// keeps the last of two equal keys; that hides nothing here, as the shard
// the kept one names must hold the tensor, and a tensor in two shards is an
// error of the set.
llvm::Expected<std::map<std::string, std::string>> readWeightMap(const std::string &indexPath) {
  auto buffer = llvm::MemoryBuffer::getFile(indexPath, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer) return errorAt(indexPath, "cannot open: " + buffer.getError().message());
  if ((*buffer)->getBufferSize() > kMaxIndexBytes)
    return errorAt(indexPath, "the index is " + llvm::Twine((*buffer)->getBufferSize()) +
                                  " bytes, more than the limit of " + llvm::Twine(kMaxIndexBytes));
  llvm::Expected<llvm::json::Value> json = llvm::json::parse((*buffer)->getBuffer());
  if (!json) return errorAt(indexPath, "not valid JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  const llvm::json::Value *weightMap = root ? root->get("weight_map") : nullptr;
  if (!weightMap) return errorAt(indexPath, "not a checkpoint index: no \"weight_map\" object (each tensor's shard)");
  const llvm::json::Object *entries = weightMap->getAsObject();
  if (!entries) return errorAt(indexPath, "\"weight_map\" is not an object of tensor names to shard files");
  if (entries->empty()) return errorAt(indexPath, "\"weight_map\" lists no tensors");
  // Sorted first, so that the error reported is the same on every run.
  std::map<std::string, const llvm::json::Value *> sorted;
  for (const auto &[tensor, shard] : *entries) sorted.emplace(llvm::StringRef(tensor).str(), &shard);
  std::map<std::string, std::string> shardOf;
  for (const auto &[tensor, shard] : sorted) {
    std::optional<llvm::StringRef> name = shard->getAsString();
    if (!name) return errorAt(indexPath, "\"weight_map\" gives tensor \"" + tensor + "\" a shard that is not a string");
    if (!isPlainFileName(*name))
      return errorAt(indexPath, "\"weight_map\" gives tensor \"" + tensor + "\" the shard \"" + *name +
                                    "\", which is not a file name in the index's folder (no '/', '\\' or '..')");
    shardOf.emplace(tensor, name->str());
  }
  return shardOf;
}

// Each tensor the index lists is in the shard it names.
llvm::Error checkShardsHoldTheirTensors(llvm::StringRef indexPath, const std::map<std::string, std::string> &shardOf,
                                        const std::map<std::string, std::unique_ptr<WeightsFile>> &shards) {
  for (const auto &[tensor, shard] : shardOf) {
    if (shards.at(shard)->find(tensor)) continue;
    std::string message = "tensor \"" + tensor + "\" is in shard \"" + shard + "\" by its weight_map, but " +
                          shards.at(shard)->path().str() + " does not hold it";
    for (const auto &[other, file] : shards)
      if (file->find(tensor)) {
        message += " (shard \"" + other + "\" does)";
        break;
      }
    return errorAt(indexPath, message);
  }
  return llvm::Error::success();
}

// The shards an index lists, each opened once, as one set under the folder's
// path.
llvm::Expected<std::unique_ptr<WeightsFile>> openIndexedShards(llvm::StringRef folder, llvm::StringRef indexName) {
  const std::string indexPath = joinPath(folder, indexName);
  llvm::Expected<std::map<std::string, std::string>> shardOf = readWeightMap(indexPath);
  if (!shardOf) return shardOf.takeError();
  std::map<std::string, std::unique_ptr<WeightsFile>> shards;
  for (const auto &[tensor, shard] : *shardOf) {
    if (shards.count(shard)) continue;
    const std::string shardPath = joinPath(folder, shard);
    if (!llvm::sys::fs::is_regular_file(shardPath))
      return errorAt(indexPath, "shard \"" + shard + "\" (of tensor \"" + tensor + "\") is not a file in " + folder);
    llvm::Expected<std::unique_ptr<WeightsFile>> file = openWeightsFile(shardPath);
    if (!file) return file.takeError();
    shards.emplace(shard, std::move(*file));
  }
  if (llvm::Error error = checkShardsHoldTheirTensors(indexPath, *shardOf, shards)) return error;
  std::vector<std::unique_ptr<WeightsFile>> files;
  for (auto &[name, file] : shards) files.push_back(std::move(file));
  return WeightsSet::create(std::move(files), folder.str());
}

// The folder's index: model.safetensors.index.json, else its only one.
llvm::Expected<std::string> chooseIndex(llvm::StringRef folder, llvm::ArrayRef<std::string> indexes) {
  if (llvm::is_contained(indexes, kIndexName)) return kIndexName.str();
  if (indexes.size() == 1) return indexes.front();
  return errorAt(folder, "the folder holds " + llvm::Twine(indexes.size()) + " checkpoint indexes (" +
                             listNames(indexes) +
                             ") and no " + kIndexName + ": give the shards of one, file by file");
}

// Files of one folder, as one set under the folder's path (one file alone
// under its own).
llvm::Expected<std::unique_ptr<WeightsFile>> openFolderFiles(llvm::StringRef folder,
                                                             llvm::ArrayRef<std::string> names) {
  if (names.size() == 1) return openWeightsFile(joinPath(folder, names.front()));
  std::vector<std::unique_ptr<WeightsFile>> files;
  for (const std::string &name : names) {
    llvm::Expected<std::unique_ptr<WeightsFile>> file = openWeightsFile(joinPath(folder, name));
    if (!file) return file.takeError();
    files.push_back(std::move(*file));
  }
  return WeightsSet::create(std::move(files), folder.str());
}

// Why a folder without safetensors files gives no weights, and what to do.
std::string noWeightsMessage(llvm::StringRef folder, const FolderContents &contents) {
  if (!contents.pickles.empty()) {
    // Hugging Face's pickle shards are pytorch_model*.bin; other pickles
    // beside them (training_args.bin) are no state_dict.
    const bool huggingFace = llvm::any_of(contents.pickles, [](const std::string &name) {
      return llvm::StringRef(name).starts_with("pytorch_model") && llvm::StringRef(name).ends_with(".bin");
    });
    const std::string hfPattern = joinPath(folder, "pytorch_model*.bin");
    std::vector<std::string> paths;
    for (const std::string &name : contents.pickles) paths.push_back(joinPath(folder, name));
    return "the folder holds only pickle checkpoints (" + listNames(contents.pickles) +
           "), no safetensors; ein never loads pickle, which runs code from the file. Convert them to "
           "safetensors beside them, keeping their tensor names: " +
           (huggingFace ? conversionCommand("glob, ", "glob.glob(" + pythonString(hfPattern) + ")")
                        : conversionCommand(paths));
  }
  if (!contents.gguf.empty())
    return "the folder holds GGUF files (" + listNames(contents.gguf) +
           ") and no safetensors: give one of them, not the folder";
  return "the folder holds no weights: no " + kIndexName.str() + ", " + kSingleName.str() +
         " or other .safetensors file";
}

llvm::Expected<std::unique_ptr<WeightsFile>> openFolder(llvm::StringRef folder) {
  llvm::Expected<FolderContents> contents = listFolder(folder);
  if (!contents) return contents.takeError();
  if (!contents->indexes.empty()) {
    llvm::Expected<std::string> index = chooseIndex(folder, contents->indexes);
    if (!index) return index.takeError();
    return openIndexedShards(folder, *index);
  }
  if (llvm::is_contained(contents->safetensors, kSingleName)) return openWeightsFile(joinPath(folder, kSingleName));
  if (!contents->safetensors.empty()) return openFolderFiles(folder, contents->safetensors);
  return errorAt(folder, noWeightsMessage(folder, *contents));
}

llvm::Expected<std::unique_ptr<WeightsFile>> openPath(llvm::StringRef path) {
  if (llvm::sys::fs::is_directory(path)) return openFolder(path);
  return openWeightsFile(path);
}

// The same file under two paths would hold every tensor twice.
llvm::Error checkDistinct(llvm::ArrayRef<std::string> paths) {
  for (size_t i = 0; i < paths.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      bool same = false;
      if (llvm::sys::fs::equivalent(paths[j], paths[i], same) || !same) continue;
      const std::string alias = paths[i] == paths[j] ? "" : " (as " + paths[j] + " too)";
      return errorAt(paths[i], "given twice as the weights" + alias);
    }
  return llvm::Error::success();
}

}  // namespace

llvm::Expected<std::unique_ptr<WeightsFile>> openWeightsFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer)
    return llvm::createStringError(buffer.getError(), (path + ": cannot open: " + buffer.getError().message()).str());
  std::span<const uint8_t> firstBytes(reinterpret_cast<const uint8_t *>((*buffer)->getBufferStart()),
                                      std::min<size_t>((*buffer)->getBufferSize(), 4096));
  if (std::optional<llvm::StringRef> pickle = pickleKind(firstBytes)) return errorAt(path, refusePickle(*pickle, path));
  if (sniffFileKind(firstBytes) == FileKind::Gguf) {
    llvm::Expected<GgufFile> gguf = GgufFile::fromBuffer(std::move(*buffer), path);
    if (!gguf) return gguf.takeError();
    return std::make_unique<GgufFile>(std::move(*gguf));
  }
  llvm::Expected<SafetensorsFile> safetensors = SafetensorsFile::fromBuffer(std::move(*buffer), path);
  if (!safetensors) return safetensors.takeError();
  return std::make_unique<SafetensorsFile>(std::move(*safetensors));
}

namespace {

llvm::Expected<std::unique_ptr<WeightsFile>> openPaths(llvm::ArrayRef<std::string> paths) {
  if (paths.empty()) return llvm::createStringError(llvm::inconvertibleErrorCode(), "no weights files given");
  if (paths.size() == 1) return openPath(paths.front());
  if (llvm::Error error = checkDistinct(paths)) return error;
  std::vector<std::unique_ptr<WeightsFile>> files;
  for (const std::string &path : paths) {
    llvm::Expected<std::unique_ptr<WeightsFile>> file = openPath(path);
    if (!file) return file.takeError();
    files.push_back(std::move(*file));
  }
  return WeightsSet::create(std::move(files), llvm::join(paths, ", "));
}

}  // namespace

llvm::Expected<std::unique_ptr<WeightsFile>> openWeights(llvm::ArrayRef<std::string> paths,
                                                         llvm::StringRef baseModelPrefix) {
  llvm::Expected<std::unique_ptr<WeightsFile>> opened = openPaths(paths);
  if (!opened) return opened;
  return std::make_unique<CheckpointNames>(std::move(*opened), baseModelPrefix.str());
}

}  // namespace ein::weights
