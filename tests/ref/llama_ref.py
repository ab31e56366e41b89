"""Independent numpy reference of the Llama-family forward pass, for checking tachyon's logits.

Covers llama, qwen2, qwen3, qwen3moe, qwen2moe and gemma3 (QK-norm, sandwich norms after attention and FFN, GeGLU with tanh GELU,
embeddings times sqrt(dim), sliding-window attention on 5 of every 6 layers with RoPE base 10000 there, as the
Gemma 3 paper and HF's Gemma3 modeling code define it; the GGUF converter already stores norm weights as 1+w).
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
import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

Q8_0_ACT = {Q.Q8_0, Q.Q4_0, Q.Q5_0, Q.IQ4_NL}
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
        self.neox = arch in ("qwen2", "qwen3", "gemma3", "qwen3moe", "qwen2moe")
        self.n_expert_used = int(val(f"{arch}.expert_used_count", 0))
        self.moe_norm = arch == "qwen3moe"
        self.gemma = arch == "gemma3"
        self.window = int(val(f"{arch}.attention.sliding_window", 0)) if self.gemma else 0
        self.swa_pattern = int(val(f"{arch}.attention.sliding_window_pattern", 6))
        self.t = {t.name: t for t in self.r.tensors}
        self._cache = {}
        # RoPE scaling as GGUF carries it: "linear" divides positions by the factor; llama3-style scaling comes
        # as a rope_freqs tensor of per-dimension divisors of the frequencies. Others are not modelled here.
        kind = val(f"{arch}.rope.scaling.type", "none")
        self.rope_pos_scale = 1.0
        if kind == "linear":
            self.rope_pos_scale = 1.0 / float(val(f"{arch}.rope.scaling.factor", 1.0))
        elif kind != "none":
            raise NotImplementedError("rope scaling %r" % kind)
        self.rope_freqs = self.w("rope_freqs.weight")[0] if self.has("rope_freqs.weight") else None

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
        w = self.w(wname)[0]
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def is_local(self, layer):
        """Sliding-window layer (Gemma 3: every swa_pattern-th layer is global)."""
        return self.window > 0 and (layer + 1) % self.swa_pattern != 0

    def rope(self, x, pos, local=False):
        # x (n, heads, head_dim); local layers: base 10000, positions unscaled
        half = self.rope_dim // 2
        base, pos_scale = (10000.0, 1.0) if local else (self.base, self.rope_pos_scale)
        inv = base ** (-2.0 * np.arange(half) / self.rope_dim)
        if self.rope_freqs is not None:
            inv = inv / self.rope_freqs
        ang = (pos * pos_scale)[:, None] * inv[None, :]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
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
        return self.matmul(self.hidden(ids), out_name)

    def hidden(self, ids):
        """Final hidden states after the output norm (n, dim) for every position, float64 (embeddings)."""
        ids = np.asarray(ids)
        n, hd = len(ids), self.head_dim
        emb, _ = self.w("token_embd.weight")
        x = emb[ids].copy()
        if self.gemma:
            x *= np.sqrt(self.dim)
        pos = np.arange(n, dtype=np.float64)
        mask_global = np.triu(np.full((n, n), -np.inf), k=1)
        mask_local = mask_global.copy()
        if self.window:  # query i sees keys j with i - window < j <= i
            mask_local[np.tril(np.ones((n, n), dtype=bool), k=-self.window)] = -np.inf
        rep = self.n_heads // self.n_kv
        for l in range(self.n_layers):
            p = f"blk.{l}."
            h = self.rmsnorm(x, p + "attn_norm.weight")
            q, k, v = (self.matmul(h, p + f"attn_{s}.weight") for s in "qkv")
            for s, arr in (("q", q), ("k", k), ("v", v)):
                if self.has(p + f"attn_{s}.bias"):
                    arr += self.w(p + f"attn_{s}.bias")[0]
            q = q.reshape(n, self.n_heads, hd)
            k = k.reshape(n, self.n_kv, hd)
            v = v.reshape(n, self.n_kv, hd)
            if self.has(p + "attn_q_norm.weight"):
                q = self.rmsnorm(q, p + "attn_q_norm.weight")
                k = self.rmsnorm(k, p + "attn_k_norm.weight")
            local = self.is_local(l)
            mask = mask_local if local else mask_global
            q, k = self.rope(q, pos, local), self.rope(k, pos, local)
            if self.kv_f16:  # the engine's KV cache is f16
                k = k.astype(np.float16).astype(np.float64)
                v = v.astype(np.float16).astype(np.float64)
            out = np.empty((n, self.n_heads, hd))
            for hh in range(self.n_heads):
                kh, vh = k[:, hh // rep], v[:, hh // rep]
                sc = q[:, hh] @ kh.T / np.sqrt(hd) + mask
                sc = np.exp(sc - sc.max(axis=1, keepdims=True))
                out[:, hh] = (sc / sc.sum(axis=1, keepdims=True)) @ vh
            a = self.matmul(out.reshape(n, -1), p + "attn_output.weight")
            if self.gemma:
                a = self.rmsnorm(a, p + "post_attention_norm.weight")
            x = x + a
            h = self.rmsnorm(x, p + "ffn_norm.weight")
            if self.has(p + "ffn_gate_inp.weight"):
                x = x + self.moe(h, p)
                continue
            g = self.matmul(h, p + "ffn_gate.weight")
            u = self.matmul(h, p + "ffn_up.weight")
            if self.gemma:  # GELU, tanh approximation
                act = 0.5 * g * (1 + np.tanh(np.sqrt(2 / np.pi) * (g + 0.044715 * g ** 3)))
            else:
                act = g / (1 + np.exp(-g))
            f = self.matmul(act * u, p + "ffn_down.weight")
            if self.gemma:
                f = self.rmsnorm(f, p + "post_ffw_norm.weight")
            x = x + f
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
