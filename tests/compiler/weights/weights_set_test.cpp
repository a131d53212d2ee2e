// Weights in several files, or in a checkpoint folder (openWeights): every
// tensor is served by the file that holds it and named by it in errors, and
// every malformed folder, index or shard gives an error naming the file and
// the problem, never a crash.
#include "compiler/weights/open_weights.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "weights_test_support.hpp"

namespace fs = std::filesystem;
using ein::weights::openWeights;
using ein::weights::TensorEntry;
using ein::weights::WeightsFile;
using ein::weights::test::errorMessage;
using ein::weights::test::safetensorsBytes;

namespace {

const fs::path kGgufFixtures = EIN_GGUF_FIXTURES_DIR;

using Tensors = std::vector<std::pair<std::string, std::vector<float>>>;

// A safetensors file of f32 vectors.
std::string f32File(const Tensors &tensors) {
  std::string header, data;
  for (const auto &[name, values] : tensors) {
    const size_t begin = data.size();
    data.append(reinterpret_cast<const char *>(values.data()), values.size() * sizeof(float));
    header += (header.empty() ? "{" : ", ") + ("\"" + name + "\": {\"dtype\": \"F32\", \"shape\": [") +
              std::to_string(values.size()) + "], \"data_offsets\": [" + std::to_string(begin) + ", " +
              std::to_string(data.size()) + "]}";
  }
  return safetensorsBytes(header + "}", data);
}

// An index's JSON: {"metadata": {...}, "weight_map": {tensor: shard, ...}}.
std::string indexJson(const std::vector<std::pair<std::string, std::string>> &shardOf) {
  std::string map;
  for (const auto &[tensor, shard] : shardOf)
    map += (map.empty() ? "" : ", ") + ("\"" + tensor + "\": \"" + shard + "\"");
  return R"({"metadata": {"total_size": 16}, "weight_map": {)" + map + "}}";
}

class WeightsFolderTest : public ein::weights::test::TempDirTest {
protected:
  std::unique_ptr<WeightsFile> open(std::vector<std::string> paths) {
    auto file = openWeights(paths);
    if (!file) {
      ADD_FAILURE() << errorMessage(file.takeError());
      return nullptr;
    }
    return std::move(*file);
  }

  // The error from opening `paths`, which must not open.
  std::string openError(std::vector<std::string> paths) {
    auto file = openWeights(paths);
    return file ? "<opened without error>" : errorMessage(file.takeError());
  }

  // The folder `name`, with an index over two shards: "a" in the first,
  // "b" and "c" in the second.
  std::string shardedCheckpoint(const std::string &name) {
    write(name + "/model-00001-of-00002.safetensors", f32File({{"a", {1, 2}}}));
    write(name + "/model-00002-of-00002.safetensors", f32File({{"b", {3}}, {"c", {4, 5, 6}}}));
    write(name + "/model.safetensors.index.json",
          indexJson({{"a", "model-00001-of-00002.safetensors"},
                     {"b", "model-00002-of-00002.safetensors"},
                     {"c", "model-00002-of-00002.safetensors"}}));
    return (dir / name).string();
  }

  // The values of `name`, read through `file`.
  static std::vector<float> valuesOf(const WeightsFile &file, llvm::StringRef name) {
    const TensorEntry *entry = file.find(name);
    if (!entry) {
      ADD_FAILURE() << "no tensor " << name.str();
      return {};
    }
    auto values = file.toF32(*entry);
    if (!values) {
      ADD_FAILURE() << errorMessage(values.takeError());
      return {};
    }
    return std::move(*values);
  }
};

TEST_F(WeightsFolderTest, TwoShardsWithAnIndex) {
  const std::string folder = shardedCheckpoint("ckpt");
  auto file = open({folder});
  ASSERT_TRUE(file);
  EXPECT_EQ(file->path(), folder);
  ASSERT_EQ(file->entries().size(), 3u);
  EXPECT_EQ(valuesOf(*file, "a"), (std::vector<float>{1, 2}));
  EXPECT_EQ(valuesOf(*file, "c"), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(file->find("d"), nullptr);
  // Each tensor is named by its shard; its bytes are the shard's, in place.
  const TensorEntry &b = *file->find("b");
  EXPECT_EQ(file->pathOf(b), (dir / "ckpt/model-00002-of-00002.safetensors").string());
  EXPECT_EQ(file->pathOf(*file->find("a")), (dir / "ckpt/model-00001-of-00002.safetensors").string());
  std::optional<llvm::ArrayRef<uint8_t>> bytes = file->storedBytes(b);
  ASSERT_TRUE(bytes);
  EXPECT_EQ(bytes->size(), 4u);
  file->release(b);  // the shard's pages; the values stay readable
  EXPECT_EQ(valuesOf(*file, "b"), (std::vector<float>{3}));
}

TEST_F(WeightsFolderTest, AFolderWithOneModelSafetensorsIsThatFile) {
  write("ckpt/model.safetensors", f32File({{"w", {1}}}));
  write("ckpt/adapter_model.safetensors", f32File({{"w", {2}}}));  // not the checkpoint's: left alone
  auto file = open({(dir / "ckpt").string()});
  ASSERT_TRUE(file);
  EXPECT_EQ(file->path(), (dir / "ckpt/model.safetensors").string());
  EXPECT_EQ(valuesOf(*file, "w"), (std::vector<float>{1}));
}

TEST_F(WeightsFolderTest, AFolderWithoutIndexReadsEverySafetensorsFile) {
  write("ckpt/part-b.safetensors", f32File({{"b", {2}}}));
  write("ckpt/part-a.safetensors", f32File({{"a", {1}}}));
  write("ckpt/config.json", "{}");
  auto file = open({(dir / "ckpt").string()});
  ASSERT_TRUE(file);
  ASSERT_EQ(file->entries().size(), 2u);
  EXPECT_EQ(file->entries()[0].name, "a") << "files in name order";
  EXPECT_EQ(file->pathOf(*file->find("b")), (dir / "ckpt/part-b.safetensors").string());
}

TEST_F(WeightsFolderTest, SeveralPathsAreReadAsOne) {
  const std::string folder = shardedCheckpoint("ckpt");
  const std::string extra = write("extra.safetensors", f32File({{"e", {7}}})).string();
  auto file = open({folder, extra});
  ASSERT_TRUE(file);
  EXPECT_EQ(file->path(), folder + ", " + extra);
  EXPECT_EQ(file->entries().size(), 4u);
  EXPECT_EQ(valuesOf(*file, "e"), (std::vector<float>{7}));
  EXPECT_EQ(file->pathOf(*file->find("e")), extra);
  EXPECT_EQ(file->pathOf(*file->find("c")), (dir / "ckpt/model-00002-of-00002.safetensors").string())
      << "a folder's tensor is named by its shard";
}

TEST_F(WeightsFolderTest, OneFileIsServedAsItself) {
  const std::string path = write("w.safetensors", f32File({{"w", {1}}})).string();
  auto file = open({path});
  ASSERT_TRUE(file);
  EXPECT_EQ(file->path(), path);
  EXPECT_EQ(file->pathOf(*file->find("w")), path);
}

// Names as transformers' from_pretrained reads them: with or without the
// base model's prefix, and LayerNorm's legacy gamma and beta (checkpoints
// ported from TensorFlow, bert-base-uncased's) for its weight and bias.
TEST_F(WeightsFolderTest, NamesAreReadAsTransformersReadsThem) {
  const std::string path = write("model.safetensors", f32File({{"bert.embeddings.LayerNorm.gamma", {1}},
                                                               {"bert.embeddings.LayerNorm.beta", {2}},
                                                               {"encoder.LayerNorm.weight", {3}},
                                                               {"classifier.weight", {4}}}))
                               .string();
  auto prefixed = openWeights({path}, "bert.");
  ASSERT_TRUE(static_cast<bool>(prefixed)) << errorMessage(prefixed.takeError());
  WeightsFile &file = **prefixed;
  auto nameOf = [&](llvm::StringRef asked) {
    const TensorEntry *entry = file.find(asked);
    return entry ? entry->name : "<none>";
  };
  EXPECT_EQ(nameOf("embeddings.LayerNorm.weight"), "bert.embeddings.LayerNorm.gamma");
  EXPECT_EQ(nameOf("bert.embeddings.LayerNorm.bias"), "bert.embeddings.LayerNorm.beta");
  EXPECT_EQ(nameOf("embeddings.LayerNorm.gamma"), "bert.embeddings.LayerNorm.gamma");
  EXPECT_EQ(nameOf("bert.encoder.LayerNorm.weight"), "encoder.LayerNorm.weight");
  EXPECT_EQ(nameOf("classifier.weight"), "classifier.weight");
  EXPECT_EQ(nameOf("classifier.bias"), "<none>");
  EXPECT_EQ(nameOf("encoder.LayerNorm.bias"), "<none>");
  // Without a prefix, only the legacy names.
  auto plain = open({path});
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->find("bert.embeddings.LayerNorm.weight")->name, "bert.embeddings.LayerNorm.gamma");
  EXPECT_EQ(plain->find("embeddings.LayerNorm.weight"), nullptr);
}

// A GGUF file's tied output projection (lm_head.weight served by the
// embedding) is found through a set too, and named by the GGUF file.
TEST_F(WeightsFolderTest, NamesAFileServesUnderAnotherAreFound) {
  const std::string gguf = (kGgufFixtures / "llama_tied.gguf").string();
  const std::string extra = write("extra.safetensors", f32File({{"extra", {1}}})).string();
  auto file = open({extra, gguf});
  ASSERT_TRUE(file);
  const TensorEntry *head = file->find("lm_head.weight");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head, file->find("model.embed_tokens.weight"));
  EXPECT_EQ(file->pathOf(*head), gguf);
}

TEST_F(WeightsFolderTest, ATensorInTwoFilesIsAnError) {
  const std::string first = write("one.safetensors", f32File({{"a", {1}}, {"w", {1}}})).string();
  const std::string second = write("two.safetensors", f32File({{"w", {2}}})).string();
  EXPECT_EQ(openError({first, second}),
            second + ": tensor \"w\" is also in " + first + " (a tensor may be in one file only)");
  // Between a folder's shard and another file, the shard is named.
  const std::string folder = shardedCheckpoint("ckpt");
  const std::string clash = write("clash.safetensors", f32File({{"c", {0}}})).string();
  EXPECT_EQ(openError({folder, clash}), clash + ": tensor \"c\" is also in " +
                                            (dir / "ckpt/model-00002-of-00002.safetensors").string() +
                                            " (a tensor may be in one file only)");
}

TEST_F(WeightsFolderTest, TheSameFileTwiceIsAnError) {
  const std::string path = write("w.safetensors", f32File({{"w", {1}}})).string();
  EXPECT_EQ(openError({path, path}), path + ": given twice as the weights");
  const std::string other = (dir / "." / "w.safetensors").string();
  EXPECT_EQ(openError({path, other}), other + ": given twice as the weights (as " + path + " too)");
}

TEST_F(WeightsFolderTest, AnIndexNamingAMissingShardIsAnError) {
  const std::string folder = shardedCheckpoint("ckpt");
  fs::remove(dir / "ckpt/model-00002-of-00002.safetensors");
  EXPECT_EQ(openError({folder}), folder + "/model.safetensors.index.json: shard \"model-00002-of-00002.safetensors\" "
                                          "(of tensor \"b\") is not a file in " + folder);
}

TEST_F(WeightsFolderTest, ATensorMustBeInTheShardTheIndexNames) {
  const std::string folder = shardedCheckpoint("ckpt");
  write("ckpt/model.safetensors.index.json", indexJson({{"a", "model-00002-of-00002.safetensors"},
                                                        {"b", "model-00002-of-00002.safetensors"},
                                                        {"c", "model-00001-of-00002.safetensors"}}));
  EXPECT_EQ(openError({folder}), folder + "/model.safetensors.index.json: tensor \"a\" is in shard "
                                          "\"model-00002-of-00002.safetensors\" by its weight_map, but " + folder +
                                          "/model-00002-of-00002.safetensors does not hold it (shard "
                                          "\"model-00001-of-00002.safetensors\" does)");
  // A tensor no shard holds.
  write("ckpt/model.safetensors.index.json", indexJson({{"a", "model-00001-of-00002.safetensors"},
                                                        {"z", "model-00001-of-00002.safetensors"}}));
  std::string message = openError({folder});
  EXPECT_NE(message.find("tensor \"z\" is in shard \"model-00001-of-00002.safetensors\" by its weight_map, but"),
            std::string::npos) << message;
  EXPECT_EQ(message.find("does)"), std::string::npos) << message;
}

TEST_F(WeightsFolderTest, ShardNamesStayInTheFolder) {
  write("ckpt/model.safetensors", f32File({{"a", {1}}}));
  write("outside.safetensors", f32File({{"a", {1}}}));
  const std::string index = (dir / "ckpt/model.safetensors.index.json").string();
  for (std::string shard : {"../outside.safetensors", "sub/model.safetensors", "..", ".", "", "a\\\\b"}) {
    write("ckpt/model.safetensors.index.json", indexJson({{"a", shard}}));
    std::string message = openError({(dir / "ckpt").string()});
    EXPECT_EQ(message.rfind(index + ": \"weight_map\" gives tensor \"a\" the shard \"", 0), 0u) << message;
    EXPECT_NE(message.find("which is not a file name in the index's folder"), std::string::npos) << message;
  }
}

TEST_F(WeightsFolderTest, MalformedIndexes) {
  write("ckpt/model.safetensors", f32File({{"a", {1}}}));
  const std::string folder = (dir / "ckpt").string(), index = folder + "/model.safetensors.index.json";
  auto indexError = [&](const std::string &json) {
    write("ckpt/model.safetensors.index.json", json);
    std::string message = openError({folder});
    EXPECT_EQ(message.rfind(index + ": ", 0), 0u) << message;
    return message.substr(std::min(message.size(), index.size() + 2));
  };
  EXPECT_EQ(indexError(R"({"weight_map": {"a": )"), "not valid JSON: [1:21, byte=21]: Unexpected EOF");
  EXPECT_EQ(indexError("\xff"), "not valid JSON: [1:0, byte=0]: Invalid UTF-8 sequence");
  EXPECT_EQ(indexError("[]"), "not a checkpoint index: no \"weight_map\" object (each tensor's shard)");
  EXPECT_EQ(indexError(R"({"metadata": {}})"),
            "not a checkpoint index: no \"weight_map\" object (each tensor's shard)");
  EXPECT_EQ(indexError(R"({"weight_map": ["model.safetensors"]})"),
            "\"weight_map\" is not an object of tensor names to shard files");
  EXPECT_EQ(indexError(R"({"weight_map": {}})"), "\"weight_map\" lists no tensors");
  EXPECT_EQ(indexError(R"({"weight_map": {"b": "model.safetensors", "a": 3}})"),
            "\"weight_map\" gives tensor \"a\" a shard that is not a string");
}

TEST_F(WeightsFolderTest, APickleOnlyFolderIsRefusedWithTheConversion) {
  write("ckpt/pytorch_model.bin", std::string("\x80\x02}q\x00.", 6));
  write("ckpt/config.json", "{}");
  const std::string folder = (dir / "ckpt").string();
  std::string message = openError({folder});
  EXPECT_EQ(message.rfind(folder + ": the folder holds only pickle checkpoints (pytorch_model.bin), no safetensors; "
                                   "ein never loads pickle",
                          0),
            0u)
      << message;
  EXPECT_NE(message.find("save_file("), std::string::npos) << message;
  EXPECT_NE(message.find("glob.glob('" + folder + "/pytorch_model*.bin')"), std::string::npos) << message;
}

TEST_F(WeightsFolderTest, APickleFileIsRefusedWithTheConversion) {
  const std::string pickle = write("w.pt", std::string("\x80\x04\x95", 3)).string();
  std::string message = openError({pickle});
  EXPECT_EQ(message.rfind(pickle + ": the file is a Python pickle (a PyTorch checkpoint from torch.save?), not a "
                                   "safetensors weights file; ein never loads pickle",
                          0),
            0u)
      << message;
  EXPECT_NE(message.find("for f in ['" + pickle + "']"), std::string::npos) << message;
  // A quote in the path is escaped in the command's Python string.
  const std::string quoted = write("it's.pt", std::string("\x80\x02", 2)).string();
  message = openError({quoted});
  EXPECT_NE(message.find("for f in ['" + (dir / "it\\'s.pt").string() + "']"), std::string::npos) << message;
  // torch.save's zip, its pickle at "<name>/data.pkl".
  const std::string zipHeader = std::string("PK\x03\x04", 4) + std::string(26, '\0');
  const std::string zip = write("w.pth", zipHeader + "archive/data.pkl").string();
  message = openError({zip});
  EXPECT_EQ(message.rfind(zip + ": the file is a PyTorch checkpoint (torch.save's zip of pickles)", 0), 0u) << message;
}

TEST_F(WeightsFolderTest, AFolderWithoutWeightsIsAnError) {
  fs::create_directories(dir / "empty");
  const std::string empty = (dir / "empty").string();
  EXPECT_EQ(openError({empty}), empty + ": the folder holds no weights: no model.safetensors.index.json, "
                                        "model.safetensors or other .safetensors file");
  write("gguf/llama-q4_0.gguf", "GGUF");
  EXPECT_EQ(openError({(dir / "gguf").string()}),
            (dir / "gguf").string() + ": the folder holds GGUF files (llama-q4_0.gguf) and no safetensors: give one "
                                      "of them, not the folder");
  EXPECT_EQ(openError({}), "no weights files given");
}

TEST_F(WeightsFolderTest, SeveralIndexesWithoutTheUsualOneAreAnError) {
  write("ckpt/a.safetensors.index.json", indexJson({{"a", "a.safetensors"}}));
  write("ckpt/b.safetensors.index.json", indexJson({{"a", "b.safetensors"}}));
  const std::string folder = (dir / "ckpt").string();
  EXPECT_EQ(openError({folder}), folder + ": the folder holds 2 checkpoint indexes (a.safetensors.index.json, "
                                          "b.safetensors.index.json) and no model.safetensors.index.json: give the "
                                          "shards of one, file by file");
  // One index of another name is the folder's.
  fs::remove(dir / "ckpt/b.safetensors.index.json");
  write("ckpt/a.safetensors", f32File({{"a", {1}}}));
  auto file = open({folder});
  ASSERT_TRUE(file);
  EXPECT_EQ(valuesOf(*file, "a"), (std::vector<float>{1}));
}

TEST_F(WeightsFolderTest, ATruncatedShardIsAnErrorNamingIt) {
  const std::string folder = shardedCheckpoint("ckpt");
  const std::string shard = (dir / "ckpt/model-00002-of-00002.safetensors").string();
  std::string bytes = f32File({{"b", {3}}, {"c", {4, 5, 6}}});
  for (size_t size : {bytes.size() - 1, bytes.size() - 16, size_t{20}, size_t{3}, size_t{0}}) {
    write("ckpt/model-00002-of-00002.safetensors", bytes.substr(0, size));
    std::string message = openError({folder});
    EXPECT_EQ(message.rfind(shard + ": ", 0), 0u) << size << " bytes: " << message;
  }
}

}  // namespace
