"""Independent numpy reference of the Llama-family forward pass, for checking tachyon's logits.

Covers llama, qwen2, qwen3, qwen3moe, qwen2moe and gemma3 (QK-norm, sandwich norms after attention and FFN, GeGLU with tanh GELU,
embeddings times sqrt(dim), sliding-window attention on 5 of every 6 layers with RoPE base 10000 there, as the
Gemma 3 paper and HF's Gemma3 modeling code define it; the GGUF converter already stores norm weights as 1+w).
gemma2 is gemma3's block without QK-norm, as HF's Gemma2 modeling code defines it: sliding-window attention on
the even layers (layer_idx % 2 == 0) with the one RoPE base, scores scaled by query_pre_attn_scalar^-0.5 (the
head dim; dim / heads for the 27B) and soft-capped, c·tanh(s/c) with attn_logit_softcapping before the mask,
and the logits soft-capped with final_logit_softcapping (50 and 30 unless the file says otherwise).
smollm3 is llama with no RoPE on every fourth layer (HF's no_rope_layers).
phi3 (HF's Phi3 modeling code): fused qkv_proj and gate_up_proj, NeoX RoPE over the first
rope.dimension_count dims of each head, LongRoPE factors (long when the context exceeds the original one) and
its attention factor on cos and sin.
mistral3 (HF's Ministral3): llama with YaRN frequencies and the Llama 4 attention temperature on q.
The MoE FFN follows HF's Qwen3MoeSparseMoeBlock / Qwen2MoeSparseMoeBlock: softmax of the router logits over all
experts, the top-k, their weights renormalised (qwen3moe: norm_topk_prob) or not (qwen2moe), each chosen
expert a SwiGLU FFN; qwen2moe adds a shared expert scaled by sigmoid(shared_expert_gate · x).

Weights come from the `gguf` PyPI package (its reader and its own dequantization), the math is plain numpy
in float64, written from the architecture's definition rather than from tachyon's C code.

`act_quant=True` additionally emulates what every llama.cpp-style CPU engine does on purpose: activations
entering a quantized matmul are rounded to 8-bit blocks of 32 (Q8_0 with an f16 scale for Q8_0/Q4_0/Q5_0
weights; Q8_1 with an f32 scale for Q4_1/Q5_1), and K/V are stored as f16. With that on, the reference and
the engine compute the same real-number function and differ only by float32 rounding, so a tight bound
holds; with it off, the bound is the (larger) cost of 8-bit activations themselves.
"""
import math

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

Q8_0_ACT = {Q.Q8_0, Q.Q4_0, Q.Q5_0, Q.IQ4_NL, Q.MXFP4}
Q8_1_ACT = {Q.Q4_1, Q.Q5_1}
Q8_K_ACT = {Q.Q4_K, Q.Q5_K, Q.Q6_K, Q.Q2_K, Q.Q3_K, Q.IQ4_XS}


def _round_away(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def quant_dequant_act(x, qtype):
    """Rounds activations x (n, k) the way the engine's activation quantizer does for weight type qtype."""
    if qtype in Q8_0_ACT or qtype in Q8_1_ACT:
        bs, f16_scale = 32, qtype in Q8_0_ACT
    elif qtype in Q8_K_ACT:
        bs, f16_scale = 256, False
    else:
        return x
    n, k = x.shape
    xb = x.astype(np.float32).reshape(n, k // bs, bs)
    amax = np.abs(xb).max(axis=2, keepdims=True)
    d = (amax / 127.0).astype(np.float32)
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0).astype(np.float32)
    q = np.clip(_round_away(xb * inv), -127, 127)
    if f16_scale:
        d = d.astype(np.float16).astype(np.float32)
    return (q * d).reshape(n, k).astype(np.float64)


class LlamaRef:
    # what the architectures that have them read in __init__ (subclasses with their own __init__ keep these)
    embd_mult = residual_mult = logit_div = 1.0
    post_only = qk_norm_heads = False

    def __init__(self, path, act_quant=True, kv_f16=None):
        self.r = gguf.GGUFReader(path)
        self.act_quant = act_quant
        self.kv_f16 = act_quant if kv_f16 is None else kv_f16  # round K/V to f16 like the engine's cache
        f = self.r.fields
        arch = bytes(f["general.architecture"].parts[-1]).decode()
        self.arch = arch

        def val(key, default=None):
            if key not in f:
                return default
            return f[key].contents()

        self.dim = int(val(f"{arch}.embedding_length"))
        self.n_layers = int(val(f"{arch}.block_count"))
        self.n_heads = int(val(f"{arch}.attention.head_count"))
        self.n_kv = int(val(f"{arch}.attention.head_count_kv", self.n_heads))
        self.head_dim = int(val(f"{arch}.attention.key_length", self.dim // self.n_heads))
        self.eps = float(val(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5))
        self.base = float(val(f"{arch}.rope.freq_base", 10000.0))
        self.rope_dim = int(val(f"{arch}.rope.dimension_count", self.head_dim))
        self.neox = arch in ("qwen2", "qwen3", "gemma2", "gemma3", "qwen3moe", "qwen2moe", "phi3", "exaone",
                             "olmo2")
        self.post_only = arch == "olmo2"  # OLMo 2: no norm before attention or FFN, q/k norms over all heads
        self.qk_norm_heads = False
        self.n_expert_used = int(val(f"{arch}.expert_used_count", 0))
        self.moe_norm = arch in ("qwen3moe", "granitemoe")
        self.gemma = arch in ("gemma2", "gemma3")
        default_window = 4096 if arch == "gemma2" else 0
        self.window = int(val(f"{arch}.attention.sliding_window", default_window)) if self.gemma else 0
        self.swa_pattern = int(val(f"{arch}.attention.sliding_window_pattern", 2 if arch == "gemma2" else 6))
        self.base_swa = 10000.0 if arch == "gemma3" else self.base  # gemma2: one base for every layer
        g27 = (arch, self.n_layers) in (("gemma2", 46), ("gemma3", 62))  # query_pre_attn_scalar = dim / heads
        self.attn_scale = 1.0 / np.sqrt(self.dim / self.n_heads if g27 else self.head_dim)
        # SmolLM3 (HF's no_rope_layers, no_rope_layer_interval 4): layers l with (l + 1) % 4 == 0 skip RoPE
        self.no_rope_step = 4 if arch == "smollm3" else 0
        g2 = arch == "gemma2"
        self.attn_softcap = float(val(f"{arch}.attn_logit_softcapping", 50.0)) if g2 else 0.0
        self.final_softcap = float(val(f"{arch}.final_logit_softcapping", 30.0)) if g2 else 0.0
        # Granite's multipliers (HF's embedding_multiplier, attention_multiplier, residual_multiplier,
        # logits_scaling); absent or 0: none
        gr = arch in ("granite", "granitemoe")
        self.embd_mult = float(val(f"{arch}.embedding_scale", 0.0) or 1.0) if gr else 1.0
        if gr and float(val(f"{arch}.attention.scale", 0.0)):
            self.attn_scale = float(val(f"{arch}.attention.scale"))
        self.residual_mult = float(val(f"{arch}.residual_scale", 0.0) or 1.0) if gr else 1.0
        self.logit_div = float(val(f"{arch}.logit_scale", 0.0) or 1.0) if gr else 1.0
        if gr and not val(f"{arch}.rope.scaling.finetuned", True):  # llama.cpp: no layer rotates
            self.no_rope_step = 1
        self.t = {t.name: t for t in self.r.tensors}
        self._cache = {}
        # RoPE scaling as GGUF carries it: "linear" divides positions by the factor; llama3-style scaling comes
        # as a rope_freqs tensor of per-dimension divisors of the frequencies. Others are not modelled here.
        kind = val(f"{arch}.rope.scaling.type", "none")
        self.rope_pos_scale = 1.0
        self.yarn = None
        orig_ctx = int(val(f"{arch}.rope.scaling.original_context_length", val(f"{arch}.context_length", 2048)))
        if kind == "linear":
            self.rope_pos_scale = 1.0 / float(val(f"{arch}.rope.scaling.factor", 1.0))
        elif kind == "yarn" and arch == "mistral3":
            # HF's _compute_yarn_parameters (truncate): interpolated 1/(factor·base^(2d/D)) and extrapolated
            # 1/base^(2d/D) frequencies mixed by a ramp over the correction range (the attention factor below)
            self.yarn = (float(val(f"{arch}.rope.scaling.factor")), orig_ctx,
                         float(val(f"{arch}.rope.scaling.yarn_beta_fast", 32.0)),
                         float(val(f"{arch}.rope.scaling.yarn_beta_slow", 1.0)))
        elif kind != "none":
            raise NotImplementedError("rope scaling %r" % kind)
        self.rope_freqs = self.w("rope_freqs.weight")[0] if self.has("rope_freqs.weight") else None
        # Phi-3 LongRoPE (HF's Phi3 rotary embedding with rope_scaling type longrope): the long factors when the
        # context is longer than the original one, else the short; cos and sin times the attention factor
        if self.has("rope_factors_long.weight"):
            ctx = int(val(f"{arch}.context_length"))
            orig = int(val(f"{arch}.rope.scaling.original_context_length", ctx))
            self.rope_freqs = self.w("rope_factors_long.weight" if ctx > orig else "rope_factors_short.weight")[0]
        self.rope_mscale = float(val(f"{arch}.rope.scaling.attn_factor", 1.0))
        if self.yarn:
            # HF's yarn attention_factor: get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim), which
            # the GGUF carries as yarn_log_multiplier = mscale_all_dim (mscale 1); without it, get_mscale(factor)
            lf = math.log(self.yarn[0])
            lm = float(val(f"{arch}.rope.scaling.yarn_log_multiplier", 0.0))
            self.rope_mscale *= (1 + 0.1 * lf) / (1 + 0.1 * lm * lf) if lm > 0 else 1 + 0.1 * lf
        # Mistral 3's llama_4_scaling_beta (HF's Ministral3 _get_llama_4_attn_scale): q times
        # 1 + beta·ln(1 + floor(pos / original context))
        self.attn_temp = (float(val(f"{arch}.attention.temperature_scale", 0.0)), orig_ctx) if arch == "mistral3" \
            else (0.0, 1)

    def w(self, name):
        """(weight as float64 (rows, cols), its ggml type)"""
        if name not in self._cache:
            t = self.t[name]
            a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)
            rows = int(t.shape[1]) if len(t.shape) > 1 else 1
            self._cache[name] = (a.reshape(rows, int(t.shape[0])) if rows > 1 else a.reshape(-1), t.tensor_type)
        return self._cache[name]

    def w3(self, name):
        """(3-D expert tensor as float64 (n_expert, rows, cols), its ggml type)"""
        if name not in self._cache:
            t = self.t[name]
            a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)
            self._cache[name] = (a.reshape(int(t.shape[2]), int(t.shape[1]), int(t.shape[0])), t.tensor_type)
        return self._cache[name]

    def mm(self, x, w, qt):
        if self.act_quant:
            x = quant_dequant_act(x, qt)
        return x @ w.T

    def swiglu_ffn(self, h, wg, wu, wd):
        """down(SiLU(gate·h) · up·h); each w: (matrix, type)"""
        g, u = self.mm(h, *wg), self.mm(h, *wu)
        return self.mm(g / (1 + np.exp(-g)) * u, *wd)

    def moe(self, h, p):
        logits = self.matmul(h, p + "ffn_gate_inp.weight")
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        (g, gt), (u, ut), (d, dt) = (self.w3(p + f"ffn_{s}_exps.weight") for s in ("gate", "up", "down"))
        out = np.zeros_like(h)
        for t in range(h.shape[0]):
            sel = np.argsort(-probs[t], kind="stable")[:self.n_expert_used]
            wts = probs[t, sel] / (probs[t, sel].sum() if self.moe_norm else 1.0)
            for e, we in zip(sel, wts):
                out[t] += we * self.swiglu_ffn(h[t:t + 1], (g[e], gt), (u[e], ut), (d[e], dt))[0]
        if self.has(p + "ffn_gate_inp_shexp.weight"):
            gate = 1 / (1 + np.exp(-(h @ self.w(p + "ffn_gate_inp_shexp.weight")[0])))
            sh = self.swiglu_ffn(h, *(self.w(p + f"ffn_{s}_shexp.weight") for s in ("gate", "up", "down")))
            out += gate[:, None] * sh
        return out

    def has(self, name):
        return name in self.t

    def matmul(self, x, name):
        w, qt = self.w(name)
        if self.act_quant:
            x = quant_dequant_act(x, qt)
        return x @ w.T

    def rmsnorm(self, x, wname):
        w = self.w(wname)[0] if wname else 1.0  # None: no weight
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def is_local(self, layer):
        """Sliding-window layer (every swa_pattern-th layer is global: gemma3 6, gemma2 2)."""
        return self.window > 0 and (layer + 1) % self.swa_pattern != 0

    def rope(self, x, pos, local=False):
        # x (n, heads, head_dim); local layers: their base (gemma3: 10000), positions unscaled
        half = self.rope_dim // 2
        base, pos_scale = (self.base_swa, 1.0) if local else (self.base, self.rope_pos_scale)
        inv = base ** (-2.0 * np.arange(half) / self.rope_dim)
        if self.rope_freqs is not None:
            inv = inv / self.rope_freqs
        if self.yarn and not local:
            factor, orig, beta_fast, beta_slow = self.yarn
            dim = self.rope_dim

            def corr(turns):
                return dim * np.log(orig / (turns * 2 * np.pi)) / (2 * np.log(base))
            lo, hi = max(np.floor(corr(beta_fast)), 0), min(np.ceil(corr(beta_slow)), dim - 1)
            ramp = np.clip((np.arange(half) - lo) / (hi - lo if hi > lo else 0.001), 0, 1)
            extrap = 1 - ramp
            inv = inv / factor * (1 - extrap) + inv * extrap
        ang = (pos * pos_scale)[:, None] * inv[None, :]
        c, s = self.rope_mscale * np.cos(ang)[:, None, :], self.rope_mscale * np.sin(ang)[:, None, :]
        x = x.copy()
        if self.neox:
            a, b = x[..., :half].copy(), x[..., half:2 * half].copy()
            x[..., :half], x[..., half:2 * half] = a * c - b * s, a * s + b * c
        else:
            a, b = x[..., 0:2 * half:2].copy(), x[..., 1:2 * half:2].copy()
            x[..., 0:2 * half:2], x[..., 1:2 * half:2] = a * c - b * s, a * s + b * c
        return x

    def forward(self, ids):
        """Logits (n, vocab) for every position of one sequence, float64."""
        out_name = "output.weight" if self.has("output.weight") else "token_embd.weight"
        logits = self.matmul(self.hidden(ids), out_name)
        if self.final_softcap:
            logits = self.final_softcap * np.tanh(logits / self.final_softcap)
        return logits / self.logit_div

    def hidden(self, ids):
        """Final hidden states after the output norm (n, dim) for every position, float64 (embeddings)."""
        ids = np.asarray(ids)
        n, hd = len(ids), self.head_dim
        emb, _ = self.w("token_embd.weight")
        x = emb[ids].copy()
        if self.gemma:
            x *= np.sqrt(self.dim)
        x *= self.embd_mult
        pos = np.arange(n, dtype=np.float64)
        mask_global = np.triu(np.full((n, n), -np.inf), k=1)
        mask_local = mask_global.copy()
        if self.window:  # query i sees keys j with i - window < j <= i
            mask_local[np.tril(np.ones((n, n), dtype=bool), k=-self.window)] = -np.inf
        rep = self.n_heads // self.n_kv
        for l in range(self.n_layers):
            p = f"blk.{l}."
            h = x if self.post_only else self.rmsnorm(x, p + "attn_norm.weight")
            if self.has(p + "attn_qkv.weight"):  # phi3: one matrix, rows q then k then v
                qkv = self.matmul(h, p + "attn_qkv.weight")
                q, k, v = np.split(qkv, [self.n_heads * hd, (self.n_heads + self.n_kv) * hd], axis=1)
            else:
                q, k, v = (self.matmul(h, p + f"attn_{s}.weight") for s in "qkv")
            for s, arr in (("q", q), ("k", k), ("v", v)):
                if self.has(p + f"attn_{s}.bias"):
                    arr += self.w(p + f"attn_{s}.bias")[0]
            if self.post_only and self.qk_norm_heads:  # (a wrong variant, for tests' teeth: per head)
                q, k = ((self.rmsnorm(a.reshape(n, -1, hd), None) *
                         self.w(p + f"attn_{s}_norm.weight")[0].reshape(-1, hd)).reshape(n, -1)
                        for a, s in ((q, "q"), (k, "k")))
            elif self.post_only:
                q = self.rmsnorm(q, p + "attn_q_norm.weight")
                k = self.rmsnorm(k, p + "attn_k_norm.weight")
            q = q.reshape(n, self.n_heads, hd)
            k = k.reshape(n, self.n_kv, hd)
            v = v.reshape(n, self.n_kv, hd)
            if self.has(p + "attn_q_norm.weight") and not self.post_only:
                q = self.rmsnorm(q, p + "attn_q_norm.weight")
                k = self.rmsnorm(k, p + "attn_k_norm.weight")
            if self.attn_temp[0]:
                q = q * (1 + self.attn_temp[0] * np.log(1 + np.floor(pos / self.attn_temp[1])))[:, None, None]
            local = self.is_local(l)
            mask = mask_local if local else mask_global
            if not (self.no_rope_step and (l + 1) % self.no_rope_step == 0):
                q, k = self.rope(q, pos, local), self.rope(k, pos, local)
            if self.kv_f16:  # the engine's KV cache is f16
                k = k.astype(np.float16).astype(np.float64)
                v = v.astype(np.float16).astype(np.float64)
            out = np.empty((n, self.n_heads, hd))
            for hh in range(self.n_heads):
                kh, vh = k[:, hh // rep], v[:, hh // rep]
                sc = q[:, hh] @ kh.T * self.attn_scale
                if self.attn_softcap:
                    sc = self.attn_softcap * np.tanh(sc / self.attn_softcap)
                sc = sc + mask
                sc = np.exp(sc - sc.max(axis=1, keepdims=True))
                out[:, hh] = (sc / sc.sum(axis=1, keepdims=True)) @ vh
            a = self.matmul(out.reshape(n, -1), p + "attn_output.weight")
            if self.gemma or self.post_only:
                a = self.rmsnorm(a, p + "post_attention_norm.weight")
            x = x + a * self.residual_mult
            h = x if self.post_only else self.rmsnorm(x, p + "ffn_norm.weight")
            if self.has(p + "ffn_gate_inp.weight"):
                x = x + self.moe(h, p) * self.residual_mult
                continue
            if self.has(p + "ffn_gate.weight"):
                g = self.matmul(h, p + "ffn_gate.weight")
                u = self.matmul(h, p + "ffn_up.weight")
            else:  # phi3: gate_up_proj, the gate's rows first (HF's Phi3MLP chunks it in two)
                g, u = np.split(self.matmul(h, p + "ffn_up.weight"), 2, axis=1)
            if self.gemma:  # GELU, tanh approximation
                act = 0.5 * g * (1 + np.tanh(np.sqrt(2 / np.pi) * (g + 0.044715 * g ** 3)))
            else:
                act = g / (1 + np.exp(-g))
            f = self.matmul(act * u, p + "ffn_down.weight")
            if self.gemma or self.post_only:
                f = self.rmsnorm(f, p + "post_ffw_norm.weight")
            x = x + f * self.residual_mult
        return self.rmsnorm(x, "output_norm.weight")

    def greedy(self, ids, n_new, eos=None):
        ids = list(ids)
        out = []
        for _ in range(n_new):
            t = int(np.argmax(self.forward(ids)[-1]))
            if eos is not None and t in eos:
                break
            out.append(t)
            ids.append(t)
        return out
