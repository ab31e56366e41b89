"""Independent numpy reference of the gpt-oss forward pass, for checking tachyon's logits.

Written from HF transformers' GptOss modeling code and llama.cpp's openai-moe graph, not from tachyon's C code:
- each layer: x += o_proj(attention(RMSNorm(x))) + o bias; x += MoE(RMSNorm_post_attention(x));
- attention: q, k, v projections with biases; NeoX RoPE (rotate halves) with YaRN frequencies, every layer
  alike; scores q·k / sqrt(head_dim); a learned sink logit per head concatenated to each query's scores
  before the softmax and dropped after it (HF: combined_logits, then probs[..., :-1]); sliding window on the
  even layers (query i sees keys j with i - window < j <= i), full causal attention on the odd ones;
- YaRN as llama.cpp computes it (ggml's rope_yarn with ext_factor 1): the correction range between the dims
  that turn beta_fast and beta_slow times over the original context, floored / ceiled and clamped to
  [0, rope_dim - 1]; frequency d mixed between base^(-2d/D) (extrapolation) and base^(-2d/D) / factor by the
  linear ramp over that range; cos and sin times the magnitude 1 + 0.1·ln(factor) (HF's attention_factor);
- MoE: router logits = W x + b; the top k logits; their softmax is the routing weight (HF: softmax over the
  top-k values); each chosen expert: gate = W_g x + b_g, up = W_u x + b_u, gate clamped above at 7, up to
  [-7, 7], glu = gate·sigmoid(1.702·gate), out = W_d (glu·(up + 1)) + b_d, weighted and summed.

Weight reading, activation rounding (act_quant) and the f16 KV cache emulation are LlamaRef's (llama_ref.py).
"""
import numpy as np

from llama_ref import LlamaRef

SWIGLU_ALPHA, SWIGLU_LIMIT = 1.702, 7.0


class GptOssRef(LlamaRef):
    def __init__(self, path, act_quant=True):
        import gguf
        self.r = gguf.GGUFReader(path)
        self.act_quant = act_quant
        self.kv_f16 = act_quant
        f = self.r.fields
        a = "gpt-oss"

        def val(key, default=None):
            return f[key].contents() if key in f else default

        self.dim = int(val(f"{a}.embedding_length"))
        self.n_layers = int(val(f"{a}.block_count"))
        self.n_heads = int(val(f"{a}.attention.head_count"))
        self.n_kv = int(val(f"{a}.attention.head_count_kv", self.n_heads))
        self.head_dim = int(val(f"{a}.attention.key_length", self.dim // self.n_heads))
        self.eps = float(val(f"{a}.attention.layer_norm_rms_epsilon", 1e-5))
        self.base = float(val(f"{a}.rope.freq_base", 10000.0))
        self.n_expert_used = int(val(f"{a}.expert_used_count"))
        self.window = int(val(f"{a}.attention.sliding_window", 128))
        self.yarn = None
        if val(f"{a}.rope.scaling.type", "none") == "yarn":
            orig = int(val(f"{a}.rope.scaling.original_context_length", val(f"{a}.context_length")))
            self.yarn = (float(val(f"{a}.rope.scaling.factor")), orig)
        self.t = {t.name: t for t in self.r.tensors}
        self._cache = {}
        self.final_softcap = 0.0
        # switches for the tests' teeth: each turns one of gpt-oss's features off
        self.use_sinks, self.use_clamp, self.use_window = True, True, True

    def inv_freq(self):
        d = self.head_dim
        half = d // 2
        inv = self.base ** (-2.0 * np.arange(half) / d)
        mscale = 1.0
        if self.yarn:
            factor, orig = self.yarn

            def corr(turns):  # the dim whose wavelength turns `turns` times over the original context
                return d * np.log(orig / (turns * 2 * np.pi)) / (2 * np.log(self.base))
            lo, hi = max(np.floor(corr(32.0)), 0), min(np.ceil(corr(1.0)), d - 1)
            extrap = 1 - np.clip((np.arange(half) - lo) / max(hi - lo, 0.001), 0, 1)
            inv = inv / factor * (1 - extrap) + inv * extrap
            mscale = 1 + 0.1 * np.log(factor)
        return inv, mscale

    def rope_neox(self, x, pos):
        inv, mscale = self.inv_freq()
        half = self.head_dim // 2
        ang = pos[:, None] * inv[None, :]
        c, s = mscale * np.cos(ang)[:, None, :], mscale * np.sin(ang)[:, None, :]
        a, b = x[..., :half], x[..., half:]
        return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)

    def experts(self, h, p):
        logits = self.matmul(h, p + "ffn_gate_inp.weight") + self.w(p + "ffn_gate_inp.bias")[0]
        (g, gt), (u, ut), (d, dt) = (self.w3(p + f"ffn_{s}_exps.weight") for s in ("gate", "up", "down"))
        gb, ub, db = (self.w(p + f"ffn_{s}_exps.bias")[0] for s in ("gate", "up", "down"))
        out = np.zeros_like(h)
        for t in range(h.shape[0]):
            top = np.argsort(-logits[t], kind="stable")[:self.n_expert_used]
            wts = np.exp(logits[t, top] - logits[t, top].max())
            wts /= wts.sum()
            for e, we in zip(top, wts):
                x = h[t:t + 1]
                gate, up = self.mm(x, g[e], gt) + gb[e], self.mm(x, u[e], ut) + ub[e]
                if self.use_clamp:
                    gate, up = np.minimum(gate, SWIGLU_LIMIT), np.clip(up, -SWIGLU_LIMIT, SWIGLU_LIMIT)
                glu = gate / (1 + np.exp(-SWIGLU_ALPHA * gate))
                out[t] += we * (self.mm(glu * (up + 1), d[e], dt)[0] + db[e])
        return out

    def hidden(self, ids):
        ids = np.asarray(ids)
        n, hd, rep = len(ids), self.head_dim, self.n_heads // self.n_kv
        x = self.w("token_embd.weight")[0][ids].copy()
        pos = np.arange(n, dtype=np.float64)
        causal = np.triu(np.full((n, n), -np.inf), k=1)
        local = causal.copy()
        local[np.tril(np.ones((n, n), dtype=bool), k=-self.window)] = -np.inf
        for l in range(self.n_layers):
            p = f"blk.{l}."
            h = self.rmsnorm(x, p + "attn_norm.weight")
            q, k, v = (self.matmul(h, p + f"attn_{s}.weight") + self.w(p + f"attn_{s}.bias")[0] for s in "qkv")
            q = self.rope_neox(q.reshape(n, self.n_heads, hd), pos)
            k = self.rope_neox(k.reshape(n, self.n_kv, hd), pos)
            v = v.reshape(n, self.n_kv, hd)
            if self.kv_f16:
                k, v = k.astype(np.float16).astype(np.float64), v.astype(np.float16).astype(np.float64)
            mask = local if (l % 2 == 0 and self.use_window) else causal
            sinks = self.w(p + "attn_sinks.weight")[0]
            out = np.empty((n, self.n_heads, hd))
            for hh in range(self.n_heads):
                sc = q[:, hh] @ k[:, hh // rep].T / np.sqrt(hd) + mask
                if self.use_sinks:
                    sc = np.concatenate([sc, np.full((n, 1), sinks[hh])], axis=1)
                pr = np.exp(sc - sc.max(axis=1, keepdims=True))
                pr /= pr.sum(axis=1, keepdims=True)
                out[:, hh] = pr[:, :n] @ v[:, hh // rep]
            x = x + self.matmul(out.reshape(n, -1), p + "attn_output.weight") + self.w(p + "attn_output.bias")[0]
            x = x + self.experts(self.rmsnorm(x, p + "post_attention_norm.weight"), p)
        return self.rmsnorm(x, "output_norm.weight")
