#!/bin/bash
# llama.cpp's own speculative decoding on the prompts of `tachyon bench --prompt-file` (not a test): prompt
# lookup (llama-speculative-simple --spec-type ngram-simple / ngram-map-k, Q4_1 target) and a draft model
# (draft-simple, F16 target + Q4_0 draft), 8 drafted tokens, greedy, 2 threads, 3 runs each; plain decoding
# from llama-bench (tg64 at a depth of 224 tokens, about these prompts' length). Decode tok/s as the tools print
# them (prefill excluded, as in `tachyon bench`).
#
# llama.cpp from llama-cpp-python's sdist (its vendored source, built natively):
#   pip download --no-deps --no-binary :all: llama-cpp-python && tar xzf llama_cpp_python-*.tar.gz
#   cd llama_cpp_python-*/vendor/llama.cpp && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
#       -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_OPENSSL=OFF
#   cmake --build build -j2 --target llama-speculative-simple llama-bench
# usage: LLAMA_BIN=.../build/bin bench/llamacpp_spec.sh Q4_1.gguf F16.gguf Q4_0_DRAFT.gguf [prompt names...]
set -eu
B=${LLAMA_BIN:?set LLAMA_BIN to llama.cpp build/bin}
Q=$1 F=$2 D=$3
shift 3
prompts=${*:-quote-chat code-edit-chat}
for p in $prompts; do
  P="$(printf '<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n' "$(cat "bench/spec_prompts/$p.txt")")"
  for r in 1 2 3; do
    for t in ngram-simple ngram-map-k; do
      echo "$p $t Q4_1 $("$B/llama-speculative-simple" -m "$Q" --spec-type $t --spec-draft-n-max 8 -p "$P" -n 64 \
        --temp 0 -t 2 -c 2048 2>&1 | grep -E 'decoded' | grep -o 'speed: *[0-9.]*')"
    done
    echo "$p draft-simple F16+Q4_0 $("$B/llama-speculative-simple" -m "$F" -md "$D" --spec-type draft-simple \
      --spec-draft-n-max 8 -p "$P" -n 64 --temp 0 -t 2 -td 2 -c 2048 2>&1 | grep -E 'decoded' | grep -o 'speed: *[0-9.]*')"
  done
done
for m in "$Q" "$F"; do "$B/llama-bench" -m "$m" -p 0 -n 64 -d 224 -t 2 -r 3 2>&1 | grep tg64; done
