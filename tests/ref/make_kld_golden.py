#!/usr/bin/env python3
"""Writes the llama-perplexity KL-divergence base files that tests/ref/test_kld_llamacpp.py compares tachyon
with: for every <arch>-tiny synthetic shape and type, the model is made with `tachyon synth` and llama.cpp's
llama-perplexity (scripts/build_llamacpp.sh) writes its base file from the text golden/kld/text.txt (the
first 6000 bytes of the GPL-3 text, /usr/share/common-licenses/GPL-3):

    tachyon synth -o M.gguf --shape SHAPE --type TYPE --seed 42
    llama-perplexity -m M.gguf -f golden/kld/text.txt -c 256 --chunks 8 -t 2 --kl-divergence-base OUT

The files are xz-compressed into golden/kld/SHAPE-TYPE.kld.xz, and golden/kld/manifest.json records each
model's sha256 (the test refuses to compare against a different model) and the commands.

    .venv/bin/python tests/ref/make_kld_golden.py [LLAMA_PERPLEXITY] [SHAPE ...]
LLAMA_PERPLEXITY defaults to /work/llamacpp-build/bin/llama-perplexity; TACHYON_BIN to build/tachyon.
"""
import hashlib
import json
import lzma
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BIN = os.environ.get("TACHYON_BIN", os.path.join(ROOT, "build", "tachyon"))
DIR = os.path.join(HERE, "golden", "kld")
TEXT = os.path.join(DIR, "text.txt")
SHAPES = ["llama-tiny", "qwen2-tiny", "qwen3-tiny", "gemma2-tiny", "gemma3-tiny", "smollm3-tiny", "phi3-tiny",
          "granite-tiny", "granitemoe-tiny", "ernie4_5-tiny", "exaone-tiny", "olmo2-tiny", "olmo3-tiny",
          "mistral3-tiny", "qwen3moe-tiny", "qwen2moe-tiny", "gptoss-tiny", "qwen35-tiny", "qwen35moe-tiny",
          "qwen3next-tiny", "qwen3next-ssmin-tiny"]
TYPES = ["q8_0", "q4_k_m"]
TYPES_OF = {"gptoss-tiny": TYPES + ["mxfp4"],  # gpt-oss ships MXFP4 experts (llama.cpp's MXFP4_MOE)
            "qwen3next-ssmin-tiny": ["q8_0"],  # (older converters' fused ssm_in: one type is enough)
            # OLMo 3's window and YaRN in F32 (KLD 0, the same top token everywhere): quantized, the two
            # engines' rounding, amplified by four layers without input norms, leaves the same top token
            # 96.5-97.6% of the time, too near the test's bound to be a stable test
            "olmo3-tiny": ["f32"]}
SEED, CTX, CHUNKS = 42, 256, 8


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def synth(shape, qtype, out):
    subprocess.run([BIN, "synth", "-o", out, "--shape", shape, "--type", qtype, "--seed", str(SEED)], check=True,
                   capture_output=True)


def main():
    args = sys.argv[1:]
    lp = args.pop(0) if args and os.path.sep in args[0] else "/work/llamacpp-build/bin/llama-perplexity"
    shapes = args or SHAPES
    mpath = os.path.join(DIR, "manifest.json")
    manifest = json.load(open(mpath)) if os.path.exists(mpath) else {}
    with tempfile.TemporaryDirectory() as tmp:
        for shape in shapes:
            for qtype in TYPES_OF.get(shape, TYPES):
                model, base = os.path.join(tmp, "m.gguf"), os.path.join(tmp, "base.kld")
                synth(shape, qtype, model)
                cmd = [lp, "-m", model, "-f", TEXT, "-c", str(CTX), "--chunks", str(CHUNKS), "-t", "2",
                       "--kl-divergence-base", base]
                r = subprocess.run(cmd, capture_output=True, text=True)
                name = f"{shape}-{qtype}.kld.xz"
                if r.returncode or not os.path.exists(base):
                    print(f"{shape} {qtype}: llama-perplexity failed:\n{r.stderr[-3000:]}", file=sys.stderr)
                    manifest.pop(name, None)
                    continue
                with open(base, "rb") as f, lzma.open(os.path.join(DIR, name), "wb", preset=9) as g:
                    g.write(f.read())
                ppl = re.findall(r"Final estimate: PPL = [0-9.]+ \+/- [0-9.]+", r.stdout + r.stderr)
                manifest[name] = {
                    "shape": shape, "type": qtype, "seed": SEED, "ctx": CTX, "chunks": CHUNKS,
                    "model_sha256": sha256(model),
                    "synth": f"tachyon synth -o M.gguf --shape {shape} --type {qtype} --seed {SEED}",
                    "llama_perplexity": "llama-perplexity -m M.gguf -f tests/ref/golden/kld/text.txt "
                                        f"-c {CTX} --chunks {CHUNKS} -t 2 --kl-divergence-base OUT",
                    "llama_cpp": "llama-cpp-python 0.3.36 sdist, vendored llama.cpp (scripts/build_llamacpp.sh)",
                    "llama_ppl": ppl[-1] if ppl else None,
                }
                print(name, manifest[name]["llama_ppl"])
    with open(mpath, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
