#!/usr/bin/env bash
# Writes the fuzzers' seed corpora, one folder per target.
#   make_corpus.sh SOURCE_DIR CONFORMANCE_DIR OUT_DIR SEED_ARTIFACTS_TOOL
# Models: examples/models, every .ein test, the conformance cases' models.
# Tensors: the conformance cases' .npy and .safetensors files (those under
# 256 KiB: larger seeds only slow the fuzzer down) and small generated ones.
# Artifacts: the runtime tests' models (every kernel).
set -euo pipefail
source_dir=$1 conformance_dir=$2 out=$3 seed_artifacts=$4

rm -rf "$out"
mkdir -p "$out"/{frontend,einc,safetensors,gguf,npy,artifact,artifact_fields}

copy_numbered() {  # copy_numbered DEST FILE...: flat names that cannot collide
  local dest=$1 n=0
  shift
  for file in "$@"; do
    cp "$file" "$dest/$(printf '%03d' $n)-$(basename "$file")"
    n=$((n + 1))
  done
}

mapfile -t models < <(find "$source_dir/examples/models" "$source_dir/tests" -name '*.ein' | sort)
if [[ -d $conformance_dir ]]; then
  mapfile -t -O "${#models[@]}" models < <(find "$conformance_dir" -name '*.ein' | sort)
  mapfile -t npys < <(find "$conformance_dir" -name '*.npy' -size -256k | sort)
  mapfile -t weights < <(find "$conformance_dir" -name '*.safetensors' -size -256k | sort)
else
  echo "make_corpus.sh: no conformance cases at $conformance_dir; seeds from the repository only" >&2
  npys=() weights=()
fi
copy_numbered "$out/frontend" "${models[@]}"
copy_numbered "$out/einc" "${models[@]}"
[[ ${#npys[@]} -eq 0 ]] || copy_numbered "$out/npy" "${npys[@]}"
[[ ${#weights[@]} -eq 0 ]] || copy_numbered "$out/safetensors" "${weights[@]}"
# The GGUF reader tests' files (llama.cpp's own writer) under 256 KiB.
mapfile -t ggufs < <(find "$source_dir/tests/compiler/weights/gguf" -name '*.gguf' -size -256k | sort)
copy_numbered "$out/gguf" "${ggufs[@]}"

writer="$source_dir/tests/Inputs/write_tensors.py"
python3 "$writer" npy "$out/npy/gen-f32.npy" f32 2x3 0,1,2,3,4,5
python3 "$writer" npy "$out/npy/gen-i64.npy" i64 5 0,1,2,3,99
python3 "$writer" npy "$out/npy/gen-bool.npy" bool 2x2 1,0,0,1
python3 "$writer" npy "$out/npy/gen-scalar.npy" f64 '' 7
python3 "$writer" safetensors "$out/safetensors/gen-mixed.safetensors" w:F32:4x3 b:F16:3 ids:I64:2 m:BOOL:2x2
python3 "$writer" safetensors "$out/safetensors/gen-scalar.safetensors" s:F64: e:F32:0x4

"$seed_artifacts" "$out/artifact"
cp "$out/artifact"/* "$out/artifact_fields/"
