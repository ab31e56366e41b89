"""gpt-oss against the independent numpy reference (gptoss_ref.py). The test writes a tiny gpt-oss GGUF with random
weights through the `gguf` package's writer, named and shaped as llama.cpp's converter writes them: q/k/v/o
biases, a sink logit per head, a window of 8 on the even layer over 40 tokens, YaRN (factor 4 over an original
context of 16), 3 of 8 experts with router and expert biases, and expert gate/up weights large enough that the
SwiGLU clamp (±7) bites. F32 and Q8_0 matrices (the experts read as slices of the quantized 3-D tensors), every
ISA level, one batch and chunked prefill. Each feature has teeth: the reference without sinks, without the clamp
or without the window is far from tachyon's logits."""
import os
import subprocess
import sys

import numpy as np
import pytest
import gguf

sys.path.insert(0, os.path.dirname(__file__))
from gptoss_ref import GptOssRef  # noqa: E402
from refisa import isa_env  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("TACHYON_BIN", os.path.join(ROOT, "build", "tachyon"))

DIM, LAYERS, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 64, 2, 4, 2, 32, 300
N_EXPERT, N_USED, EXPERT_FFN, WINDOW, N_TOKENS = 8, 3, 32, 8, 40


def write_gptoss(path, seed, qtype=None):
    """qtype: a ggml type for the 2-D and 3-D matrices (not the embeddings, norms, biases or sinks), or None."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, "gpt-oss")
    w.add_block_count(LAYERS)
    w.add_context_length(256)
    w.add_embedding_length(DIM)
    w.add_feed_forward_length(EXPERT_FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(150000.0)
    w.add_sliding_window(WINDOW)
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(4.0)
    w.add_rope_scaling_orig_ctx_len(16)
    w.add_expert_count(N_EXPERT)
    w.add_expert_used_count(N_USED)
    w.add_expert_feed_forward_length(EXPERT_FFN)

    def t(name, *shape, scale=0.08, base=0.0, quant=True):
        a = (base + scale * rng.standard_normal(shape)).astype(np.float32)
        if qtype is not None and quant and len(shape) > 1 and name != "token_embd.weight":
            w.add_tensor(name, gguf.quants.quantize(a, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(name, a)

    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    t("token_embd.weight", VOCAB, DIM, scale=0.5)
    t("output_norm.weight", DIM, scale=0.1, base=1.0)
    t("output.weight", VOCAB, DIM)
    for l in range(LAYERS):
        p = f"blk.{l}."
        t(p + "attn_norm.weight", DIM, scale=0.1, base=1.0)
        t(p + "post_attention_norm.weight", DIM, scale=0.1, base=1.0)
        t(p + "attn_q.weight", q, DIM)
        t(p + "attn_k.weight", kv, DIM)
        t(p + "attn_v.weight", kv, DIM)
        t(p + "attn_output.weight", DIM, q)
        t(p + "attn_q.bias", q, scale=0.2)
        t(p + "attn_k.bias", kv, scale=0.2)
        t(p + "attn_v.bias", kv, scale=0.2)
        t(p + "attn_output.bias", DIM, scale=0.2)
        t(p + "attn_sinks.weight", HEADS, scale=1.0, base=1.0)
        t(p + "ffn_gate_inp.weight", N_EXPERT, DIM, scale=0.5)
        t(p + "ffn_gate_inp.bias", N_EXPERT, scale=0.5)
        # gate/up pre-activations of standard deviation ~8: many beyond the clamp
        t(p + "ffn_gate_exps.weight", N_EXPERT, EXPERT_FFN, DIM, scale=1.0)
        t(p + "ffn_up_exps.weight", N_EXPERT, EXPERT_FFN, DIM, scale=1.0)
        t(p + "ffn_down_exps.weight", N_EXPERT, DIM, EXPERT_FFN, scale=0.01)
        t(p + "ffn_gate_exps.bias", N_EXPERT, EXPERT_FFN, scale=0.5, quant=False)
        t(p + "ffn_up_exps.bias", N_EXPERT, EXPERT_FFN, scale=0.5, quant=False)
        t(p + "ffn_down_exps.bias", N_EXPERT, DIM, scale=0.2, quant=False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def run_logits(path, ids, out, batch, isa):
    p = subprocess.run([BIN, "logits", "-m", path, "--ids", ",".join(map(str, ids)), "-o", str(out),
                        "--batch", str(batch)], capture_output=True, text=True, env=isa_env(isa))
    assert p.returncode == 0, p.stderr
    return np.fromfile(out, dtype=np.float32).reshape(len(ids), VOCAB)


QTYPES = [None, gguf.GGMLQuantizationType.Q8_0]


@pytest.mark.parametrize("qtype", QTYPES, ids=["f32", "q8_0"])
def test_gptoss_matches_reference(tmp_path, qtype, isa):
    path = str(tmp_path / "gpt-oss.gguf")
    write_gptoss(path, seed=11, qtype=qtype)
    ids = [int(x) for x in np.random.default_rng(1).integers(0, VOCAB, N_TOKENS)]
    ref = GptOssRef(path, act_quant=True).forward(ids)
    for batch in (N_TOKENS, 3):  # one batch, and chunked prefill over the paged cache
        ours = run_logits(path, ids, tmp_path / "logits.f32", batch, isa)
        err = np.abs(ours - ref).max()
        assert err < 2e-3, f"batch {batch}: max diff {err}"
        assert (ours.argmax(1) == ref.argmax(1)).all()
    # teeth: the reference without each of gpt-oss's features is far from what tachyon computed
    for feature in ("use_sinks", "use_clamp", "use_window"):
        other = GptOssRef(path, act_quant=True)
        setattr(other, feature, False)
        assert np.abs(ours - other.forward(ids)).max() > 0.02, feature
    yarnless = GptOssRef(path, act_quant=True)
    yarnless.yarn = None
    assert np.abs(ours - yarnless.forward(ids)).max() > 0.02, "yarn"


def test_gptoss_info(tmp_path):
    path = str(tmp_path / "gpt-oss.gguf")
    write_gptoss(path, seed=3)
    p = subprocess.run([BIN, "info", "-m", path], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    for line in ("architecture    gpt-oss", "sliding window  8 positions on local layers (every 2nd layer global), "
                 "the global layers' rope", "attention sinks one learned logit per query head",
                 "experts         3 used of 8 per layer, expert ffn 32", "expert swiglu   clamped at 7, alpha 1.702",
                 "yarn            factor 4 over original context 16"):
        assert line in p.stdout, p.stdout
