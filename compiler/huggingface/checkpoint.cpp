#include "compiler/huggingface/checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "compiler/frontend/lexer.hpp"
#include "compiler/frontend/parser.hpp"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "nlohmann/json.hpp"

namespace ein::huggingface {
namespace {

struct LibraryFile {
  const char *name;
  const char *text;
};

// models/huggingface/*.ein, embedded at build time (embed_models.cmake).
constexpr LibraryFile kLibrary[] = {
#include "library_models.inc"
};

// The model file for each architecture (config.json's "architectures"), the
// configs the architecture fixes where its config.json has no field for
// them (Qwen2's q, k and v projections have biases, its output projection
// none; ElectraForPreTraining's head), and the fields read under another
// name, as transformers' attribute_map reads them, where the model language
// cannot spell the field's own (DistilBERT's "dim", a reserved word:
// hidden_size).
struct Architecture {
  const char *name;
  const char *file;
  const char *baseModelPrefix;  // Checkpoint::baseModelPrefix
  // Configs that are true ("qkv_bias"), and a task head over the base model
  // ("head=discriminator"), which a sentence-transformers folder leaves out.
  std::initializer_list<const char *> fixed = {};
  std::initializer_list<std::pair<const char *, const char *>> renamed = {};  // (field, read as)
  // A text encoder's base model ("BertModel") whose file takes the heads of
  // kTextHeads: each is the architecture transformers names by the base
  // model's stem and the head's suffix ("BertForMaskedLM").
  bool textHeads = false;
};
constexpr bool kWithTextHeads = true;

// The task heads over a text encoder: the suffix of transformers' class for
// each, and the value of the model file's `config head` it sets.
constexpr std::pair<const char *, const char *> kTextHeads[] = {
    {"ForMaskedLM", "masked_lm"},
    {"ForSequenceClassification", "sequence_classification"},
    {"ForTokenClassification", "token_classification"},
    {"ForQuestionAnswering", "question_answering"},
};

const Architecture kArchitectures[] = {
    {"LlamaForCausalLM", "llama.ein", "model."},
    {"MistralForCausalLM", "llama.ein", "model."},
    {"MinistralForCausalLM", "llama.ein", "model."},
    {"Qwen2ForCausalLM", "llama.ein", "model.", {"qkv_bias"}},
    {"Qwen3ForCausalLM", "llama.ein", "model.", {"qk_norm"}},
    {"GemmaForCausalLM", "llama.ein", "model.", {"scale_embeddings", "norm_weight_plus_one"}},
    {"Phi3ForCausalLM", "llama.ein", "model.", {"fused_projections"}},
    {"GraniteForCausalLM", "llama.ein", "model.", {"attention_multiplier_scales"}},
    {"Olmo2ForCausalLM", "llama.ein", "model.", {"qk_norm_across_heads", "norms_after"}},
    {"SmolLM3ForCausalLM", "smollm3.ein", "model."},
    {"CohereForCausalLM", "cohere.ein", "model."},
    {"Cohere2ForCausalLM", "cohere.ein", "model.", {"cohere2"}},
    {"Gemma2ForCausalLM", "gemma2.ein", "model."},
    {"Gemma3ForCausalLM", "gemma3.ein", "model."},
    {"GPT2LMHeadModel", "gpt2.ein", "transformer."},
    {"GPTBigCodeForCausalLM", "gpt_bigcode.ein", "transformer."},
    {"GPTNeoXForCausalLM", "gpt_neox.ein", "gpt_neox."},
    {"GPTJForCausalLM", "gptj.ein", "transformer."},
    {"FalconForCausalLM", "falcon.ein", "transformer."},
    {"PhiForCausalLM", "phi.ein", "model."},
    {"BloomForCausalLM", "bloom.ein", "transformer."},
    {"OPTForCausalLM", "opt.ein", "model."},
    {"StableLmForCausalLM", "stablelm.ein", "model."},
    {"Starcoder2ForCausalLM", "starcoder2.ein", "model."},
    {"ViTForImageClassification", "vit.ein", "vit."},
    {"CLIPModel", "clip.ein", ""},
    {"AlbertModel", "albert.ein", "albert.", {}, {}, kWithTextHeads},
    {"BertModel", "bert.ein", "bert.", {}, {}, kWithTextHeads},
    {"RobertaModel", "bert.ein", "roberta.", {"roberta"}, {}, kWithTextHeads},
    {"XLMRobertaModel", "bert.ein", "roberta.", {"roberta"}, {}, kWithTextHeads},
    {"CamembertModel", "bert.ein", "roberta.", {"roberta"}, {}, kWithTextHeads},
    {"DistilBertModel", "distilbert.ein", "distilbert.", {}, {{"dim", "hidden_size"}}, kWithTextHeads},
    {"ElectraModel", "electra.ein", "electra.", {}, {}, kWithTextHeads},
    {"ElectraForPreTraining", "electra.ein", "electra.", {"head=discriminator"}},
    {"ModernBertModel", "modernbert.ein", "model.", {}, {}, kWithTextHeads},
    {"MPNetModel", "mpnet.ein", "mpnet.", {}, {}, kWithTextHeads},
    {"WhisperForConditionalGeneration", "whisper.ein", "model."},
    {"T5ForConditionalGeneration", "t5.ein", ""},
    {"MT5ForConditionalGeneration", "t5.ein", ""},
    {"BartForConditionalGeneration", "bart.ein", ""},
    {"MarianMTModel", "bart.ein", "", {"sinusoidal_positions"}},
    {"MBartForConditionalGeneration", "bart.ein", "", {"normalize_before"}},
    {"M2M100ForConditionalGeneration", "bart.ein", "", {"normalize_before", "fairseq_positions", "unbiased_head"}},
};

llvm::Error failure(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

const char *libraryText(llvm::StringRef name) {
  for (const LibraryFile &file : kLibrary)
    if (name == file.name) return file.text;
  return nullptr;
}

// config.json's fields by name, a nested object's fields dotted
// ("rope_scaling.factor"); null fields are left out (the model's default).
void flatten(const nlohmann::json &object, const std::string &prefix,
             std::map<std::string, const nlohmann::json *> &fields) {
  for (auto field = object.begin(); field != object.end(); ++field) {
    const std::string name = prefix + field.key();
    if (field->is_object()) flatten(*field, name + ".", fields);
    else if (!field->is_null()) fields[name] = &*field;
  }
}

// The rope's fields under the names the model files read, as transformers
// reads them: version 5 writes the theta, the partial rotary factor and the
// scaling into one "rope_parameters" object; older configs have them apart
// ("rope_theta", "partial_rotary_factor", "rope_scaling"), and "rope_type"
// was "type" earlier still. A model with a rope per kind of layer (Gemma 3:
// {"full_attention": {...}, "sliding_attention": {...}}) keeps the object,
// read as "rope_parameters.full_attention.rope_theta" and so on.
void normalizeRope(nlohmann::json &config) {
  auto perLayerKind = [](const nlohmann::json &parameters) {
    return std::any_of(parameters.begin(), parameters.end(), [](const nlohmann::json &item) { return item.is_object(); });
  };
  if (auto parameters = config.find("rope_parameters");
      parameters != config.end() && parameters->is_object() && !perLayerKind(*parameters)) {
    nlohmann::json scaling = *parameters;
    for (const char *field : {"rope_theta", "partial_rotary_factor"})
      if (auto value = scaling.find(field); value != scaling.end()) {
        config[field] = *value;
        scaling.erase(value);
      }
    if (!config.contains("rope_scaling") || config["rope_scaling"].is_null()) config["rope_scaling"] = scaling;
    config.erase("rope_parameters");
  }
  if (auto scaling = config.find("rope_scaling"); scaling != config.end() && scaling->is_object())
    if (auto type = scaling->find("type"); type != scaling->end() && !scaling->contains("rope_type")) {
      nlohmann::json value = *type;
      scaling->erase(type);
      (*scaling)["rope_type"] = value;
    }
}

// A configuration file's size and nesting that no real one comes near; the
// readers below walk the objects recursively.
constexpr uint64_t kMaxJsonBytes = uint64_t{64} << 20;
constexpr int kMaxJsonDepth = 32;

bool deeperThan(const nlohmann::json &value, int depth) {
  if (depth < 0) return true;
  if (value.is_object() || value.is_array())
    for (const nlohmann::json &item : value)
      if (deeperThan(item, depth - 1)) return true;
  return false;
}

llvm::Expected<nlohmann::json> readJson(const llvm::Twine &path) {
  uint64_t size = 0;
  if (!llvm::sys::fs::file_size(path, size) && size > kMaxJsonBytes)
    return failure(path + ": " + llvm::Twine(size) + " bytes, more than a configuration file holds (64 MiB)");
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) return failure(path + ": cannot read it (" + buffer.getError().message() + ")");
  nlohmann::json json = nlohmann::json::parse((*buffer)->getBuffer(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return failure(path + ": not valid JSON");
  if (deeperThan(json, kMaxJsonDepth))
    return failure(path + ": nested deeper than " + llvm::Twine(kMaxJsonDepth) + " levels");
  return json;
}

// A sentence-transformers folder (modules.json): the Transformer module is
// the folder's model, its Pooling module's config.json becomes the fields
// "pooling.*", its Normalize module "normalize" and sentence_bert_config.json's
// max_seq_length "max_seq_length"; other modules (Dense, ...) are an error
// that names them. Returns whether the folder is one.
llvm::Expected<bool> readSentenceTransformers(llvm::StringRef folder, nlohmann::json &config) {
  llvm::SmallString<256> modulesPath(folder);
  llvm::sys::path::append(modulesPath, "modules.json");
  if (!llvm::sys::fs::exists(modulesPath)) return false;
  auto modules = readJson(modulesPath);
  if (!modules) return modules.takeError();
  const std::string where = modulesPath.str().str();
  if (!modules->is_array()) return failure(where + ": not a JSON list of modules");
  for (const nlohmann::json &module : *modules) {
    auto type = module.find("type");
    if (!module.is_object() || type == module.end() || !type->is_string())
      return failure(where + ": a module without a \"type\"");
    const std::string kind = type->get<std::string>();
    if (kind == "sentence_transformers.models.Transformer") continue;
    if (kind == "sentence_transformers.models.Normalize") {
      config["normalize"] = true;
      continue;
    }
    if (kind != "sentence_transformers.models.Pooling")
      return failure(where + ": module type \"" + kind +
                     "\" is not one ein's model files apply (they apply Transformer, Pooling and Normalize)");
    auto path = module.find("path");
    const std::string relative = path != module.end() && path->is_string() ? path->get<std::string>() : "";
    if (relative.empty() || llvm::StringRef(relative).contains("..") || llvm::sys::path::is_absolute(relative))
      return failure(where + ": the Pooling module's \"path\" must name a folder inside " + folder);
    llvm::SmallString<256> poolingPath(folder);
    llvm::sys::path::append(poolingPath, relative, "config.json");
    auto pooling = readJson(poolingPath);
    if (!pooling) return pooling.takeError();
    if (!pooling->is_object()) return failure(poolingPath + ": not a JSON object");
    config["pooling"] = std::move(*pooling);
  }
  // The longest text it embeds (max_seq_length), beside config.json's fields.
  llvm::SmallString<256> bertConfigPath(folder);
  llvm::sys::path::append(bertConfigPath, "sentence_bert_config.json");
  if (llvm::sys::fs::exists(bertConfigPath)) {
    auto bertConfig = readJson(bertConfigPath);
    if (!bertConfig) return bertConfig.takeError();
    if (auto length = bertConfig->find("max_seq_length"); bertConfig->is_object() && length != bertConfig->end())
      config["max_seq_length"] = *length;
  }
  return true;
}

// The fields transformers derives instead of writing them, in config.json's
// object and in each nested one: a classifier's num_labels is a property that
// counts id2label's entries (the labels' names), which config.json holds.
void deriveFields(nlohmann::json &config) {
  for (auto &field : config)
    if (field.is_object()) deriveFields(field);
  if (auto labels = config.find("id2label"); labels != config.end() && labels->is_object() &&
                                             !labels->empty() && !config.contains("num_labels"))
    config["num_labels"] = labels->size();
}

// The fixed dims and the configs a model declares, wherever it does.
void collectSettings(const std::vector<frontend::StmtPtr> &statements, std::set<std::string> &dims,
                     std::set<std::string> &configs) {
  namespace ast = frontend;
  for (const auto &statement : statements) {
    switch (statement->kind) {
      case ast::Stmt::Kind::Dim:
        for (const auto &entry : static_cast<const ast::DimDecl &>(*statement).entries)
          if (!entry.max) dims.insert(entry.name);
        break;
      case ast::Stmt::Kind::Config:
        for (const auto &entry : static_cast<const ast::ConfigDecl &>(*statement).entries)
          configs.insert(entry.name.str());
        break;
      case ast::Stmt::Kind::Def:
        collectSettings(static_cast<const ast::Def &>(*statement).body, dims, configs);
        break;
      case ast::Stmt::Kind::For:
        collectSettings(static_cast<const ast::For &>(*statement).body, dims, configs);
        break;
      case ast::Stmt::Kind::If:
        for (const auto &branch : static_cast<const ast::If &>(*statement).branches)
          collectSettings(branch.body, dims, configs);
        break;
      default: break;
    }
  }
}

// A JSON value for a message, cut short where it is long.
std::string describe(const nlohmann::json &value) {
  std::string text = value.dump();
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

// A JSON number, boolean or string as a config's value; nullopt for others.
std::optional<mlirgen::ConfigScalar> configScalar(const nlohmann::json &value) {
  if (value.is_boolean()) return value.get<bool>();
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) return value.get<std::string>();
  return std::nullopt;
}

// A value as the language spells it: 2048, 1e-05, true, "silu", ["a", "b"].
std::string spell(const mlirgen::ConfigValue &value) {
  if (auto *items = std::get_if<std::vector<mlirgen::ConfigScalar>>(&value)) {
    std::vector<std::string> spelled;
    for (const mlirgen::ConfigScalar &item : *items)
      spelled.push_back(spell(mlirgen::configValueOf(item)));
    return "[" + llvm::join(spelled, ", ") + "]";
  }
  if (auto *flag = std::get_if<bool>(&value)) return *flag ? "true" : "false";
  if (auto *integer = std::get_if<int64_t>(&value)) return std::to_string(*integer);
  if (auto *real = std::get_if<double>(&value)) {
    if (std::isinf(*real)) return *real > 0 ? "inf" : "-inf";
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", *real);
    std::string spelled = text;
    // The shortest spelling that reads back as the same double.
    for (int digits = 1; digits < 17; ++digits) {
      std::snprintf(text, sizeof text, "%.*g", digits, *real);
      if (std::strtod(text, nullptr) == *real) {
        spelled = text;
        break;
      }
    }
    if (spelled.find_first_of(".en") == std::string::npos) spelled += ".0";  // still a float
    return spelled;
  }
  std::string quoted = "\"";
  for (char c : std::get<std::string>(value)) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

std::string spell(const ein::DimRange &range) {
  return range.min == range.max ? std::to_string(range.min)
                                : std::to_string(range.min) + ".." + std::to_string(range.max);
}

}  // namespace

// Calls visit(name, head) for each architecture of the row: its own name
// (head null), and for a text encoder's base model each of its heads'.
template <typename Visit>
void forEachName(const Architecture &architecture, Visit &&visit) {
  visit(llvm::StringRef(architecture.name), static_cast<const char *>(nullptr));
  llvm::StringRef stem = architecture.name;
  if (!architecture.textHeads || !stem.consume_back("Model")) return;
  for (const auto &[suffix, head] : kTextHeads) visit(llvm::StringRef((stem + suffix).str()), head);
}

std::vector<std::string> supportedArchitectures() {
  std::vector<std::string> names;
  for (const Architecture &architecture : kArchitectures)
    forEachName(architecture, [&](llvm::StringRef name, const char *) { names.push_back(name.str()); });
  std::sort(names.begin(), names.end());
  return names;
}

llvm::Expected<Checkpoint> readCheckpoint(llvm::StringRef folder) {
  if (!llvm::sys::fs::is_directory(folder))
    return failure(folder + ": not a folder (a Hugging Face checkpoint folder holds config.json and its weights)");
  llvm::SmallString<256> configPath(folder);
  llvm::sys::path::append(configPath, "config.json");
  if (!llvm::sys::fs::exists(configPath))
    return failure(folder + ": no config.json, so not a Hugging Face checkpoint folder");
  const std::string where = configPath.str().str();
  auto read = readJson(configPath);
  if (!read) return read.takeError();
  nlohmann::json config = std::move(*read);
  if (!config.is_object()) return failure(where + ": not a JSON object");
  llvm::Expected<bool> sentenceTransformers = readSentenceTransformers(folder, config);
  if (!sentenceTransformers) return sentenceTransformers.takeError();

  auto architectures = config.find("architectures");
  if (architectures == config.end() || !architectures->is_array() || architectures->empty() ||
      !architectures->front().is_string())
    return failure(where + ": no \"architectures\" naming the model's class (such as [\"LlamaForCausalLM\"])");
  Checkpoint checkpoint;
  checkpoint.folder = folder.str();
  checkpoint.architecture = architectures->front().get<std::string>();
  const Architecture *chosen = nullptr;
  const char *head = nullptr;
  for (const Architecture &architecture : kArchitectures)
    forEachName(architecture, [&](llvm::StringRef name, const char *itsHead) {
      if (name != checkpoint.architecture) return;
      chosen = &architecture;
      head = itsHead;
    });
  if (!chosen)
    return failure(where + ": architecture \"" + checkpoint.architecture +
                   "\" has no model file in ein's library (it has " + llvm::join(supportedArchitectures(), ", ") +
                   "); write one in the model language and compile it with --weights " + folder);
  const char *text = libraryText(chosen->file);
  // A build error (a conformance case compiles every architecture's file).
  if (!text) return failure(llvm::Twine("the model library lacks ") + chosen->file);
  checkpoint.source = {text, std::string("huggingface/") + chosen->file};
  // A head, fixed or named by the architecture, is left out of a
  // sentence-transformers folder: sentence-transformers loads the base model
  // (AutoModel), whatever head config.json names.
  for (llvm::StringRef fixed : chosen->fixed) {
    auto [name, value] = fixed.split('=');
    if (value.empty()) checkpoint.configs[name.str()] = true;
    else if (!*sentenceTransformers) checkpoint.configs[name.str()] = value.str();
  }
  if (head && !*sentenceTransformers) checkpoint.configs["head"] = std::string(head);
  checkpoint.baseModelPrefix = chosen->baseModelPrefix;

  frontend::ParseResult parsed = frontend::parse(checkpoint.source.text);
  std::set<std::string> dims, configs;
  collectSettings(parsed.module->statements, dims, configs);
  normalizeRope(config);
  deriveFields(config);
  for (const auto &[field, readAs] : chosen->renamed)
    if (auto value = config.find(field); value != config.end() && !config.contains(readAs)) config[readAs] = *value;
  std::map<std::string, const nlohmann::json *> fields;
  flatten(config, "", fields);
  for (const auto &[name, value] : fields) {
    if (dims.count(name)) {
      if (!value->is_number_integer() || value->get<int64_t>() <= 0)
        return failure(where + ": \"" + name + "\" is " + describe(*value) + ", but " + checkpoint.source.filename +
                       " sizes dim " + name + " by it: a positive integer");
      const int64_t size = value->get<int64_t>();
      checkpoint.dims[name] = {size, size};
    } else if (configs.count(name)) {
      if (std::optional<mlirgen::ConfigScalar> scalar = configScalar(*value)) {
        checkpoint.configs[name] = mlirgen::configValueOf(*scalar);
        continue;
      }
      std::vector<mlirgen::ConfigScalar> items;
      for (const nlohmann::json &item : value->is_array() ? *value : nlohmann::json::array()) {
        std::optional<mlirgen::ConfigScalar> scalar = configScalar(item);
        if (!scalar) break;
        items.push_back(std::move(*scalar));
      }
      if (!value->is_array() || items.size() != value->size())
        return failure(where + ": \"" + name + "\" is " + describe(*value) + ", but config " + name + " of " +
                       checkpoint.source.filename + " takes a number, true or false, a string, or a list of them");
      checkpoint.configs[name] = std::move(items);
    }
  }
  return checkpoint;
}

std::string modelTextWithValues(const Checkpoint &checkpoint, const ein::DimRanges &dims,
                                const mlirgen::ConfigValues &configs) {
  using K = frontend::Token::Kind;
  ein::DimRanges dimValues = checkpoint.dims;
  for (const auto &[name, range] : dims) dimValues[name] = range;
  mlirgen::ConfigValues configValues = checkpoint.configs;
  for (const auto &[name, value] : configs) configValues[name] = value;

  const std::string &text = checkpoint.source.text;
  const std::vector<frontend::Token> tokens = frontend::tokenize(text);
  auto isWord = [&](size_t i, const char *word) { return tokens[i].kind == K::Identifier && tokens[i].text == word; };
  // (begin, end) of each default to replace, and its new text.
  std::vector<std::pair<std::pair<size_t, size_t>, std::string>> edits;
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    if (i > 0 && tokens[i - 1].kind != K::Newline) continue;
    const bool dim = isWord(i, "dim") || (isWord(i, "position") && tokens[i + 1].kind == K::Identifier);
    const bool config = isWord(i, "config") && tokens[i + 1].kind == K::Identifier;
    if (!dim && !config) continue;
    size_t j = i + 1;
    while (tokens[j].kind == K::Identifier) {
      std::string name = tokens[j++].text;
      while (tokens[j].kind == K::Dot && tokens[j + 1].kind != K::End) name += "." + tokens[j + 1].text, j += 2;
      if (tokens[j].kind != K::Assign) break;
      const size_t first = ++j;
      // The default runs to a ',', the line's end or `in` (outside brackets).
      int depth = 0;
      auto endsHere = [&](size_t at) {
        return depth == 0 && (tokens[at].kind == K::Comma || tokens[at].kind == K::Newline ||
                              tokens[at].kind == K::End || (config && isWord(at, "in")));
      };
      for (; !endsHere(j); ++j) {
        if (tokens[j].kind == K::LParen || tokens[j].kind == K::LBracket) ++depth;
        if (tokens[j].kind == K::RParen || tokens[j].kind == K::RBracket) --depth;
      }
      if (j > first) {
        const std::pair<size_t, size_t> span{tokens[first].begin, tokens[j - 1].end};
        if (auto value = dimValues.find(name); dim && value != dimValues.end())
          edits.push_back({span, spell(value->second)});
        else if (auto value = configValues.find(name); config && value != configValues.end())
          edits.push_back({span, spell(value->second)});
      }
      if (config && isWord(j, "in"))  // the values it handles stay
        for (++j; !endsHere(j); ++j) {
          if (tokens[j].kind == K::LParen || tokens[j].kind == K::LBracket) ++depth;
          if (tokens[j].kind == K::RParen || tokens[j].kind == K::RBracket) --depth;
        }
      if (tokens[j].kind != K::Comma) break;
      ++j;
    }
  }
  std::string written = text;
  for (auto edit = edits.rbegin(); edit != edits.rend(); ++edit)
    written.replace(edit->first.first, edit->first.second - edit->first.first, edit->second);
  return "# " + checkpoint.source.filename + " for " + checkpoint.architecture + ", with the values of " +
         checkpoint.folder + "/config.json\n# written in (einc --hf --emit=ein); compile it with --weights " +
         checkpoint.folder + ".\n" + written;
}

}  // namespace ein::huggingface
