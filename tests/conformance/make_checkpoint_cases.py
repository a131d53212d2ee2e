#!/usr/bin/env python3
"""Writes the conformance cases cases/hf_* from Hugging Face checkpoint folders made by transformers itself.

Each case is a small model of one family of ein's model library (models/huggingface), built with
random weights from a config with uneven sizes (grouped-query ratios other than 1, head_dim not
hidden / heads, biases and tied heads where the family has them), saved with `save_pretrained`
into the case's `checkpoint/` folder exactly as transformers writes it (config.json and
model.safetensors, f32 or bf16). The tests compile it with `einc --hf checkpoint/` and compare
with what transformers computes on the same folder in float64: the prefill logits (or an
encoder's outputs), and for decoders the tokens of greedy `generate` (generation.json; for the
encoder-decoders (Whisper, T5, BART, Marian, mBART, M2M100) from the decoder's start token after the encoder's inputs, with
beam search's sequences beside them).

Needs torch, transformers, numpy and safetensors (the build and the tests never do):
  .venv-bench/bin/pip install torch transformers numpy safetensors
  .venv-bench/bin/python tests/conformance/make_checkpoint_cases.py [NAME ...]
"""
import json
import os
import shutil
import sys

import numpy as np
import torch
import transformers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES = os.path.join(ROOT, "tests", "conformance", "cases")
PROMPT_LENGTH = 9
NEW_TOKENS = 24


def randomize(model, seed):
    """Random weights large enough that every part matters: norms near 1, unit-variance activations."""
    generator = torch.Generator().manual_seed(seed)
    state = {}
    # A tied parameter (an embedding and the head that shares it) takes the value of its last name: a tied
    # head's noise / sqrt(hidden), which keeps a tiny decoder's residual led by its blocks.
    for name, value in model.state_dict().items():
        noise = torch.randn(value.shape, generator=generator, dtype=torch.float64)
        if value.dim() == 1 and name.endswith("bias"):
            value = 0.2 * noise
        elif value.dim() == 1:
            value = 1 + 0.2 * noise
        elif "embed" in name or name.endswith("wte.weight") or name.endswith("wpe.weight"):
            value = noise
        else:
            value = noise / np.sqrt(value.shape[-1])
        state[name] = value.float()
    model.load_state_dict(state)
    return model


# name -> (transformers class name, config class name, config, saved dtype, what it exercises)
DECODERS = {
    "hf_llama3_tiny": (
        "LlamaForCausalLM", "LlamaConfig",
        dict(vocab_size=96, hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=6,
             num_key_value_heads=2, head_dim=12, rms_norm_eps=1e-5, rope_theta=500000.0, attention_bias=True,
             tie_word_embeddings=False, max_position_embeddings=256,
             rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 16}),
        torch.float32,
        "LlamaForCausalLM with Llama 3's rope scaling, q/k/v/o biases, 6 query heads sharing 2 key/value heads "
        "of 12 (head_dim is not hidden / heads), an untied head"),
    "hf_mistral_tiny": (
        "MistralForCausalLM", "MistralConfig",
        dict(vocab_size=80, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=8,
             num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, rope_theta=10000.0, sliding_window=6,
             tie_word_embeddings=True, max_position_embeddings=256),
        torch.bfloat16,
        "MistralForCausalLM with a sliding window of 6 (shorter than the prompt and the generation), 8 query heads "
        "sharing 2 key/value heads, tied embeddings, saved in bf16"),
    "hf_qwen2_tiny": (
        "Qwen2ForCausalLM", "Qwen2Config",
        dict(vocab_size=72, hidden_size=40, intermediate_size=72, num_hidden_layers=3, num_attention_heads=5,
             num_key_value_heads=1, rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
             use_sliding_window=True, sliding_window=5, max_window_layers=1, max_position_embeddings=256),
        torch.float32,
        "Qwen2ForCausalLM: q/k/v biases (none on the output projection), 5 query heads sharing one key/value head, "
        "tied embeddings, a sliding window of 5 from layer 1 on (max_window_layers)"),
    "hf_qwen3_tiny": (
        "Qwen3ForCausalLM", "Qwen3Config",
        dict(vocab_size=76, hidden_size=48, intermediate_size=72, num_hidden_layers=3, num_attention_heads=6,
             num_key_value_heads=2, head_dim=12, rms_norm_eps=1e-6, rope_theta=1000000.0, attention_bias=True,
             tie_word_embeddings=True, use_sliding_window=True, sliding_window=5, max_window_layers=2,
             max_position_embeddings=256),
        torch.float32,
        "Qwen3ForCausalLM: an RMSNorm of each head's query and key before the rotary embedding, q/k/v/o biases, "
        "6 query heads sharing 2 key/value heads of 12 (head_dim is not hidden / heads), tied embeddings, "
        "a sliding window of 5 from layer 2 on (max_window_layers)"),
    "hf_gemma_tiny": (
        "GemmaForCausalLM", "GemmaConfig",
        dict(vocab_size=88, hidden_size=48, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=1, head_dim=20, rms_norm_eps=1e-6, hidden_act="gelu_pytorch_tanh",
             max_position_embeddings=256),
        torch.float32,
        "GemmaForCausalLM: embeddings scaled by sqrt(hidden), RMSNorm by 1 + weight, a GeGLU MLP (tanh GELU), "
        "multi-query attention with head_dim 20 (not hidden / heads), tied embeddings"),
    "hf_phi3_tiny": (
        "Phi3ForCausalLM", "Phi3Config",
        dict(vocab_size=90, hidden_size=64, intermediate_size=80, num_hidden_layers=2, num_attention_heads=8,
             num_key_value_heads=4, rms_norm_eps=1e-5, partial_rotary_factor=0.75, sliding_window=7,
             max_position_embeddings=256, original_max_position_embeddings=256, pad_token_id=0,
             bos_token_id=1, eos_token_id=2),
        torch.bfloat16,
        "Phi3ForCausalLM: fused qkv_proj and gate_up_proj, a partial rotary factor of 0.75 (as Phi-4-mini), "
        "a sliding window of 7, 8 query heads sharing 4 key/value heads, saved in bf16"),
    "hf_gemma2_tiny": (
        "Gemma2ForCausalLM", "Gemma2Config",
        dict(vocab_size=90, hidden_size=48, intermediate_size=72, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=20, sliding_window=5,
             attn_logit_softcapping=3.0, final_logit_softcapping=4.0, hidden_activation="gelu_pytorch_tanh",
             max_position_embeddings=256, tie_word_embeddings=False),
        torch.float32,
        "Gemma2ForCausalLM: attention scores scaled by query_pre_attn_scalar ** -0.5 and soft-capped at 3 "
        "(attn_logit_softcapping), a window of 5 on layers 0 and 2 (layer_types), four RMSNorms by 1 + weight a "
        "layer, embeddings times sqrt(48), a GeGLU MLP, logits capped at 4, 4 query heads of 16 sharing 2 "
        "key/value heads, an untied head"),
    "hf_smollm3_tiny": (
        "SmolLM3ForCausalLM", "SmolLM3Config",
        dict(vocab_size=90, hidden_size=48, intermediate_size=72, num_hidden_layers=4, num_attention_heads=6,
             num_key_value_heads=2, max_position_embeddings=256, no_rope_layer_interval=2, use_sliding_window=True,
             sliding_window=6, tie_word_embeddings=False, pad_token_id=0, bos_token_id=1, eos_token_id=2,
             rope_parameters={"rope_type": "default", "rope_theta": 100000.0}),
        torch.float32,
        "SmolLM3ForCausalLM: Llama's layers where layers 1 and 3 have no rotary embedding (NoPE, every "
        "no_rope_layer_interval-th: config.json's no_rope_layers 0) and a window of 6 (use_sliding_window on the "
        "NoPE layers, config.json's layer_types), 6 query heads sharing 2 key/value heads, an untied head"),
    "hf_cohere_tiny": (
        "CohereForCausalLM", "CohereConfig",
        dict(vocab_size=90, hidden_size=48, intermediate_size=72, num_hidden_layers=3, num_attention_heads=6,
             num_key_value_heads=2, use_qk_norm=True, logit_scale=0.37, tie_word_embeddings=False,
             max_position_embeddings=256, pad_token_id=0, bos_token_id=1, eos_token_id=2,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        torch.float32,
        "CohereForCausalLM (Command-R): attention and MLP in parallel from one mean-centred LayerNorm without a "
        "bias, per-head query and key norms (use_qk_norm, command-r-plus), a rotary embedding over interleaved pairs, "
        "6 query heads sharing 2 key/value heads, the logits times logit_scale 0.37, an untied head"),
    "hf_cohere2_tiny": (
        "Cohere2ForCausalLM", "Cohere2Config",
        dict(vocab_size=90, hidden_size=40, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=1, sliding_window=5, logit_scale=2.5, attention_bias=True,
             tie_word_embeddings=False, max_position_embeddings=256, pad_token_id=0, bos_token_id=1, eos_token_id=2,
             layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"]),
        torch.float32,
        "Cohere2ForCausalLM (Command R7B): a window of 5 and a rotary embedding on the sliding layers only (the full "
        "layers have no positional embedding), multi-query attention (4 query heads, 1 key/value head), biased "
        "q/k/v/o, the logits times 2.5, an untied head"),
    "hf_ministral_tiny": (
        "MinistralForCausalLM", "MinistralConfig",
        dict(vocab_size=90, hidden_size=48, intermediate_size=72, num_hidden_layers=3, num_attention_heads=6,
             num_key_value_heads=2, head_dim=8, max_position_embeddings=256, sliding_window=5,
             layer_types=["sliding_attention", "full_attention", "sliding_attention"]),
        torch.float32,
        "MinistralForCausalLM: Mistral's layers with a window of 5 on the layers layer_types lists as sliding "
        "(the first and last of 3), 6 query heads of 8 sharing 2 key/value heads, an untied head"),
    "hf_starcoder2_tiny": (
        "Starcoder2ForCausalLM", "Starcoder2Config",
        dict(vocab_size=90, hidden_size=48, intermediate_size=72, num_hidden_layers=2, num_attention_heads=6,
             num_key_value_heads=2, norm_epsilon=1e-5, use_bias=True, sliding_window=7,
             hidden_act="gelu_pytorch_tanh", max_position_embeddings=256, tie_word_embeddings=False,
             bos_token_id=1, eos_token_id=2, rope_parameters={"rope_type": "default", "rope_theta": 100000.0}),
        torch.float32,
        "Starcoder2ForCausalLM: LayerNorms with biases, biased q/k/v/o and c_fc/c_proj, 6 query heads sharing 2 "
        "key/value heads, a sliding window of 7 (shorter than the generated sequence), tanh GELU, an untied head"),
    "hf_gpt_bigcode_tiny": (
        "GPTBigCodeForCausalLM", "GPTBigCodeConfig",
        dict(vocab_size=84, n_embd=48, n_head=6, n_layer=2, n_positions=64, n_inner=None, multi_query=True,
             activation_function="gelu_pytorch_tanh", layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2),
        torch.float32,
        "GPTBigCodeForCausalLM (StarCoder, SantaCoder): learned positions, nn.Linear c_attn holding the 6 query "
        "heads then one key and one value head (multi-query), read by every query head from a one-head cache, "
        "tanh GELU, the head tied to wte"),
    "hf_gpt_neox_tiny": (
        "GPTNeoXForCausalLM", "GPTNeoXConfig",
        dict(vocab_size=88, hidden_size=48, num_attention_heads=6, num_hidden_layers=2, intermediate_size=80,
             layer_norm_eps=1e-5, use_parallel_residual=True, attention_bias=True, hidden_act="gelu",
             max_position_embeddings=256,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}),
        torch.float32,
        "GPTNeoXForCausalLM (Pythia): fused query_key_value laid out per head [heads, 3, head_size], rotary on the "
        "first quarter of each head of 8, attention and MLP in parallel from one input, exact GELU, untied embed_out"),
    "hf_phi_tiny": (
        "PhiForCausalLM", "PhiConfig",
        dict(vocab_size=88, hidden_size=48, intermediate_size=80, num_hidden_layers=3, num_attention_heads=6,
             num_key_value_heads=2, partial_rotary_factor=0.5, qk_layernorm=True, layer_norm_eps=1e-5,
             rope_theta=10000.0, hidden_act="gelu_new", tie_word_embeddings=False, max_position_embeddings=256),
        torch.float32,
        "PhiForCausalLM: attention and MLP in parallel from one LayerNorm, q/k/v/dense and head biases, a LayerNorm "
        "of each head's query and key (qk_layernorm), a rotary embedding over half of each head, 6 query heads "
        "sharing 2 key/value heads, tanh GELU MLP (fc1/fc2), final_layernorm, an untied head"),
    "hf_bloom_tiny": (
        "BloomForCausalLM", "BloomConfig",
        dict(vocab_size=88, hidden_size=48, n_layer=3, n_head=6, layer_norm_epsilon=1e-5,
             apply_residual_connection_post_layernorm=True),
        torch.float32,
        "BloomForCausalLM: ALiBi over 6 heads (not a power of two: 4 slopes from 2^-2, 2 from 2^-1's odd powers), "
        "a LayerNorm over the word embeddings, query_key_value laid out per head [heads, 3, head_dim], "
        "apply_residual_connection_post_layernorm, GELU (tanh), the head tied to the word embeddings"),
    "hf_opt_tiny": (
        "OPTForCausalLM", "OPTConfig",
        dict(vocab_size=88, hidden_size=48, word_embed_proj_dim=32, num_attention_heads=6, num_hidden_layers=3,
             ffn_dim=80, max_position_embeddings=64, do_layer_norm_before=False, activation_function="relu"),
        torch.float32,
        "OPTForCausalLM as opt-350m: post-norm layers without a final layer norm, a token embedding of 32 projected "
        "in to hidden 48 and out again (project_in, project_out), learned positions offset by 2, 6 heads of 8, "
        "biased q/k/v/out_proj and fc1/fc2, a ReLU MLP of 80, the head tied to embed_tokens"),
    "hf_opt_prenorm_tiny": (
        "OPTForCausalLM", "OPTConfig",
        dict(vocab_size=88, hidden_size=48, num_attention_heads=6, num_hidden_layers=2, ffn_dim=80,
             max_position_embeddings=64, activation_function="gelu"),
        torch.bfloat16,
        "OPTForCausalLM as opt-125m: pre-norm layers with a final layer norm, learned positions offset by 2, "
        "a GELU MLP, the head tied to embed_tokens, saved in bf16"),
    "hf_granite_tiny": (
        "GraniteForCausalLM", "GraniteConfig",
        dict(vocab_size=84, hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=6,
             num_key_value_heads=3, rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=True,
             embedding_multiplier=3.0, residual_multiplier=0.5, attention_multiplier=0.05, logits_scaling=2.5,
             max_position_embeddings=256),
        torch.float32,
        "GraniteForCausalLM: Llama with Granite's multipliers of the embeddings (3), of each attention and MLP "
        "output (0.5), the attention's scale (0.05 in place of 1 / sqrt(8)) and the logits' divisor (2.5), "
        "6 query heads sharing 3 key/value heads, tied embeddings"),
    "hf_olmo2_tiny": (
        "Olmo2ForCausalLM", "Olmo2Config",
        dict(vocab_size=80, hidden_size=48, intermediate_size=72, num_hidden_layers=3, num_attention_heads=6,
             num_key_value_heads=2, rms_norm_eps=1e-6, rope_theta=500000.0, tie_word_embeddings=False,
             max_position_embeddings=256),
        torch.float32,
        "Olmo2ForCausalLM: RMSNorms of the attention's and the MLP's outputs before the residual add (none before "
        "them), an RMSNorm of all query heads and of all key heads together, 6 query heads sharing 2 key/value "
        "heads, an untied head"),
    "hf_stablelm_tiny": (
        "StableLmForCausalLM", "StableLmConfig",
        dict(vocab_size=88, hidden_size=48, intermediate_size=80, num_hidden_layers=3, num_attention_heads=6,
             num_key_value_heads=2, layer_norm_eps=1e-5, use_qkv_bias=True, qk_layernorm=True,
             use_parallel_residual=True, tie_word_embeddings=False, max_position_embeddings=256,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}),
        torch.float32,
        "StableLmForCausalLM (as stablelm-2-12b): LayerNorms with biases, q/k/v biases (none on o_proj), a LayerNorm "
        "of its own per head of each query and key (q_layernorm.norms.{h}), a rotary embedding over the first quarter "
        "of each head of 8, attention and the SwiGLU MLP in parallel from input_layernorm, 6 query heads sharing 2 "
        "key/value heads, an untied head"),
    "hf_stablelm_sequential_tiny": (
        "StableLmForCausalLM", "StableLmConfig",
        dict(vocab_size=88, hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=6,
             num_key_value_heads=6, layer_norm_eps=1e-5, use_qkv_bias=True, qk_layernorm=False,
             use_parallel_residual=False, tie_word_embeddings=True, max_position_embeddings=256,
             rope_parameters={"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 0.5}),
        torch.bfloat16,
        "StableLmForCausalLM (as stablelm-2-1_6b): attention, then the MLP after post_attention_layernorm, q/k/v "
        "biases, a rotary embedding over half of each head, tied embeddings, saved in bf16"),
    "hf_gemma3_tiny": (
        "Gemma3ForCausalLM", "Gemma3TextConfig",
        dict(vocab_size=88, hidden_size=48, intermediate_size=80, num_hidden_layers=4, num_attention_heads=6,
             num_key_value_heads=2, head_dim=12, rms_norm_eps=1e-6, query_pre_attn_scalar=20, sliding_window=4,
             layer_types=["full_attention", "sliding_attention", "sliding_attention", "sliding_attention"],
             rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 100000.0},
                              "sliding_attention": {"rope_type": "default", "rope_theta": 1000.0}},
             tie_word_embeddings=True, max_position_embeddings=256),
        torch.float32,
        "Gemma3ForCausalLM: four RMSNorms by 1 + weight per layer, per-head q/k norms, scores scaled by "
        "query_pre_attn_scalar 20 ** -0.5 with head_dim 12, 6 query heads on 2 key/value heads, a sliding window of 4 "
        "on the layers layer_types lists, a rope base per kind of layer (linear x2 on full layers), GeGLU, tied"),
    "hf_gptj_tiny": (
        "GPTJForCausalLM", "GPTJConfig",
        dict(vocab_size=88, n_embd=48, n_head=6, n_layer=2, rotary_dim=4, n_inner=80, n_positions=256,
             layer_norm_epsilon=1e-5, activation_function="gelu_new", tie_word_embeddings=False,
             bos_token_id=None, eos_token_id=None),
        torch.float32,
        "GPTJForCausalLM (GPT-J 6B): attention and MLP in parallel from one LayerNorm (ln_1), q/k/v/out_proj "
        "without biases, a rotary embedding over the first 4 of each head of 8 turning interleaved pairs "
        "(rotate_every_two), tanh GELU MLP (fc_in/fc_out) with biases, ln_f, an untied head with a bias"),
    "hf_falcon_tiny": (
        "FalconForCausalLM", "FalconConfig",
        dict(vocab_size=88, hidden_size=48, num_hidden_layers=3, num_attention_heads=6, num_kv_heads=2,
             new_decoder_architecture=True, bias=False, layer_norm_epsilon=1e-5, ffn_hidden_size=80,
             tie_word_embeddings=False, max_position_embeddings=256,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        torch.float32,
        "FalconForCausalLM in Falcon-40B's new_decoder_architecture: query_key_value per key/value group "
        "[2 groups, 3 query heads + key + value, head_dim 8], 6 query heads sharing 2 key/value heads, parallel "
        "attention and MLP through two LayerNorms (ln_attn, ln_mlp), no biases, ffn_hidden_size 80, exact GELU, "
        "rotary over the whole head, an untied lm_head"),
    "hf_falcon_mq_tiny": (
        "FalconForCausalLM", "FalconConfig",
        dict(vocab_size=88, hidden_size=48, num_hidden_layers=3, num_attention_heads=6, multi_query=True,
             parallel_attn=True, bias=False, layer_norm_epsilon=1e-5, max_position_embeddings=256,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        torch.float32,
        "FalconForCausalLM as Falcon-7B: multi_query (query_key_value holds every query head, then one key and one "
        "value head), attention and MLP in parallel from one input_layernorm, no biases, the head tied to "
        "word_embeddings"),
    "hf_gpt2_tiny": (
        "GPT2LMHeadModel", "GPT2Config",
        dict(vocab_size=84, n_embd=48, n_head=4, n_layer=2, n_positions=64, n_inner=72,
             activation_function="gelu_new", scale_attn_by_inverse_layer_idx=True, layer_norm_epsilon=1e-5),
        torch.float16,
        "GPT2LMHeadModel: learned positions, Conv1D layers ([in, out] weights), fused c_attn, tanh GELU, "
        "scores scaled by the inverse layer index too, the head tied to wte, n_inner not 4 x n_embd, saved in f16"),
}


def save_checkpoint(name, model, saved_dtype):
    """The case's folder, emptied, with checkpoint/ as save_pretrained writes it."""
    case = os.path.join(CASES, name)
    shutil.rmtree(case, ignore_errors=True)
    os.makedirs(os.path.join(case, "expected"))
    model.to(saved_dtype).save_pretrained(os.path.join(case, "checkpoint"))
    return case


def write_case(case, reproduces, saved_dtype, inputs, outputs, generation=None, tolerance=None):
    for input_name, value in inputs.items():
        np.save(os.path.join(case, input_name + ".npy"), value)
    for output_name, value in outputs.items():
        np.save(os.path.join(case, "expected", output_name + ".npy"), value)
    spec = {
        "name": os.path.basename(case),
        "reproduces": "transformers " + reproduces,
        "checkpoint": "checkpoint/ (save_pretrained, " + str(saved_dtype).replace("torch.", "") +
                      "), compiled with einc --hf",
        "inputs": {k: {"dtype": str(v.dtype), "shape": list(v.shape)} for k, v in inputs.items()},
        "outputs": {k: list(v.shape) for k, v in outputs.items()},
        "tolerance": dict({"atol": 1e-4, "rtol": 1e-3,
                           "rule": "|got - expected| <= atol + rtol * |expected| for every element"},
                          **(tolerance or {})),
        "expected_computed_in": "float64 (transformers " + transformers.__version__ + ") on the checkpoint as "
                                "from_pretrained loads it, stored as float32",
    }
    with open(os.path.join(case, "case.json"), "w") as out:
        json.dump(spec, out, indent=2)
        out.write("\n")
    if generation is not None:
        with open(os.path.join(case, "generation.json"), "w") as out:
            json.dump(generation, out, indent=2)
            out.write("\n")


def save_word_tokenizer(folder, vocab_size):
    """tokenizer.json of the words w0 .. w{vocab_size - 1}, one id each, decoded with spaces between: text in and
    out of a checkpoint's decoder (ein.from_pretrained's generate(text), the README's example)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    tokenizer = Tokenizer(models.WordLevel({f"w{i}": i for i in range(vocab_size)}, unk_token="w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    tokenizer.save(os.path.join(folder, "tokenizer.json"))


def decoder_case(name, spec):
    class_name, config_name, config, saved_dtype, reproduces = spec
    torch.manual_seed(0)
    config = getattr(transformers, config_name)(**config)
    case = save_checkpoint(name, randomize(getattr(transformers, class_name)(config).eval(), seed=0), saved_dtype)
    save_word_tokenizer(os.path.join(case, "checkpoint"), config.vocab_size)
    # The oracle is transformers on the folder as saved: float64 logits, float32 generation.
    model = getattr(transformers, class_name).from_pretrained(os.path.join(case, "checkpoint"),
                                                              dtype=torch.float32).eval()
    prompt = torch.randint(0, config.vocab_size, (1, PROMPT_LENGTH), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        # Every prompt token attends (generate would mask those equal to the pad token otherwise).
        tokens = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=NEW_TOKENS,
                                do_sample=False, num_beams=1, pad_token_id=0, eos_token_id=None)[0, PROMPT_LENGTH:]
        logits = model.double()(prompt).logits.float()
    write_case(case, reproduces, saved_dtype, {"input_ids": prompt.numpy()}, {"logits": logits.numpy()},
               generation={"prompt": prompt[0].tolist(), "greedy": tokens.tolist(),
                           "computed_by": "transformers " + transformers.__version__ +
                                          " generate(do_sample=False), float32"},
               # bf16 rounds the weights, int8 each activation row to 8 bits: within 1.5% and 8% of the
               # largest logit (Gemma's, whose scaled embeddings and tied head make the largest, 7.4%).
               tolerance={"bf16_atol": round(0.015 * float(logits.abs().max()), 3),
                          "int8_atol": round(0.08 * float(logits.abs().max()), 3)})


# Vision and vision-language models: an image classifier and CLIP (contrastive text and image towers).
# name -> (transformers class name, config class name, config, saved dtype, what it exercises)
VISION = {
    "hf_vit_tiny": (
        "ViTForImageClassification", "ViTConfig",
        dict(image_size=32, patch_size=8, hidden_size=48, num_attention_heads=3, num_hidden_layers=2,
             intermediate_size=80, num_labels=5, qkv_bias=True, hidden_act="gelu", layer_norm_eps=1e-12),
        torch.float32,
        "ViTForImageClassification: a 4 x 4 grid of 8 x 8 patches and a [CLS] token, 3 heads of 16, q/k/v biases, "
        "an MLP of 80 (not 4 x hidden) with exact GELU, 5 labels (config.json's id2label), the [CLS] token "
        "through the final LayerNorm into the classifier"),
    "hf_clip_tiny": (
        "CLIPModel", "CLIPConfig",
        dict(text_config=dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_attention_heads=2,
                              num_hidden_layers=2, max_position_embeddings=16, bos_token_id=0, pad_token_id=1,
                              eos_token_id=2),
             vision_config=dict(image_size=24, patch_size=8, hidden_size=40, intermediate_size=56,
                                num_attention_heads=4, num_hidden_layers=2),
             projection_dim=24),
        torch.bfloat16,
        "CLIPModel: a causal text tower pooled at the end-of-text token (eos_token_id 2: the highest id), a vision "
        "tower with a class embedding, pre_layrnorm and post_layernorm on a 3 x 3 grid of 8 x 8 patches, towers of "
        "different widths (32 and 40) projected to 24, quick GELU, unit-length embeddings, logits scaled by "
        "exp(logit_scale); saved in bf16"),
}
IMAGES = 2
TEXTS, TEXT_LENGTH = 3, 7


def scale_patch_embedding(weight):
    """randomize() gives embeddings unit variance; a patch embedding is a projection of channels x patch x patch
    pixels, so scaled by its fan-in as well, its patches are as large as the class token and the positions."""
    with torch.no_grad():
        weight /= np.sqrt(weight[0].numel() / weight.shape[-1])


def vision_case(name, spec):
    class_name, config_name, config, saved_dtype, reproduces = spec
    torch.manual_seed(0)
    config = getattr(transformers, config_name)(**config)
    model = getattr(transformers, class_name)(config).eval()
    if class_name == "CLIPModel":
        # randomize() reads each tensor's last axis, which logit_scale (a scalar) lacks: its parts one by one,
        # and a logit scale other than the initial one (exp(1.2), about 3.3).
        for seed, part in enumerate([model.text_model, model.vision_model, model.text_projection,
                                     model.visual_projection]):
            randomize(part, seed=seed)
        with torch.no_grad():
            model.logit_scale.fill_(1.2)
        scale_patch_embedding(model.vision_model.embeddings.patch_embedding.weight)
        vision = config.vision_config
    else:
        randomize(model, seed=0)
        scale_patch_embedding(model.vit.embeddings.patch_embeddings.projection.weight)
        vision = config
    case = save_checkpoint(name, model, saved_dtype)
    # The oracle is transformers on the folder as saved, in float64.
    model = getattr(transformers, class_name).from_pretrained(os.path.join(case, "checkpoint"),
                                                              dtype=torch.float32).eval().double()
    generator = torch.Generator().manual_seed(1)
    inputs = {"pixel_values": torch.randn(IMAGES, vision.num_channels, vision.image_size, vision.image_size,
                                          generator=generator)}
    if class_name == "CLIPModel":
        # No padding: every text is TEXT_LENGTH tokens, its end-of-text token where its highest id is.
        inputs = {"input_ids": torch.randint(0, config.text_config.vocab_size, (TEXTS, TEXT_LENGTH),
                                             generator=generator), **inputs}
    with torch.no_grad():
        result = model(**{k: v.double() if v.is_floating_point() else v for k, v in inputs.items()})
    if class_name == "CLIPModel":
        outputs = {key: getattr(result, key) for key in ["logits_per_image", "logits_per_text", "text_embeds",
                                                         "image_embeds"]}
    else:
        outputs = {"logits": result.logits}
    outputs = {k: np.ascontiguousarray(v.float().numpy()) for k, v in outputs.items()}  # logits_per_image: a transpose
    largest = max(float(np.abs(v).max()) for v in outputs.values())
    write_case(case, reproduces, saved_dtype, {k: v.numpy() for k, v in inputs.items()}, outputs,
               # As the decoders': bf16 and int8 within 1.5% and 8% of the largest output.
               tolerance={"bf16_atol": round(0.015 * largest, 3), "int8_atol": round(0.08 * largest, 3)})
    # The model files' ranged dims (the batches, the texts' length): RangedConformance also runs the artifact at
    # other values of them, against static compiles.
    ranged = {"bt": [1, 64], "t": [1, config.text_config.max_position_embeddings], "bi": [1, 64]} \
        if class_name == "CLIPModel" else {"b": [1, 64]}
    with open(os.path.join(case, "case.json")) as file:
        written = json.load(file)
    written["ranged"] = ranged
    with open(os.path.join(case, "case.json"), "w") as out:
        json.dump(written, out, indent=2)
        out.write("\n")


# Encoders: name -> (class name, config class name, config, saved dtype, what it exercises).
TEXT_ENCODERS = {
    "hf_bert_tiny": (
        "BertModel", "BertConfig",
        dict(vocab_size=70, hidden_size=36, num_hidden_layers=2, num_attention_heads=3, intermediate_size=52,
             max_position_embeddings=40, type_vocab_size=2, layer_norm_eps=1e-12, hidden_act="gelu"),
        torch.float32,
        "BertModel: token, position and token-type embeddings, post-norm layers, exact GELU, padding masked out, "
        "the pooler's tanh of the first token; a batch of two texts, the second padded, two segments"),
    "hf_roberta_tiny": (
        "RobertaModel", "RobertaConfig",
        dict(vocab_size=66, hidden_size=40, num_hidden_layers=2, num_attention_heads=5, intermediate_size=56,
             max_position_embeddings=32, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1),
        torch.bfloat16,
        "RobertaModel: positions counted over the unpadded tokens from pad_token_id + 1, one token type, "
        "a batch of two texts, the second padded, saved in bf16"),
    "hf_distilbert_tiny": (
        "DistilBertModel", "DistilBertConfig",
        dict(vocab_size=70, dim=36, n_layers=2, n_heads=3, hidden_dim=52, max_position_embeddings=40,
             activation="gelu"),
        torch.float32,
        "DistilBertModel: token and position embeddings (no token types), post-norm layers (sa_layer_norm, "
        "output_layer_norm) with LayerNorm eps 1e-12, 3 heads of 12, exact GELU, padding masked out, no pooler; "
        "a batch of two texts, the second padded"),
    "hf_mpnet_tiny": (
        "MPNetModel", "MPNetConfig",
        dict(vocab_size=90, hidden_size=48, num_hidden_layers=2, num_attention_heads=6, intermediate_size=80,
             relative_attention_num_buckets=32, max_position_embeddings=64, layer_norm_eps=1e-5, hidden_act="gelu",
             pad_token_id=1),
        torch.float32,
        "MPNetModel: positions counted over the unpadded tokens from 2 (padding_idx 1), no token types, a learned "
        "bias per head and relative position bucket (bidirectional T5 buckets: exact below 8, logarithmic beyond) "
        "in encoder.relative_attention_bias, shared by both layers and added to the scaled scores with the padding "
        "mask, 6 heads of 8, post-norm layers, exact GELU, the pooler's tanh of the first token; three texts of 40 "
        "tokens, two padded at the end (distances to 39: the logarithmic buckets)",
        [40, 27, 9]),
    # The task heads over the encoders (each architecture's head as transformers builds it).
    "hf_bert_mlm_tiny": (
        "BertForMaskedLM", "BertConfig",
        dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
             max_position_embeddings=32, type_vocab_size=2, hidden_act="gelu_new"),
        torch.float32,
        "BertForMaskedLM (bert-base-uncased's class): the encoder without a pooler, then cls.predictions' dense, "
        "hidden_act (tanh GELU here, as in the layers), LayerNorm and the decoder tied to the word embeddings with "
        "cls.predictions.bias: logits over the vocabulary for every token"),
    "hf_bert_seqcls_tiny": (
        "BertForSequenceClassification", "BertConfig",
        dict(vocab_size=60, hidden_size=36, num_hidden_layers=2, num_attention_heads=3, intermediate_size=40,
             max_position_embeddings=32, type_vocab_size=2, num_labels=3),
        torch.bfloat16,
        "BertForSequenceClassification (cross-encoder rerankers, fine-tuned classifiers): the pooler's tanh of the "
        "first token into the classifier, 3 labels (config.json's id2label), saved in bf16"),
    "hf_bert_tokcls_tiny": (
        "BertForTokenClassification", "BertConfig",
        dict(vocab_size=62, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=44,
             max_position_embeddings=32, type_vocab_size=2, num_labels=5),
        torch.float32,
        "BertForTokenClassification (NER taggers): the encoder without a pooler, the classifier over every token, "
        "5 labels"),
    "hf_roberta_mlm_tiny": (
        "RobertaForMaskedLM", "RobertaConfig",
        dict(vocab_size=66, hidden_size=40, num_hidden_layers=2, num_attention_heads=5, intermediate_size=56,
             max_position_embeddings=32, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1,
             tie_word_embeddings=False),
        torch.float32,
        "RobertaForMaskedLM: lm_head's dense, exact GELU, layer_norm and a decoder of its own (tie_word_embeddings "
        "false) with lm_head.bias"),
    "hf_xlm_roberta_seqcls_tiny": (
        "XLMRobertaForSequenceClassification", "XLMRobertaConfig",
        dict(vocab_size=70, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
             max_position_embeddings=32, type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1, num_labels=4),
        torch.float32,
        "XLMRobertaForSequenceClassification: no pooler; the classifier's dense and tanh on the first token, then "
        "its out_proj, 4 labels"),
    "hf_distilbert_mlm_tiny": (
        "DistilBertForMaskedLM", "DistilBertConfig",
        dict(vocab_size=64, dim=32, n_layers=2, n_heads=4, hidden_dim=48, max_position_embeddings=32,
             activation="gelu"),
        torch.float32,
        "DistilBertForMaskedLM: vocab_transform, the activation, vocab_layer_norm (eps 1e-12) and vocab_projector "
        "tied to the word embeddings with a bias of its own"),
    "hf_distilbert_seqcls_tiny": (
        "DistilBertForSequenceClassification", "DistilBertConfig",
        dict(vocab_size=60, dim=36, n_layers=2, n_heads=3, hidden_dim=40, max_position_embeddings=32,
             activation="gelu", num_labels=2),
        torch.float32,
        "DistilBertForSequenceClassification (the sentiment pipeline's default model's class): the first token "
        "through pre_classifier and ReLU into the classifier"),
    "hf_distilbert_tokcls_tiny": (
        "DistilBertForTokenClassification", "DistilBertConfig",
        dict(vocab_size=60, dim=32, n_layers=2, n_heads=2, hidden_dim=40, max_position_embeddings=32,
             activation="relu", num_labels=6),
        torch.float32,
        "DistilBertForTokenClassification: ReLU layers, the classifier over every token, 6 labels"),
    "hf_bert_qa_tiny": (
        "BertForQuestionAnswering", "BertConfig",
        dict(vocab_size=58, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=40,
             max_position_embeddings=32, type_vocab_size=2),
        torch.float32,
        "BertForQuestionAnswering (extractive QA over a question and a passage, two segments): no pooler; "
        "qa_outputs over every token, split into start_logits and end_logits"),
    "hf_distilbert_qa_tiny": (
        "DistilBertForQuestionAnswering", "DistilBertConfig",
        dict(vocab_size=60, dim=32, n_layers=2, n_heads=4, hidden_dim=44, max_position_embeddings=32,
             activation="gelu"),
        torch.float32,
        "DistilBertForQuestionAnswering (the question-answering pipeline's default model's class): qa_outputs "
        "over every token, split into start_logits and end_logits"),
    "hf_albert_tiny": (
        "AlbertForMaskedLM", "AlbertConfig",
        dict(vocab_size=60, embedding_size=32, hidden_size=48, num_hidden_layers=4, num_hidden_groups=2,
             inner_group_num=1, num_attention_heads=3, intermediate_size=56, max_position_embeddings=32,
             type_vocab_size=2, hidden_act="gelu_new"),
        torch.float32,
        "AlbertForMaskedLM (albert-base-v2's class): embeddings of 32 mapped to the hidden 48, 4 layer steps "
        "sharing 2 groups' weights (steps 0-1 the first, 2-3 the second), no pooler; predictions' dense to the "
        "embedding size, tanh GELU, LayerNorm and the decoder tied to the word embeddings with predictions.bias"),
    "hf_albert_seqcls_tiny": (
        "AlbertForSequenceClassification", "AlbertConfig",
        dict(vocab_size=56, embedding_size=24, hidden_size=40, num_hidden_layers=3, num_hidden_groups=1,
             inner_group_num=2, num_attention_heads=4, intermediate_size=48, max_position_embeddings=32,
             type_vocab_size=2, hidden_act="gelu", num_labels=3),
        torch.float32,
        "AlbertForSequenceClassification: one group of two layers run at each of 3 steps, exact GELU, the "
        "pooler's tanh of the first token into the classifier, 3 labels"),
    "hf_electra_tiny": (
        "ElectraForPreTraining", "ElectraConfig",
        dict(vocab_size=64, embedding_size=32, hidden_size=48, num_hidden_layers=2, num_attention_heads=3,
             intermediate_size=56, max_position_embeddings=32, type_vocab_size=2, hidden_act="gelu"),
        torch.float32,
        "ElectraForPreTraining (google/electra-*-discriminator's class): embeddings of 32 projected to the hidden "
        "48 by embeddings_project, BERT's layers, no pooler; the discriminator's dense, GELU and dense_prediction: "
        "a score per token"),
    "hf_electra_seqcls_tiny": (
        "ElectraForSequenceClassification", "ElectraConfig",
        dict(vocab_size=60, embedding_size=32, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=40, max_position_embeddings=32, type_vocab_size=2, num_labels=1),
        torch.bfloat16,
        "ElectraForSequenceClassification (cross-encoder/ms-marco-electra-base's class): embeddings as wide as "
        "the layers (no projection), the classifier's dense, exact GELU and out_proj on the first token, one label "
        "(a reranker's score), saved in bf16"),
    "hf_electra_mlm_tiny": (
        "ElectraForMaskedLM", "ElectraConfig",
        dict(vocab_size=56, embedding_size=32, hidden_size=40, num_hidden_layers=2, num_attention_heads=2,
             intermediate_size=48, max_position_embeddings=32, type_vocab_size=2, hidden_act="gelu_new"),
        torch.float32,
        "ElectraForMaskedLM (google/electra-*-generator's class): tanh-GELU layers, the generator's dense to the "
        "embedding size, exact GELU, LayerNorm and generator_lm_head tied to the word embeddings"),
    "hf_modernbert_tiny": (
        "ModernBertForMaskedLM", "ModernBertConfig",
        dict(vocab_size=90, hidden_size=48, num_hidden_layers=4, num_attention_heads=3, intermediate_size=40,
             max_position_embeddings=64, global_attn_every_n_layers=2, local_attention=6, pad_token_id=0,
             bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2, global_rope_theta=160000.0,
             local_rope_theta=10000.0),
        torch.float32,
        "ModernBertForMaskedLM (answerdotai/ModernBERT-base's class): no positions but rotary embeddings (theta "
        "160000 on global layers, 10000 on local ones), pre-norm layers (layer 0 without attn_norm) with a fused "
        "Wqkv and a gated GELU MLP, layers 1 and 3 local (keys at most 3 positions away), LayerNorms without "
        "biases; the prediction head (dense, GELU, norm) and the decoder tied to the token embeddings with its "
        "bias; three texts of 14, 10 and 5 tokens (padding queries that see no token in a local layer)",
        [14, 10, 5]),
    "hf_modernbert_seqcls_tiny": (
        "ModernBertForSequenceClassification", "ModernBertConfig",
        dict(vocab_size=80, hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=48,
             max_position_embeddings=64, global_attn_every_n_layers=3, local_attention=4, pad_token_id=0,
             bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2, classifier_pooling="mean", num_labels=3, norm_bias=True, attention_bias=True, mlp_bias=True),
        torch.float32,
        "ModernBertForSequenceClassification: biases everywhere, layers 1 and 2 local (2 positions either side), "
        "the mean of the unpadded tokens through the prediction head into the classifier, 3 labels",
        [11, 6]),
    "hf_mpnet_mlm_tiny": (
        "MPNetForMaskedLM", "MPNetConfig",
        dict(vocab_size=72, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
             relative_attention_num_buckets=32, max_position_embeddings=48, layer_norm_eps=1e-5, pad_token_id=1),
        torch.float32,
        "MPNetForMaskedLM (microsoft/mpnet-base's class): no pooler; lm_head's dense, exact GELU, layer_norm and the "
        "decoder tied to the word embeddings with lm_head.bias"),
    "hf_mpnet_seqcls_tiny": (
        "MPNetForSequenceClassification", "MPNetConfig",
        dict(vocab_size=70, hidden_size=36, num_hidden_layers=2, num_attention_heads=3, intermediate_size=44,
             relative_attention_num_buckets=32, max_position_embeddings=48, layer_norm_eps=1e-5, pad_token_id=1,
             num_labels=3),
        torch.bfloat16,
        "MPNetForSequenceClassification: no pooler; the classifier's dense and tanh on the first token, then its "
        "out_proj, 3 labels, saved in bf16"),
    "hf_mpnet_qa_tiny": (
        "MPNetForQuestionAnswering", "MPNetConfig",
        dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=40,
             relative_attention_num_buckets=32, max_position_embeddings=48, layer_norm_eps=1e-5, pad_token_id=1),
        torch.float32,
        "MPNetForQuestionAnswering: no pooler; qa_outputs over every token, split into start_logits and "
        "end_logits"),
}


def text_encoder_case(name, spec):
    # An optional sixth item: each text's length, the first unpadded (two texts of 7 and 4 tokens by default).
    class_name, config_name, config, saved_dtype, reproduces, *lengths = spec
    lengths = lengths[0] if lengths else [7, 4]
    torch.manual_seed(0)
    config = getattr(transformers, config_name)(**config)
    case = save_checkpoint(name, randomize(getattr(transformers, class_name)(config).eval(), seed=0), saved_dtype)
    model = getattr(transformers, class_name).from_pretrained(os.path.join(case, "checkpoint"),
                                                              dtype=torch.float64).eval()
    generator = torch.Generator().manual_seed(1)
    pad = config.pad_token_id if config.pad_token_id is not None else 0
    ids = torch.randint(pad + 1, config.vocab_size, (len(lengths), lengths[0]), generator=generator)
    mask = torch.ones_like(ids)
    for row, length in enumerate(lengths):
        mask[row, length:] = 0
        ids[row, length:] = pad
    inputs = {"input_ids": ids, "attention_mask": mask}
    type_vocab_size = getattr(config, "type_vocab_size", None)  # MPNet has no token types
    if type_vocab_size is not None:
        inputs["token_type_ids"] = torch.zeros_like(ids)
        if type_vocab_size > 1:
            inputs["token_type_ids"][:, 3:] = 1
    # The base model's outputs (a pooler where transformers builds one: not DistilBERT's, nor under most
    # heads), and a head's logits.
    with torch.no_grad():
        out = model.base_model(**inputs)
        head = model(**inputs) if model.base_model is not model else {}
    outputs = {"last_hidden_state": out.last_hidden_state.float().numpy()}
    if getattr(out, "pooler_output", None) is not None:
        outputs["pooler_output"] = out.pooler_output.float().numpy()
    for name in ("logits", "start_logits", "end_logits"):  # a question answerer's are the last two
        if name in head:
            outputs[name] = head[name].float().numpy()
    largest = max(float(np.abs(v).max()) for v in outputs.values())
    write_case(case, reproduces, saved_dtype, {k: v.numpy() for k, v in inputs.items()}, outputs,
               tolerance={"bf16_atol": round(0.015 * largest, 3), "int8_atol": round(0.08 * largest, 3)})


# Encoder-decoders: name -> (class name, config class name, config, saved dtype, what it exercises).
SEQ2SEQ = {
    "hf_whisper_tiny": (
        "WhisperForConditionalGeneration", "WhisperConfig",
        dict(vocab_size=96, d_model=48, encoder_layers=2, decoder_layers=2, encoder_attention_heads=3,
             decoder_attention_heads=3, encoder_ffn_dim=80, decoder_ffn_dim=72, num_mel_bins=20,
             max_source_positions=24, max_target_positions=64, activation_function="gelu", pad_token_id=0,
             bos_token_id=1, eos_token_id=2, decoder_start_token_id=1, begin_suppress_tokens=None,
             suppress_tokens=None),
        torch.float32,
        "WhisperForConditionalGeneration: 20 mel bins through two convolutions (the second with stride 2) and "
        "exact GELU, learned positions for the encoder's 24 rows (48 frames, the length transformers requires) and "
        "the decoder's 64, pre-norm layers of 3 heads of 16 with k_proj unbiased, cross-attention over the "
        "encoder's output, MLPs of 80 (encoder) and 72 (decoder), the head tied to the token embedding"),
    "hf_t5_tiny": (
        "T5ForConditionalGeneration", "T5Config",
        dict(vocab_size=72, d_model=40, d_kv=12, d_ff=56, num_layers=2, num_decoder_layers=3, num_heads=3,
             relative_attention_num_buckets=32, relative_attention_max_distance=20, feed_forward_proj="relu",
             layer_norm_epsilon=1e-6, decoder_start_token_id=0),
        torch.float32,
        "T5ForConditionalGeneration (T5 v1.0): relative position buckets (bidirectional in the encoder, causal in "
        "the decoder; 32 buckets, max distance 20, shorter than the input) from the first block of each stack, "
        "unscaled attention, 3 heads of d_kv 12 (inner 36, not d_model 40), T5's LayerNorm, a ReLU MLP, 2 encoder "
        "and 3 decoder blocks, the input's end padded (attention_mask 0), the tied head after the decoder's output "
        "scaled by d_model ** -0.5"),
    "hf_flan_t5_tiny": (
        "T5ForConditionalGeneration", "T5Config",
        dict(vocab_size=80, d_model=32, d_kv=10, d_ff=48, num_layers=3, num_decoder_layers=2, num_heads=4,
             relative_attention_num_buckets=16, relative_attention_max_distance=12, feed_forward_proj="gated-gelu",
             layer_norm_epsilon=1e-6, decoder_start_token_id=0),
        torch.bfloat16,
        "T5ForConditionalGeneration as Flan-T5 and T5 v1.1 are published: a gated-GELU MLP (wi_0, wi_1, tanh "
        "GELU), an untied lm_head (config.json's tie_word_embeddings false, lm_head.weight beside shared.weight, "
        "no output scaling), 16 buckets with max distance 12, 4 heads of d_kv 10, 3 encoder and 2 decoder blocks, "
        "saved in bf16"),
    "hf_mt5_tiny": (
        "MT5ForConditionalGeneration", "MT5Config",
        dict(vocab_size=88, d_model=36, d_kv=12, d_ff=44, num_layers=2, num_decoder_layers=2, num_heads=3,
             relative_attention_num_buckets=32, relative_attention_max_distance=20, feed_forward_proj="gated-gelu",
             layer_norm_epsilon=1e-6, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1),
        torch.float32,
        "MT5ForConditionalGeneration (mT5, the multilingual T5 v1.1): a gated-GELU MLP, an untied lm_head as "
        "google/mt5-* are published, 3 heads of d_kv 12, 2 encoder and 2 decoder blocks"),
    "hf_bart_tiny": (
        "BartForConditionalGeneration", "BartConfig",
        dict(vocab_size=84, d_model=36, encoder_layers=2, decoder_layers=3, encoder_attention_heads=3,
             decoder_attention_heads=4, encoder_ffn_dim=60, decoder_ffn_dim=52, max_position_embeddings=48,
             activation_function="gelu", scale_embedding=False, pad_token_id=1, bos_token_id=0, eos_token_id=2,
             decoder_start_token_id=2),
        torch.float32,
        "BartForConditionalGeneration: post-norm layers, learned positions offset by 2 and layernorm_embedding in "
        "both stacks, 3 encoder heads of 12 and 4 decoder heads of 9, exact GELU, biased projections, the head tied "
        "to the shared embedding plus final_logits_bias, the input's end padded (attention_mask 0)"),
    "hf_marian_tiny": (
        "MarianMTModel", "MarianConfig",
        dict(vocab_size=76, d_model=40, encoder_layers=3, decoder_layers=2, encoder_attention_heads=4,
             decoder_attention_heads=5, encoder_ffn_dim=56, decoder_ffn_dim=64, max_position_embeddings=48,
             activation_function="swish", scale_embedding=True, pad_token_id=75, eos_token_id=0,
             decoder_start_token_id=75),
        torch.float32,
        "MarianMTModel (OPUS-MT): fixed sinusoidal positions (sines, then cosines), embeddings scaled by "
        "sqrt(d_model), no layernorm_embedding, post-norm layers, SiLU (swish), the decoder starting from the pad "
        "token, final_logits_bias"),
    "hf_mbart_tiny": (
        "MBartForConditionalGeneration", "MBartConfig",
        dict(vocab_size=80, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
             decoder_attention_heads=2, encoder_ffn_dim=48, decoder_ffn_dim=40, max_position_embeddings=48,
             activation_function="relu", scale_embedding=True, pad_token_id=1, bos_token_id=0, eos_token_id=2,
             decoder_start_token_id=2),
        torch.bfloat16,
        "MBartForConditionalGeneration: pre-norm layers with a final layer norm in each stack, learned positions "
        "offset by 2, layernorm_embedding, embeddings scaled by sqrt(d_model), ReLU, saved in bf16"),
    "hf_m2m100_tiny": (
        "M2M100ForConditionalGeneration", "M2M100Config",
        dict(vocab_size=70, d_model=36, encoder_layers=2, decoder_layers=3, encoder_attention_heads=3,
             decoder_attention_heads=6, encoder_ffn_dim=44, decoder_ffn_dim=56, max_position_embeddings=48,
             activation_function="relu", scale_embedding=True, pad_token_id=1, bos_token_id=0, eos_token_id=2,
             decoder_start_token_id=2),
        torch.float32,
        "M2M100ForConditionalGeneration (M2M100, NLLB): fairseq's sinusoidal positions counted from "
        "pad_token_id + 1, embeddings scaled by sqrt(d_model), pre-norm layers with a final layer norm in each "
        "stack, ReLU, the head tied to the shared embedding without a bias, the input's end padded"),
}
ENCODER_LENGTH, DECODER_PROMPT, SEQ2SEQ_NEW_TOKENS = 11, 6, 32


def untie_head(folder, generator):
    """The checkpoint as Flan-T5's and T5 v1.1's are published (before transformers 5, which ties T5's head and
    writes scale_decoder_outputs): config.json's tie_word_embeddings false and lm_head.weight of its own."""
    import safetensors.torch
    path = os.path.join(folder, "config.json")
    with open(path) as file:
        config = json.load(file)
    config.pop("scale_decoder_outputs", None)
    config["tie_word_embeddings"] = False
    with open(path, "w") as out:
        json.dump(config, out, indent=2, sort_keys=True)
        out.write("\n")
    path = os.path.join(folder, "model.safetensors")
    weights = safetensors.torch.load_file(path)
    shared = weights["shared.weight"]
    head = torch.randn(shared.shape, generator=generator, dtype=torch.float64) / np.sqrt(shared.shape[-1])
    weights["lm_head.weight"] = head.to(shared.dtype)
    safetensors.torch.save_file(weights, path, metadata={"format": "pt"})


def seq2seq_case(name, spec):
    class_name, config_name, config, saved_dtype, reproduces = spec
    torch.manual_seed(0)
    config = getattr(transformers, config_name)(**config)
    model = randomize(getattr(transformers, class_name)(config).eval(), seed=0)
    whisper = class_name == "WhisperForConditionalGeneration"
    if not whisper:
        # The decoder blocks' output projections (attention's and the MLP's) 4 times larger, so that the blocks and
        # not the token's own embedding lead the residual (a tiny random one otherwise repeats its last token); T5's
        # shared embedding as large as an embedding too (randomize() gave it the scale of the lm_head tied to it,
        # written last).
        t5 = config_name in ("T5Config", "MT5Config")
        prefix, outputs = ("decoder.", ("o.weight", "wo.weight")) if t5 else \
            ("model.decoder.layers.", ("out_proj.weight", "fc2.weight"))
        with torch.no_grad():
            if t5:
                model.shared.weight.copy_(torch.randn(model.shared.weight.shape, dtype=torch.float64,
                                                      generator=torch.Generator().manual_seed(2)))
            for parameter_name, parameter in model.named_parameters():
                if parameter_name.startswith(prefix) and parameter_name.endswith(outputs):
                    parameter.mul_(4)
    if whisper:
        # The convolutions' fan-in is channels x kernel (randomize() reads the kernel's axis alone).
        scale_patch_embedding(model.model.encoder.conv1.weight)
        scale_patch_embedding(model.model.encoder.conv2.weight)
    case = save_checkpoint(name, model, saved_dtype)
    generator = torch.Generator().manual_seed(1)
    if config_name in ("T5Config", "MT5Config") and config.feed_forward_proj.startswith("gated"):
        untie_head(os.path.join(case, "checkpoint"), generator)
    # The oracle is transformers on the folder as saved: float64 logits, float32 generation.
    model = getattr(transformers, class_name).from_pretrained(os.path.join(case, "checkpoint"),
                                                              dtype=torch.float32).eval()
    start = config.decoder_start_token_id
    if whisper:
        # The whole window transformers requires: 2 x max_source_positions frames.
        encoder_inputs = {"input_features": torch.randn(1, config.num_mel_bins, 2 * config.max_source_positions,
                                                        generator=generator)}
    else:
        ids = torch.randint(2, config.vocab_size, (1, ENCODER_LENGTH), generator=generator)
        mask = torch.ones_like(ids)
        mask[0, ENCODER_LENGTH - 3:] = 0     # the input's end is padding
        ids[0, ENCODER_LENGTH - 3:] = config.pad_token_id
        encoder_inputs = {"input_ids": ids, "attention_mask": mask}
    prompt = torch.cat([torch.tensor([[start]]),
                        torch.randint(3, config.vocab_size, (1, DECODER_PROMPT - 1), generator=generator)], dim=1)
    with torch.no_grad():
        # Greedy and beam search from the decoder's start token; greedy runs to the end without stopping at eos.
        # Whisper's own generate adds language and task tokens: GenerationMixin's for both. A cache of its own
        # for each call: the one generate makes has a layer per encoder layer (T5's num_layers), too few for a
        # deeper decoder.
        def generate(**options):
            cache = transformers.EncoderDecoderCache(transformers.DynamicCache(), transformers.DynamicCache())
            return transformers.GenerationMixin.generate(model, **encoder_inputs, decoder_input_ids=first,
                                                         max_new_tokens=SEQ2SEQ_NEW_TOKENS, do_sample=False,
                                                         cache=cache, **options)
        first = torch.tensor([[start]])
        # No forced first or last token (BART's generation config forces its end token at the last step).
        unforced = dict(forced_bos_token_id=None, forced_eos_token_id=None)
        greedy = generate(num_beams=1, eos_token_id=None, **unforced)[0, 1:]
        assert len(greedy) == SEQ2SEQ_NEW_TOKENS, greedy
        beams = generate(num_beams=4, num_return_sequences=4, length_penalty=1.0, early_stopping=True,
                         eos_token_id=config.eos_token_id, output_scores=True, return_dict_in_generate=True,
                         **unforced)
        logits = model.double()(**{k: v.double() if v.is_floating_point() else v for k, v in encoder_inputs.items()},
                                decoder_input_ids=prompt).logits.float()
    inputs = {k: v.numpy() for k, v in encoder_inputs.items()}
    inputs["decoder_input_ids"] = prompt.numpy()
    # As the decoders': bf16 and int8 within 1.5% and 8% of the largest logit; T5 v1.0's within 3% and 12%: its
    # unscaled attention and scaled tied head are touchy (its linear weights alone rounded to bf16 move
    # transformers' own float64 logits by 1.6% of the largest).
    bf16, int8 = (0.03, 0.12) if name == "hf_t5_tiny" else (0.015, 0.08)
    write_case(case, reproduces, saved_dtype, inputs, {"logits": logits.numpy()},
               generation={"encoder_inputs": sorted(encoder_inputs),
                           "encoder_inputs_note": "the case's .npy files of these names; the prompt is the decoder's",
                           "prompt": [start], "greedy": greedy.tolist(),
                           "beam_search": {"num_beams": 4, "length_penalty": 1.0, "early_stopping": True,
                                           "max_new_tokens": SEQ2SEQ_NEW_TOKENS, "eos_token_id": config.eos_token_id,
                                           "sequences": [s[1:].tolist() for s in beams.sequences],
                                           "sequences_scores": [round(float(x), 6) for x in beams.sequences_scores]},
                           "computed_by": "transformers " + transformers.__version__ +
                                          " GenerationMixin.generate from decoder_start_token_id, float32: greedy "
                                          "(do_sample=False, eos_token_id=None) and beam search (every beam returned, "
                                          "best first, without the start token)"},
               tolerance={"bf16_atol": round(bf16 * float(logits.abs().max()), 3),
                          "int8_atol": round(int8 * float(logits.abs().max()), 3)})


def main(names):
    for name, spec in DECODERS.items():
        if not names or name in names:
            decoder_case(name, spec)
            print("wrote", os.path.join(CASES, name))
    for name, spec in TEXT_ENCODERS.items():
        if not names or name in names:
            text_encoder_case(name, spec)
            print("wrote", os.path.join(CASES, name))
    for name, spec in VISION.items():
        if not names or name in names:
            vision_case(name, spec)
            print("wrote", os.path.join(CASES, name))
    for name, spec in SEQ2SEQ.items():
        if not names or name in names:
            seq2seq_case(name, spec)
            print("wrote", os.path.join(CASES, name))


if __name__ == "__main__":
    main(sys.argv[1:])
