"""SmolLM2-135M-Instruct Q4_1 on the 200-token text (golden/text200.txt): the token ids, the float64 references
and tachyon's default-mode logits at each ISA level. conftest.py serves them as session fixtures, so each is
computed once for every test module that compares against it (test_model_ref, test_kv_quant_ref,
test_cuda_ref) rather than once per module."""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from llama_ref import LlamaRef  # noqa: E402
from refisa import BIN, ROOT, isa_env  # noqa: E402

TD = os.path.join(ROOT, "..", "shared", "testdata")
SMOL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
SMOL_TOK = os.path.join(TD, "vocab", "smollm2-135m-tokenizer.json")


def text_ids():
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(SMOL_TOK)
    text = open(os.path.join(ROOT, "tests", "ref", "golden", "text200.txt")).read()
    ids = tok.encode(text, add_special_tokens=False).ids[:200]
    assert len(ids) == 200
    return ids


_REF = []  # the one LlamaRef of SMOL: its dequantized float64 weights serve every reference below


def reference(ids, act_quant, kv_f16=None):
    """The numpy reference's logits (len(ids), vocab), float64, with LlamaRef's act_quant / kv_f16. One reader
    and one set of dequantized weights serve all three variants (the flags are read at each forward, the weight
    cache does not depend on them), instead of parsing and dequantizing the file once per variant."""
    if not _REF:
        _REF.append(LlamaRef(SMOL))
    ref = _REF[0]
    ref.act_quant = act_quant
    ref.kv_f16 = act_quant if kv_f16 is None else kv_f16
    return ref.forward(ids)


class LogitsCache:
    """tachyon's logits of `ids` in the default mode at one ISA level, computed on first use and kept (read-only)
    for the session: the default-mode logits of the 200-token text are what the forward-pass check and each
    quantized-KV check compare against."""

    def __init__(self, ids, workdir):
        self.ids, self.workdir, self.got = ids, workdir, {}

    def __call__(self, isa):
        if isa not in self.got:
            out = os.path.join(self.workdir, "smol_%s.f32" % isa)
            p = subprocess.run([BIN, "logits", "-m", SMOL, "--ids", ",".join(map(str, self.ids)), "-o", out,
                                "--batch", "512"], capture_output=True, text=True, timeout=300, env=isa_env(isa))
            assert p.returncode == 0, f"tachyon logits failed: {p.stderr}"
            a = np.fromfile(out, dtype=np.float32).reshape(len(self.ids), -1)
            a.flags.writeable = False
            self.got[isa] = a
        return self.got[isa]
