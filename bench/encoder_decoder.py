#!/usr/bin/env python3
"""Encoder-decoder generation (issue 39): ein against CTranslate2 and transformers eager, 2 threads.

Models, random weights made with transformers from these configs and saved with save_pretrained:
  whisper: WhisperForConditionalGeneration shaped as whisper-base (d_model 512, 6 + 6 layers of 8
           heads, MLP 2048, 80 mel bins, vocab 51865): 30 s of features (3000 frames) in;
  t5:      T5ForConditionalGeneration shaped as t5-base (d_model 768, 12 + 12 blocks of 12 heads of
           64, ReLU MLP 3072, vocab 32128): 512 tokens in;
  bart:    BartForConditionalGeneration shaped as bart-base (d_model 768, 6 + 6 post-norm layers of
           12 heads, GELU MLP 3072, vocab 50265): 512 tokens in.
Each generates --tokens new tokens (the end token suppressed, so every engine makes them all),
greedy and with 4 beams, from the decoder's start token; with --batch B, for B copies of the
encoder's input at once (ein: one scheduler's requests, `ein-run --sequences B`; CTranslate2 and
transformers: a batch of B).

  ein:          einc --hf FOLDER --precision P, then `ein-run --generate N --prompt-ids START
                [--beams 4] --input ... --bench RUNS` (the median it prints);
  CTranslate2:  the folder converted by ctranslate2's TransformersConverter (float32, int8), then
                Whisper.generate / Translator.translate_batch (intra_threads 2), timed per call;
  transformers: generate(num_beams=...) under torch.set_num_threads(2), inference_mode.
Every engine runs in its own process, one round after another (--rounds): a warm-up call, then
--runs timed calls (ein: `ein-run --bench RUNS`, each generation from a new sequence, and its
median; the others: each call's time); the table has the median of every round's. The time
covers the encoder and the decoding, not loading. Prints a table with `lscpu`'s model name.

Results (docs/benchmarks.md, "Warm calls, the f32 GEMV without prefetch, ..."): for one input ein
takes 0.39-0.93x CTranslate2's time at the same precision, greedy and with 4 beams, on Whisper,
T5 and BART alike.

  .venv-bench/bin/pip install torch transformers ctranslate2
  .venv-bench/bin/python bench/encoder_decoder.py [--rounds 2] [--tokens 64] [--workdir DIR]
      [--models whisper,t5,bart] [--engines ein,ct2,hf] [--batch B] [--tiny]   (--tiny: small configs, to try it)
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THREADS = 2

CONFIGS = {
    "whisper": ("WhisperForConditionalGeneration", "WhisperConfig",
                dict(vocab_size=51865, d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                     decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048, num_mel_bins=80,
                     max_source_positions=1500, max_target_positions=448, bos_token_id=50257,
                     eos_token_id=50257, pad_token_id=50257, decoder_start_token_id=50258,
                     begin_suppress_tokens=None, suppress_tokens=None)),
    "t5": ("T5ForConditionalGeneration", "T5Config",
           dict(vocab_size=32128, d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_decoder_layers=12,
                num_heads=12, relative_attention_num_buckets=32, relative_attention_max_distance=128,
                feed_forward_proj="relu", decoder_start_token_id=0, eos_token_id=1, pad_token_id=0)),
    "bart": ("BartForConditionalGeneration", "BartConfig",
             dict(vocab_size=50265, d_model=768, encoder_layers=6, decoder_layers=6, encoder_attention_heads=12,
                  decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072,
                  max_position_embeddings=1024, bos_token_id=0, pad_token_id=1, eos_token_id=2,
                  decoder_start_token_id=2, forced_bos_token_id=None, forced_eos_token_id=None,
                  normalize_before=False, add_final_layer_norm=False)),  # as bart-base's config.json: CTranslate2 reads them
}
TINY = {
    "whisper": dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                    decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128),
    "t5": dict(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4),
    "bart": dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                 encoder_ffn_dim=128, decoder_ffn_dim=128),
}
SOURCE_TOKENS = 512  # T5's and BART's input


def prompt_of(name, values):
    """The decoder's first ids: Whisper's start and no-timestamps tokens (CTranslate2 decodes
    timestamps otherwise), T5's and BART's start token."""
    start = values["decoder_start_token_id"]
    return [start, 50363] if name == "whisper" else [start]


def config_of(name, tiny):
    architecture, config_class, values = CONFIGS[name]
    return architecture, config_class, {**values, **(TINY[name] if tiny else {})}


def make_folder(name, folder, tiny):
    """The random-weight checkpoint folder and the encoder's inputs (.npy beside it)."""
    import torch
    import transformers
    architecture, config_class, values = config_of(name, tiny)
    if os.path.exists(os.path.join(folder, "config.json")):
        return
    torch.manual_seed(0)
    model = getattr(transformers, architecture)(getattr(transformers, config_class)(**values)).eval()
    with torch.no_grad():  # unit-variance activations, as a trained model's
        for parameter in model.parameters():
            if parameter.dim() == 2:
                parameter.normal_(0.0, parameter.shape[-1] ** -0.5)
    model.save_pretrained(folder)
    rng = np.random.default_rng(0)
    if name == "whisper":
        np.save(os.path.join(folder, "input_features.npy"),
                rng.standard_normal((1, values["num_mel_bins"], 2 * values["max_source_positions"]), np.float32))
    else:
        np.save(os.path.join(folder, "input_ids.npy"), rng.integers(4, values["vocab_size"], (1, SOURCE_TOKENS)))
        np.save(os.path.join(folder, "attention_mask.npy"), np.ones((1, SOURCE_TOKENS), np.int64))


class _WordTokenizer:
    """What CTranslate2's converter reads of a tokenizer, for a folder that has none: token i is
    "w{i}", with T5's special tokens first, BART's (<s> first) or Whisper's where its config puts them."""

    def __init__(self, vocab_size, special):
        self.names = ["<pad>", "</s>", "<unk>"] + [f"w{i}" for i in range(3, vocab_size)]
        for index, token in special.items():
            self.names[index] = token
        self.bos_token, self.pad_token, self.eos_token, self.unk_token = "<s>", "<pad>", "</s>", "<unk>"
        self.additional_special_tokens = []

    def get_vocab(self):
        return {token: i for i, token in enumerate(self.names)}

    def convert_ids_to_tokens(self, index):
        return self.names[index]


def convert_ct2(folder, output, quantization):
    import ctranslate2
    import transformers

    class Converter(ctranslate2.converters.TransformersConverter):
        def load_tokenizer(self, tokenizer_class, model_name_or_path, **kwargs):
            config = transformers.AutoConfig.from_pretrained(model_name_or_path)
            special = {}
            if config.model_type == "whisper":  # CTranslate2 finds Whisper's special tokens by name
                names = ["<|endoftext|>", "<|startoftranscript|>"] + [f"<|lang{i}|>" for i in range(99)] + [
                    "<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>",
                    "<|notimestamps|>"]
                special = {50257 + i: name for i, name in enumerate(names)}
                special.update({50257 + len(names) + i: "<|%.2f|>" % (i * 0.02)
                                for i in range(config.vocab_size - 50257 - len(names))})
            elif config.model_type == "bart":
                special = {0: "<s>", 1: "<pad>", 2: "</s>", 3: "<unk>"}
            return _WordTokenizer(config.vocab_size, special)

    if not os.path.exists(os.path.join(output, "model.bin")):
        Converter(folder).convert(output, quantization=quantization, force=True)


def worker(args):
    """One engine's timings in this process: prints {"seconds": [...], "tokens": n}."""
    name, folder, engine, beams, runs = args.worker_model, args.folder, args.worker_engine, args.beams, args.runs
    batch = args.batch
    _, _, values = config_of(name, args.tiny)
    prompt, eos = prompt_of(name, values), values["eos_token_id"]
    times, produced = [], 0
    if engine.startswith("ct2"):
        import ctranslate2
        if name == "whisper":
            model = ctranslate2.models.Whisper(args.ct2_dir, device="cpu", compute_type=args.compute_type,
                                               intra_threads=THREADS, inter_threads=1)
            features = ctranslate2.StorageView.from_array(
                np.repeat(np.load(os.path.join(folder, "input_features.npy")), batch, axis=0))
            # CTranslate2 generates max_length / 2 tokens for Whisper.
            call = lambda: model.generate(features, [prompt] * batch, beam_size=beams, max_length=2 * args.tokens,
                                          suppress_tokens=[eos], suppress_blank=False)[0].sequences_ids[0]
        else:
            model = ctranslate2.Translator(args.ct2_dir, device="cpu", compute_type=args.compute_type,
                                           intra_threads=THREADS, inter_threads=1)
            source = [["w%d" % i for i in np.load(os.path.join(folder, "input_ids.npy"))[0]] + ["</s>"]]
            call = lambda: model.translate_batch(source * batch, beam_size=beams, max_decoding_length=args.tokens,
                                                 min_decoding_length=args.tokens)[0].hypotheses[0]
    else:
        import torch
        import transformers
        torch.set_num_threads(THREADS)
        model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder).eval() if name != "whisper" else \
            transformers.WhisperForConditionalGeneration.from_pretrained(folder).eval()
        names = ["input_features"] if name == "whisper" else ["input_ids", "attention_mask"]
        inputs = {input_name: torch.from_numpy(np.repeat(np.load(os.path.join(folder, input_name + ".npy")), batch,
                                                         axis=0)) for input_name in names}

        def call():
            with torch.inference_mode():
                out = transformers.GenerationMixin.generate(
                    model, **inputs, decoder_input_ids=torch.tensor([prompt] * batch), max_new_tokens=args.tokens,
                    min_new_tokens=args.tokens, num_beams=beams, do_sample=False)
            return out[0, len(prompt):].tolist()
    call()  # warm-up
    for _ in range(runs):
        begin = time.perf_counter()
        produced = len(call())
        times.append(time.perf_counter() - begin)
    print(json.dumps({"seconds": times, "tokens": produced}))


def ein_run(args, name, folder, artifact, beams):
    _, _, values = config_of(name, args.tiny)
    inputs = ["input_features"] if name == "whisper" else ["input_ids", "attention_mask"]
    command = [args.ein_run, artifact, "--generate", str(args.tokens), "--prompt-ids",
               ",".join(map(str, prompt_of(name, values))), "--threads", str(THREADS)]
    for input_name in inputs:
        command += ["--input", f"{input_name}={os.path.join(folder, input_name + '.npy')}"]
    if beams > 1:
        command += ["--beams", str(beams)]
    if args.batch > 1:
        command += ["--sequences", str(args.batch)]
    # One process a round, as the other engines: the first generation is the
    # warm-up, then --runs more (`--bench`), whose median ein-run prints.
    command += ["--bench", str(args.runs)]
    text = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    median = float(re.search(r"bench: \d+ \w+, median ([\d.]+) ms", text).group(1)) / 1e3
    tokens = len(re.search(r"tokens: ([\d,]+)", text).group(1).split(","))
    return [median], tokens


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3, help="timed calls per engine and round")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--models", default="whisper,t5,bart")
    parser.add_argument("--engines", default="ein,ct2,hf")
    parser.add_argument("--precisions", default="fp32,int8")
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "ein-encoder-decoder-bench"))
    parser.add_argument("--einc", default=os.path.join(ROOT, "build", "bin", "einc"))
    parser.add_argument("--ein-run", default=os.path.join(ROOT, "build", "bin", "ein-run"))
    parser.add_argument("--batch", type=int, default=1, help="copies of the encoder's input generated at once")
    parser.add_argument("--tiny", action="store_true")
    # A worker's arguments (this script runs itself once per engine and round).
    parser.add_argument("--worker-model")
    parser.add_argument("--worker-engine")
    parser.add_argument("--folder")
    parser.add_argument("--ct2-dir")
    parser.add_argument("--compute-type")
    parser.add_argument("--beams", type=int, default=1)
    args = parser.parse_args()
    if args.worker_model:
        return worker(args)

    os.makedirs(args.workdir, exist_ok=True)
    engines, precisions = args.engines.split(","), args.precisions.split(",")
    results = {}  # (model, engine label, beams) -> [seconds], tokens
    for name in args.models.split(","):
        folder = os.path.join(args.workdir, name + ("-tiny" if args.tiny else ""))
        make_folder(name, folder, args.tiny)
        jobs = []
        for precision in precisions:
            ct2_type = {"fp32": "float32", "int8": "int8"}[precision]
            if "ein" in engines:
                artifact = os.path.join(folder, f"ein-{precision}.einb")
                if not os.path.exists(artifact):
                    subprocess.run([args.einc, "--hf", folder, "--precision", precision, "-o", artifact], check=True,
                                   capture_output=True)
                for beams in (1, 4):
                    jobs.append((f"ein {precision}", beams, lambda a=artifact, b=beams: ein_run(args, name, folder, a, b)))
            if "ct2" in engines:
                ct2_dir = os.path.join(folder, f"ct2-{ct2_type}")
                convert_ct2(folder, ct2_dir, ct2_type)
                for beams in (1, 4):
                    jobs.append((f"CTranslate2 {ct2_type}", beams,
                                 lambda d=ct2_dir, t=ct2_type, b=beams: spawn(args, name, folder, "ct2", b, d, t)))
        if "hf" in engines:
            for beams in (1, 4):
                jobs.append(("transformers fp32", beams, lambda b=beams: spawn(args, name, folder, "hf", b, "", "")))
        for _ in range(args.rounds):
            for label, beams, job in jobs:
                seconds, tokens = job()
                if tokens != args.tokens:
                    raise RuntimeError(f"{name} {label} made {tokens} tokens, not {args.tokens}")
                entry = results.setdefault((name, label, beams), [[], tokens])
                entry[0].extend(seconds)

    cpu = subprocess.run("lscpu | grep 'Model name'", shell=True, capture_output=True, text=True).stdout.strip()
    print(f"\n{cpu} | {THREADS} threads | {args.tokens} new tokens x {args.batch} inputs | medians of "
          f"{args.rounds} rounds x {args.runs} runs")
    print(f"{'model':8} {'engine':22} {'beams':>5} {'seconds':>9} {'tokens/s':>9}")
    for (name, label, beams), (seconds, tokens) in results.items():
        median = statistics.median(seconds)
        print(f"{name:8} {label:22} {beams:5} {median:9.3f} {tokens * args.batch / median:9.1f}")


def spawn(args, name, folder, engine, beams, ct2_dir, compute_type):
    command = [sys.executable, os.path.abspath(__file__), "--worker-model", name, "--worker-engine", engine,
               "--folder", folder, "--beams", str(beams), "--runs", str(args.runs), "--tokens", str(args.tokens),
               "--batch", str(args.batch)]
    if ct2_dir:
        command += ["--ct2-dir", ct2_dir, "--compute-type", compute_type]
    if args.tiny:
        command.append("--tiny")
    out = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS=str(THREADS)))
    if out.returncode != 0:
        raise RuntimeError(f"{engine} {name} failed:\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return result["seconds"], result["tokens"]


if __name__ == "__main__":
    main()
