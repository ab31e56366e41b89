"""Every architecture in the table runs and agrees with the independent numpy reference. Real Qwen2/Qwen3
weights are not reachable from PyPI, so the test writes tiny models with random F32 weights through the `gguf`
package's own writer (an independent producer of the format): llama (adjacent-pair RoPE, tied embeddings),
qwen2 (q/k/v biases, NeoX RoPE), qwen3 (per-head q/k RMSNorm, NeoX RoPE, head_dim != dim/heads), gemma2
(gemma3's block without QK-norm, soft-capped attention scores and logits, a window on the even layers),
smollm3 (llama without RoPE on its fourth layer, of four), phi3 (fused attn_qkv and gate/up, partial RoPE,
LongRoPE's long factors and attention factor), mistral3 (YaRN and the Llama 4 attention temperature),
granite (embedding, attention, residual and logit multipliers), gemma3
(QK-norm, post-attention/post-FFN norms, GeGLU, sqrt(dim) embedding scale, sliding-window attention on local
layers with their own RoPE base; a window of 8 over 40 tokens so the mask matters), and the mixtures of experts
qwen3moe (qwen3's attention, 2 of 8 experts, renormalised weights) and qwen2moe (qwen2's attention, weights not
renormalised, a sigmoid-gated shared expert), in F32 and with Q8_0 matrices (the experts read as slices of the
quantized 3-D tensors)."""
import os
import subprocess
import sys

import numpy as np
import pytest
import gguf

sys.path.insert(0, os.path.dirname(__file__))
from llama_ref import LlamaRef  # noqa: E402
from refisa import isa_env  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("TACHYON_BIN", os.path.join(ROOT, "build", "tachyon"))

DIM, LAYERS, HEADS, KV_HEADS, FFN, VOCAB = 64, 2, 4, 2, 96, 300
N_EXPERT, N_USED, EXPERT_FFN, SHEXP_FFN = 8, 2, 32, 64
MOE = ("qwen3moe", "qwen2moe", "granitemoe")
GEMMA2_ATTN_CAP, GEMMA2_FINAL_CAP = 0.3, 1.5
LAYERS_OF = {"smollm3": 4}  # SmolLM3's fourth layer is its first without RoPE


def write_model(path, arch, head_dim, seed, extra=None, qtype=None):
    """qtype: a ggml type for the matrices (2-D and 3-D weights but the embeddings), or None for F32."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, arch)
    layers = LAYERS_OF.get(arch, LAYERS)
    w.add_block_count(layers)
    w.add_context_length(256)
    w.add_embedding_length(DIM)
    w.add_feed_forward_length(EXPERT_FFN if arch == "granitemoe" else FFN)  # granitemoe: the experts' FFN
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0 if arch == "llama" else 1000000.0)
    if head_dim != DIM // HEADS:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)

    def t(name, *shape, scale=0.08, base=0.0):
        a = (base + scale * rng.standard_normal(shape)).astype(np.float32)
        if qtype is not None and len(shape) > 1 and name != "token_embd.weight":
            w.add_tensor(name, gguf.quants.quantize(a, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(name, a)

    if arch in MOE:
        w.add_expert_count(N_EXPERT)
        w.add_expert_used_count(N_USED)
        w.add_expert_feed_forward_length(EXPERT_FFN)
        if arch == "qwen2moe":
            w.add_expert_shared_feed_forward_length(SHEXP_FFN)

    q, kv = HEADS * head_dim, KV_HEADS * head_dim
    t("token_embd.weight", VOCAB, DIM, scale=0.5)
    t("output_norm.weight", DIM, scale=0.1, base=1.0)
    if arch != "llama":
        t("output.weight", VOCAB, DIM)
    for l in range(layers):
        p = f"blk.{l}."
        if arch != "olmo2":  # OLMo 2: post norms only
            t(p + "attn_norm.weight", DIM, scale=0.1, base=1.0)
            t(p + "ffn_norm.weight", DIM, scale=0.1, base=1.0)
        if arch == "phi3":  # fused: q, k, v in one matrix; gate then up in ffn_up
            t(p + "attn_qkv.weight", q + 2 * kv, DIM)
        else:
            t(p + "attn_q.weight", q, DIM)
            t(p + "attn_k.weight", kv, DIM)
            t(p + "attn_v.weight", kv, DIM)
        t(p + "attn_output.weight", DIM, q)
        if arch == "phi3":
            t(p + "ffn_up.weight", 2 * FFN, DIM)
            t(p + "ffn_down.weight", DIM, FFN)
        elif arch in MOE:  # experts scaled up so that their output matters next to the residual
            t(p + "ffn_gate_inp.weight", N_EXPERT, DIM, scale=0.5)
            t(p + "ffn_gate_exps.weight", N_EXPERT, EXPERT_FFN, DIM, scale=0.2)
            t(p + "ffn_up_exps.weight", N_EXPERT, EXPERT_FFN, DIM, scale=0.2)
            t(p + "ffn_down_exps.weight", N_EXPERT, DIM, EXPERT_FFN, scale=0.2)
        else:
            t(p + "ffn_gate.weight", FFN, DIM)
            t(p + "ffn_up.weight", FFN, DIM)
            t(p + "ffn_down.weight", DIM, FFN)
        if arch == "qwen2moe":
            t(p + "ffn_gate_inp_shexp.weight", DIM, scale=0.3)
            t(p + "ffn_gate_shexp.weight", SHEXP_FFN, DIM)
            t(p + "ffn_up_shexp.weight", SHEXP_FFN, DIM)
            t(p + "ffn_down_shexp.weight", DIM, SHEXP_FFN)
        if arch in ("qwen2", "qwen2moe"):
            t(p + "attn_q.bias", q, scale=0.2)
            t(p + "attn_k.bias", kv, scale=0.2)
            t(p + "attn_v.bias", kv, scale=0.2)
        if arch in ("qwen3", "gemma3", "qwen3moe"):
            t(p + "attn_q_norm.weight", head_dim, scale=0.1, base=1.0)
            t(p + "attn_k_norm.weight", head_dim, scale=0.1, base=1.0)
        if arch in ("gemma2", "gemma3", "olmo2"):
            t(p + "post_attention_norm.weight", DIM, scale=0.1, base=1.0)
            t(p + "post_ffw_norm.weight", DIM, scale=0.1, base=1.0)
        if arch == "olmo2":  # q and k normed over all heads at once
            t(p + "attn_q_norm.weight", q, scale=0.1, base=1.0)
            t(p + "attn_k_norm.weight", kv, scale=0.1, base=1.0)
    if arch == "gemma3":  # layer 0 local (window 8), layer 1 global
        w.add_sliding_window(8)
        w.add_sliding_window_pattern(2)
    if arch == "mistral3":  # YaRN over an original context of 16 and the attention temperature from position 16
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(4.0)
        w.add_rope_scaling_orig_ctx_len(16)
        w.add_attn_temperature_scale(0.5)
    if arch == "phi3":  # partial RoPE (half of each head) and LongRoPE: context 256 > 64, so the long factors
        w.add_rope_dimension_count(head_dim // 2)
        w.add_rope_scaling_orig_ctx_len(64)
        w.add_rope_scaling_attn_factors(1.3)
        for kind in ("long", "short"):
            w.add_tensor(f"rope_factors_{kind}.weight",
                         np.exp(rng.uniform(0, 2.5, head_dim // 4)).astype(np.float32))
    if arch in ("granite", "granitemoe"):  # multipliers of the order of Granite 3.3's, each far from 1
        w.add_float32(arch + ".embedding_scale", 6.0)
        w.add_float32(arch + ".attention.scale", 0.5 / head_dim)
        w.add_float32(arch + ".residual_scale", 0.3)
        w.add_float32(arch + ".logit_scale", 0.25)
    if arch == "gemma2":  # layer 0 local (window 8; the pattern is gemma2's own), layer 1 global; caps low enough
        w.add_sliding_window(8)  # that the scores and logits of these small weights reach into tanh's bend
        w.add_attn_logit_softcapping(GEMMA2_ATTN_CAP)
        w.add_final_logit_softcapping(GEMMA2_FINAL_CAP)
    if extra:
        extra(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


ARCHS = [("llama", 16, None), ("qwen2", 16, None), ("qwen3", 32, None), ("gemma3", 32, None),
         ("gemma2", 32, None), ("gemma2", 32, gguf.GGMLQuantizationType.Q8_0),
         ("smollm3", 16, None), ("smollm3", 16, gguf.GGMLQuantizationType.Q8_0),
         ("phi3", 32, None), ("phi3", 32, gguf.GGMLQuantizationType.Q8_0),
         ("mistral3", 16, None), ("mistral3", 16, gguf.GGMLQuantizationType.Q8_0),
         ("granite", 16, None), ("granite", 16, gguf.GGMLQuantizationType.Q8_0), ("granitemoe", 16, None),
         ("granitemoe", 16, gguf.GGMLQuantizationType.Q8_0), ("ernie4_5", 16, None),
         ("ernie4_5", 16, gguf.GGMLQuantizationType.Q8_0), ("exaone", 16, None),
         ("exaone", 16, gguf.GGMLQuantizationType.Q8_0), ("olmo2", 16, None), ("olmo2", 32, None),
         ("olmo2", 16, gguf.GGMLQuantizationType.Q8_0),
         ("qwen3moe", 32, None), ("qwen3moe", 32, gguf.GGMLQuantizationType.Q8_0), ("qwen2moe", 16, None)]


@pytest.mark.parametrize("arch,head_dim,qtype", ARCHS,
                         ids=[a + ("-" + q.name.lower() if q else "") for a, _, q in ARCHS])
def test_architecture_matches_reference(tmp_path, arch, head_dim, qtype, isa):
    path = str(tmp_path / f"{arch}.gguf")
    write_model(path, arch, head_dim, seed=len(arch), qtype=qtype)
    ids = [int(x) for x in np.random.default_rng(1).integers(0, VOCAB, 40)]
    out = tmp_path / "logits.f32"
    for batch in (40, 3):  # one batch, and chunked prefill over the paged cache
        p = subprocess.run([BIN, "logits", "-m", path, "--ids", ",".join(map(str, ids)), "-o", str(out),
                            "--batch", str(batch)], capture_output=True, text=True, env=isa_env(isa))
        assert p.returncode == 0, p.stderr
        ours = np.fromfile(out, dtype=np.float32).reshape(len(ids), VOCAB)
        if batch == 40:
            ref = LlamaRef(path, act_quant=True).forward(ids)  # F32 weights: only the f16 KV cache is emulated
        assert np.abs(ours - ref).max() < 2e-3, f"{arch} batch {batch}: max diff {np.abs(ours - ref).max()}"
        assert (ours.argmax(1) == ref.argmax(1)).all()
    if arch in MOE:  # teeth: routing every row to the same experts is far from what we computed
        first = LlamaRef(path, act_quant=True)
        first.moe = lambda h, p: sum(first.swiglu_ffn(h, *((first.w3(p + f"ffn_{s}_exps.weight")[0][e],
                                                            first.w3(p + f"ffn_{s}_exps.weight")[1])
                                                           for s in ("gate", "up", "down")))
                                     for e in range(N_USED)) / N_USED
        assert np.abs(ours - first.forward(ids)).max() > 0.1
    if arch in ("gemma2", "gemma3"):  # teeth: the same model attending over everything is far from ours
        full = LlamaRef(path, act_quant=True)
        full.window = 0
        assert np.abs(ours - full.forward(ids)).max() > 0.1
    if arch == "smollm3":  # teeth: RoPE on every layer is far from what we computed
        rotary = LlamaRef(path, act_quant=True)
        rotary.no_rope_step = 0
        assert np.abs(ours - rotary.forward(ids)).max() > 0.02
    if arch == "mistral3":  # teeth: plain RoPE, or no attention temperature, is far from what we computed
        for attr, value in (("yarn", None), ("attn_temp", (0.0, 1))):
            other = LlamaRef(path, act_quant=True)
            setattr(other, attr, value)
            assert np.abs(ours - other.forward(ids)).max() > 0.02, attr
    if arch == "phi3":  # teeth: the short factors, no attention factor, or RoPE over whole heads are far off
        short = LlamaRef(path, act_quant=True)
        short.rope_freqs = short.w("rope_factors_short.weight")[0]
        for attr, value in (("rope_freqs", short.rope_freqs), ("rope_mscale", 1.0), ("rope_dim", 32)):
            other = LlamaRef(path, act_quant=True)
            setattr(other, attr, value)
            if attr == "rope_dim":
                other.rope_freqs = np.ones(16)
            assert np.abs(ours - other.forward(ids)).max() > 0.02, attr
    if arch == "olmo2":  # teeth: q/k normed per head (as qwen3 does) is far from what we computed
        per_head = LlamaRef(path, act_quant=True)
        per_head.qk_norm_heads = True
        assert np.abs(ours - per_head.forward(ids)).max() > 0.02
    if arch in ("granite", "granitemoe"):  # teeth: leaving out any one multiplier is far from ours
        for attr, value in (("embd_mult", 1.0), ("attn_scale", 1 / np.sqrt(head_dim)), ("residual_mult", 1.0),
                            ("logit_div", 1.0)):
            other = LlamaRef(path, act_quant=True)
            setattr(other, attr, value)
            assert np.abs(ours - other.forward(ids)).max() > 0.02, attr
    if arch == "gemma2":  # teeth: dropping either soft-cap (or RoPE base 10000 on the local layer) is far off
        for attr, value in (("attn_softcap", 0.0), ("final_softcap", 0.0), ("base_swa", 10000.0)):
            other = LlamaRef(path, act_quant=True)
            setattr(other, attr, value)
            assert np.abs(ours - other.forward(ids)).max() > 0.02, attr


def test_granite_without_rope(tmp_path):
    """Granite's rope.scaling.finetuned = false (llama.cpp: no layer rotates q and k) against the reference,
    and the same model with RoPE far from it."""
    path = str(tmp_path / "granite-nope.gguf")
    no_rope = lambda w: w.add_bool("granite.rope.scaling.finetuned", False)  # noqa: E731
    write_model(path, "granite", 16, seed=3, extra=no_rope)
    p = subprocess.run([BIN, "info", "-m", path], capture_output=True, text=True)
    assert p.returncode == 0 and "every layer attends without RoPE" in p.stdout, p.stdout + p.stderr
    ids = [int(x) for x in np.random.default_rng(2).integers(0, VOCAB, 24)]
    p, ours = _logits(path, ids, tmp_path)
    assert p.returncode == 0, p.stderr
    ref = LlamaRef(path, act_quant=True)
    assert ref.no_rope_step == 1
    err = np.abs(ours - ref.forward(ids)).max()
    ref.no_rope_step = 0
    assert err < 2e-3 and np.abs(ours - ref.forward(ids)).max() > 10 * err, err


@pytest.mark.parametrize("extra,message", [
    (lambda w: w.add_tensor("blk.0.ffn_up_shexp.weight", np.zeros((32, DIM), np.float32)),
     "granitemoe: shared experts (GraniteMoeShared) are not supported"),
    (lambda w: w.add_float32("granitemoe.expert_weights_scale", 2.5),
     "granitemoe.expert_weights_scale 2.5 is not supported"),
])
def test_granitemoe_refusals(tmp_path, extra, message):
    """What tachyon does not compute for Granite MoE files is refused, not ignored."""
    path = str(tmp_path / "granitemoe.gguf")
    write_model(path, "granitemoe", 16, seed=4, extra=extra)
    p = subprocess.run([BIN, "info", "-m", path], capture_output=True, text=True)
    assert p.returncode != 0 and message in p.stderr, p.stdout + p.stderr


INFO_LINES = {"gemma2": "soft-capping    attention scores 0.3, logits 1.5", "smollm3": "every 4th layer attends without RoPE",
              "granite": "multipliers     embeddings 6, attention scores 0.03125, residual 0.3, "
                         "logits 1/0.25",
              "phi3": "longrope        long frequency factors, attention factor 1.3",
              "mistral3": "yarn            factor 4 over original context 16"}


@pytest.mark.parametrize("arch", sorted(INFO_LINES))
def test_info_shows_architecture(tmp_path, arch):
    path = str(tmp_path / f"{arch}.gguf")
    write_model(path, arch, 32 if arch in ("gemma2", "phi3") else 16, seed=1)
    p = subprocess.run([BIN, "info", "-m", path], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert f"architecture    {arch}" in p.stdout and INFO_LINES[arch] in p.stdout, p.stdout


def test_unknown_architecture_is_named(tmp_path):
    path = str(tmp_path / "mamba.gguf")
    w = gguf.GGUFWriter(path, "mamba")
    w.add_tensor("token_embd.weight", np.zeros((8, 32), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    p = subprocess.run([BIN, "info", "-m", path], capture_output=True, text=True)
    assert p.returncode != 0
    assert "unsupported architecture 'mamba'" in p.stderr, p.stderr


# --- RoPE scaling ---------------------------------------------------------------------------------------

def llama3_freq_factors(head_dim, base, factor=8.0, low=1.0, high=4.0, orig_ctx=64):
    """The rope_freqs tensor a llama3 GGUF carries (convert_hf_to_gguf's formula): per-dimension divisors of
    the RoPE frequencies. A tiny orig_ctx puts most dimensions in the scaled and smoothed bands."""
    out = []
    for i in range(head_dim // 2):
        freq = base ** (-2.0 * i / head_dim)
        wavelen = 2 * np.pi / freq
        if wavelen < orig_ctx / high:
            out.append(1.0)
        elif wavelen > orig_ctx / low:
            out.append(factor)
        else:
            smooth = (orig_ctx / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, np.float32)


def _logits(path, ids, tmp_path):
    out = tmp_path / "logits.f32"
    p = subprocess.run([BIN, "logits", "-m", path, "--ids", ",".join(map(str, ids)), "-o", str(out)],
                       capture_output=True, text=True)
    return p, (np.fromfile(out, dtype=np.float32).reshape(len(ids), VOCAB) if p.returncode == 0 else None)


SCALINGS = [
    ("linear", "llama", lambda w: (w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR),
                                   w.add_rope_scaling_factor(4.0))),
    ("linear", "qwen2", lambda w: (w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR),
                                   w.add_rope_scaling_factor(4.0))),
    ("llama3", "llama", lambda w: w.add_tensor("rope_freqs.weight", llama3_freq_factors(16, 10000.0))),
]


@pytest.mark.parametrize("kind,arch,extra", SCALINGS, ids=["%s-%s" % (k, a) for k, a, _ in SCALINGS])
def test_rope_scaling_matches_reference(tmp_path, kind, arch, extra):
    path = str(tmp_path / f"{arch}-{kind}.gguf")
    write_model(path, arch, 16, seed=7, extra=extra)
    plain = str(tmp_path / f"{arch}-plain.gguf")
    write_model(plain, arch, 16, seed=7)  # the same weights without scaling
    ids = [int(x) for x in np.random.default_rng(2).integers(0, VOCAB, 48)]
    p, ours = _logits(path, ids, tmp_path)
    assert p.returncode == 0, p.stderr
    ref = LlamaRef(path, act_quant=True).forward(ids)
    unscaled = LlamaRef(plain, act_quant=True).forward(ids)
    err = np.abs(ours - ref).max()
    assert err < 2e-3, f"{kind} {arch}: max diff {err}"
    # the check has teeth: ignoring the scaling would be off by far more than the tolerance
    assert np.abs(ours - unscaled).max() > 50 * max(err, 2e-3), np.abs(ours - unscaled).max()


@pytest.mark.parametrize("kind", ["yarn", "longrope"])
def test_unsupported_rope_scaling_is_refused(tmp_path, kind):
    # yarn also rescales attention: running it as plain RoPE would silently give wrong logits
    path = str(tmp_path / f"{kind}.gguf")

    def extra(w):
        w.add_rope_scaling_type(gguf.RopeScalingType(kind))
        w.add_rope_scaling_factor(4.0)
        w.add_rope_scaling_orig_ctx_len(64)

    write_model(path, "llama", 16, seed=3, extra=extra)
    p, _ = _logits(path, [1, 2, 3], tmp_path)
    assert p.returncode != 0
    assert f"unsupported rope scaling type '{kind}'" in p.stderr, p.stderr
