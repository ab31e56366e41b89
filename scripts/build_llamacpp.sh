#!/bin/sh
# Builds llama.cpp as vendored by the llama-cpp-python 0.3.36 sdist, natively (-march=native), into BUILD
# (default /work/llamacpp-build), from the sdist unpacked under SRC (default /work/llamacpp-src). The
# reference programs tachyon is compared with: llama-perplexity (KL-divergence base files,
# tests/ref/make_kld_golden.py), llama-bench, llama-server and llama-cli. Does nothing that exists already:
# the sdist is downloaded once, and cmake rebuilds only what changed.
#   scripts/build_llamacpp.sh [SRC [BUILD]]
# PIP: a pip that can download the sdist (default: pip3 on PATH).
set -eu
src=${1:-/work/llamacpp-src}
build=${2:-/work/llamacpp-build}
pip=${PIP:-pip3}
ver=0.3.36
mkdir -p "$src"
if [ ! -f "$src/llama_cpp_python-$ver.tar.gz" ]; then
    "$pip" download "llama-cpp-python==$ver" --no-binary :all: --no-deps -d "$src"
fi
if [ ! -d "$src/llama_cpp_python-$ver" ]; then
    tar -xzf "$src/llama_cpp_python-$ver.tar.gz" -C "$src"
fi
cmake -S "$src/llama_cpp_python-$ver/vendor/llama.cpp" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF
nice -n 10 cmake --build "$build" -j2 --target llama-perplexity llama-bench llama-server llama-cli
ls -l "$build/bin/llama-perplexity" "$build/bin/llama-bench" "$build/bin/llama-server" "$build/bin/llama-cli"
