#!/usr/bin/env python3
"""Load + compile time and peak memory of a Hugging Face checkpoint folder: einc --hf against
llama.cpp's convert_hf_to_gguf.py on the same folder.

The folder is the 1.1B Llama shape (hidden 2048, 22 layers, 32/4 heads of 64, SwiGLU 5632,
vocab 32000: TinyLlama's) with random weights, written by transformers' save_pretrained in
bf16 as three shards and an index (made once into --workdir). Each round runs, in its own
process and in turn, `einc --hf DIR -o model.einb --precision P` for each precision and, given
--convert (llama.cpp's convert_hf_to_gguf.py, e.g. from the llama-cpp-python sdist's vendor/
folder), `convert_hf_to_gguf.py DIR --outtype T` for each of its types; each is timed by
/usr/bin/time -v (wall time, peak resident memory). Medians over --rounds are printed with the
output's size and `lscpu`'s model name.

Needs the ein build (build/bin/einc) and a venv with torch and transformers (and, for --convert,
numpy, sentencepiece-free gguf: `pip install gguf`):
  .venv-python/bin/python bench/checkpoint_compile.py --rounds 2 [--convert PATH/convert_hf_to_gguf.py]
"""
import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHAPE = dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
             num_key_value_heads=4, max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0,
             tie_word_embeddings=False)


def make_checkpoint(folder: pathlib.Path):
    """The random-weight 1.1B Llama as transformers saves it: bf16, three shards and an index."""
    if (folder / "model.safetensors.index.json").exists():
        return
    import torch
    import transformers
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**SHAPE)
    with torch.device("cpu"):
        model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(folder, max_shard_size="800MB")
    shards = sorted(folder.glob("model-*.safetensors"))
    print(f"wrote {folder}: {len(shards)} shards, "
          f"{sum(s.stat().st_size for s in shards) / 1e9:.2f} GB", flush=True)


def timed(command, log: pathlib.Path):
    """(wall seconds, peak resident MB) of `command` by /usr/bin/time -v."""
    with open(log, "w") as out:
        status = subprocess.run(["/usr/bin/time", "-v"] + command, stdout=out, stderr=subprocess.STDOUT).returncode
    text = log.read_text()
    if status != 0:
        sys.exit(f"failed ({status}): {' '.join(command)}\n{text[-2000:]}")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", text)
    seconds = int(wall.group(1) or 0) * 3600 + int(wall.group(2)) * 60 + float(wall.group(3))
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1)) / 1024
    return seconds, peak


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default="/tmp/ein-checkpoint-bench")
    parser.add_argument("--einc", default=str(ROOT / "build" / "bin" / "einc"))
    parser.add_argument("--precisions", default="fp32,bf16,int8,int4")
    parser.add_argument("--convert", help="llama.cpp's convert_hf_to_gguf.py")
    parser.add_argument("--outtypes", default="f32,f16,q8_0")
    parser.add_argument("--rounds", type=int, default=2)
    options = parser.parse_args()
    work = pathlib.Path(options.workdir)
    folder = work / "llama-1.1b"
    folder.mkdir(parents=True, exist_ok=True)
    make_checkpoint(folder)
    checkpoint_bytes = sum(s.stat().st_size for s in folder.glob("*.safetensors"))

    jobs = {}
    for precision in options.precisions.split(","):
        out = work / f"model-{precision}.einb"
        jobs[f"einc --hf --precision {precision}"] = (
            [options.einc, "--hf", str(folder), "-o", str(out), "--precision", precision, "-q"], out)
    if options.convert:
        for outtype in options.outtypes.split(","):
            out = work / f"model-{outtype}.gguf"
            jobs[f"convert_hf_to_gguf --outtype {outtype}"] = (
                [sys.executable, options.convert, str(folder), "--outtype", outtype, "--outfile", str(out)], out)
    results = {name: [] for name in jobs}
    for round_ in range(options.rounds):
        for name, (command, out) in jobs.items():
            seconds, peak = timed(command, work / "time.log")
            results[name].append((seconds, peak, out.stat().st_size))
            out.unlink()
            print(f"round {round_ + 1}: {name}: {seconds:.1f} s, peak {peak:.0f} MB", flush=True)

    model = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = re.search(r"Model name:\s*(.*)", model).group(1)
    print(f"\n{model}, {os.cpu_count()} CPUs; checkpoint {checkpoint_bytes / 1e9:.2f} GB (bf16, 3 shards); "
          f"medians of {options.rounds} rounds\n")
    print("| what | time | peak memory | output | peak / output |")
    print("|---|---|---|---|---|")
    for name, runs in results.items():
        seconds = statistics.median(r[0] for r in runs)
        peak = statistics.median(r[1] for r in runs)
        size = runs[0][2] / 1e6
        print(f"| {name} | {seconds:.1f} s | {peak:.0f} MB | {size:.0f} MB | {peak / size:.2f} |")
    (work / "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
