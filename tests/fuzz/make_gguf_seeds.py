"""Regenerates the GGUF fuzz seeds in tests/fuzz/seeds/gguf/ and the tiny valid models in
tests/fuzz/seeds/model_load/ with the independent `gguf` PyPI writer.

Run from the repository root: python tests/fuzz/make_gguf_seeds.py
(stories260K_head4k.gguf is the first 4096 bytes of testdata/models/stories260K.gguf: a truncated real header.)
The model seeds are as small as model_load accepts (one layer, dim 8..32) so that the fuzzer's mutations
land in metadata and shapes rather than in weight bytes; tests/fuzz/fuzz_model_load.c loads them.
"""
import numpy as np
import gguf

D = "tests/fuzz/seeds/gguf/"
M = "tests/fuzz/seeds/model_load/"


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    w = gguf.GGUFWriter(D + "small_model.gguf", "llama")  # every scalar type, F32/F16/Q8_0 tensors
    w.add_uint32("llama.block_count", 1)
    w.add_uint8("t.u8", 7)
    w.add_int8("t.i8", -3)
    w.add_uint16("t.u16", 600)
    w.add_int16("t.i16", -600)
    w.add_int32("t.i32", -70000)
    w.add_float32("t.f32", 0.5)
    w.add_bool("t.bool", True)
    w.add_uint64("t.u64", 1 << 40)
    w.add_int64("t.i64", -(1 << 40))
    w.add_float64("t.f64", 3.25)
    w.add_string("t.s", "hello")
    w.add_array("t.arr_i32", [1, 2, 3])
    w.add_array("t.arr_f32", [0.5, 1.5])
    w.add_array("t.arr_str", ["a", "bc", "def"])
    w.add_tensor("token_embd.weight", np.arange(64 * 4, dtype=np.float32).reshape(4, 64))
    w.add_tensor("output_norm.weight", np.ones(64, dtype=np.float16))
    w.add_tensor("blk.0.attn_q.weight", np.zeros((2, 68), dtype=np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    finish(w)

    w = gguf.GGUFWriter(D + "vocab.gguf", "llama")  # vocab-only, no tensors
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % i for i in range(256)] + ["\u2581w%d" % i for i in range(60)]
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_scores([float(-i) for i in range(len(toks))])
    w.add_token_types([2, 3, 3] + [6] * 256 + [1] * 60)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    finish(w)

    w = gguf.GGUFWriter(D + "align64.gguf", "llama")  # custom alignment, k-quant block
    w.add_custom_alignment(64)
    w.add_tensor("a", np.zeros((1, 144), dtype=np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q4_K)
    w.add_tensor("b", np.zeros((3, 8), dtype=np.float32))
    finish(w)


def tiny_model(path, arch, dim, n_heads, n_kv, ffn, n_vocab, wtype=None, vocab=None, template=None, extra=None):
    """One-layer model of `arch` with every tensor model_load binds; weights small random values."""
    rng = np.random.default_rng(len(path))
    w = gguf.GGUFWriter(path, arch)
    w.add_context_length(64)
    w.add_embedding_length(dim)
    w.add_block_count(1)
    w.add_feed_forward_length(ffn)
    w.add_head_count(n_heads)
    w.add_head_count_kv(n_kv)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    for k, v in (extra or {}).items():
        v(w) if callable(v) else w.add_uint32(f"{arch}.{k}", v)
    if vocab:
        w.add_tokenizer_model("llama")
        w.add_token_list(vocab)
        w.add_token_scores([float(-i) for i in range(len(vocab))])
        w.add_token_types([2, 3, 3] + [6] * 256 + [1] * (len(vocab) - 259))
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
    if template:
        w.add_chat_template(template)
    hd = dim // n_heads

    def mat(name, rows, cols):
        x = (rng.standard_normal((rows, cols)) * 0.1).astype(np.float32)
        if wtype is None:
            w.add_tensor(name, x)
        else:
            w.add_tensor(name, gguf.quants.quantize(x, wtype), raw_dtype=wtype)

    def vec(name, n):
        w.add_tensor(name, np.ones(n, dtype=np.float32))

    w.add_tensor("token_embd.weight", (rng.standard_normal((n_vocab, dim)) * 0.1).astype(np.float16))
    vec("output_norm.weight", dim)
    vec("blk.0.attn_norm.weight", dim)
    mat("blk.0.attn_q.weight", n_heads * hd, dim)
    mat("blk.0.attn_k.weight", n_kv * hd, dim)
    mat("blk.0.attn_v.weight", n_kv * hd, dim)
    mat("blk.0.attn_output.weight", dim, n_heads * hd)
    if arch == "qwen2":
        vec("blk.0.attn_q.bias", n_heads * hd)
        vec("blk.0.attn_k.bias", n_kv * hd)
        vec("blk.0.attn_v.bias", n_kv * hd)
    if arch == "qwen3":
        vec("blk.0.attn_q_norm.weight", hd)
        vec("blk.0.attn_k_norm.weight", hd)
    vec("blk.0.ffn_norm.weight", dim)
    mat("blk.0.ffn_gate.weight", ffn, dim)
    mat("blk.0.ffn_up.weight", ffn, dim)
    mat("blk.0.ffn_down.weight", dim, ffn)
    finish(w)


def tiny_moe(path):
    """One-layer qwen3moe: 4 experts (2 used) in Q8_0, the rest F32."""
    rng = np.random.default_rng(7)
    dim, eff, ne = 32, 32, 4
    w = gguf.GGUFWriter(path, "qwen3moe")
    w.add_context_length(64)
    w.add_embedding_length(dim)
    w.add_block_count(1)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_key_length(8)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_count(ne)
    w.add_expert_used_count(2)
    w.add_expert_feed_forward_length(eff)

    def t(name, *shape, q8=False):
        x = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        if q8:
            w.add_tensor(name, gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0),
                         raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, x)

    t("token_embd.weight", 8, dim)
    t("output_norm.weight", dim)
    t("blk.0.attn_norm.weight", dim)
    t("blk.0.attn_q.weight", 32, dim)
    t("blk.0.attn_k.weight", 16, dim)
    t("blk.0.attn_v.weight", 16, dim)
    t("blk.0.attn_output.weight", dim, 32)
    t("blk.0.attn_q_norm.weight", 8)
    t("blk.0.attn_k_norm.weight", 8)
    t("blk.0.ffn_norm.weight", dim)
    t("blk.0.ffn_gate_inp.weight", ne, dim)
    t("blk.0.ffn_gate_exps.weight", ne, eff, dim, q8=True)
    t("blk.0.ffn_up_exps.weight", ne, eff, dim, q8=True)
    t("blk.0.ffn_down_exps.weight", ne, dim, eff, q8=True)
    finish(w)


def tiny_hybrid(path):
    """Two-layer qwen35: a gated DeltaNet layer, then full attention (full_attention_interval 2); F32."""
    rng = np.random.default_rng(8)
    dim, ffn, hd, state, groups, vheads = 32, 32, 16, 8, 1, 2
    kd, vd = state * groups, state * vheads
    w = gguf.GGUFWriter(path, "qwen35")
    w.add_context_length(64)
    w.add_embedding_length(dim)
    w.add_block_count(2)
    w.add_feed_forward_length(ffn)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_dimension_count(8)
    w.add_layer_norm_rms_eps(1e-6)
    for k, v in {"ssm.conv_kernel": 4, "ssm.state_size": state, "ssm.group_count": groups,
                 "ssm.time_step_rank": vheads, "ssm.inner_size": vd, "full_attention_interval": 2}.items():
        w.add_uint32("qwen35." + k, v)

    def t(name, *shape):
        w.add_tensor(name, (rng.standard_normal(shape) * 0.1).astype(np.float32))

    t("token_embd.weight", 8, dim)
    t("output_norm.weight", dim)
    for l in range(2):
        t("blk.%d.attn_norm.weight" % l, dim)
        t("blk.%d.post_attention_norm.weight" % l, dim)
        t("blk.%d.ffn_gate.weight" % l, ffn, dim)
        t("blk.%d.ffn_up.weight" % l, ffn, dim)
        t("blk.%d.ffn_down.weight" % l, dim, ffn)
    t("blk.0.attn_qkv.weight", 2 * kd + vd, dim)
    t("blk.0.attn_gate.weight", vd, dim)
    t("blk.0.ssm_conv1d.weight", 2 * kd + vd, 4)
    t("blk.0.ssm_dt.bias", vheads)
    t("blk.0.ssm_a", vheads)
    t("blk.0.ssm_beta.weight", vheads, dim)
    t("blk.0.ssm_alpha.weight", vheads, dim)
    t("blk.0.ssm_norm.weight", state)
    t("blk.0.ssm_out.weight", dim, vd)
    t("blk.1.attn_q.weight", 2 * 2 * hd, dim)  # queries and their gate
    t("blk.1.attn_k.weight", hd, dim)
    t("blk.1.attn_v.weight", hd, dim)
    t("blk.1.attn_output.weight", dim, 2 * hd)
    t("blk.1.attn_q_norm.weight", hd)
    t("blk.1.attn_k_norm.weight", hd)
    finish(w)


def model_seeds():
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % i for i in range(256)] + ["\u2581a", "\u2581b"]
    tiny_model(M + "llama_vocab.gguf", "llama", 8, 2, 1, 16, len(toks), vocab=toks,
               template="{{ bos_token }}{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}")
    tiny_model(M + "qwen2.gguf", "qwen2", 8, 2, 2, 8, 8,
               extra={"rope": lambda w: w.add_rope_dimension_count(2)},
               template="<|im_start|>system\nYou are tiny.<|im_end|>")
    tiny_model(M + "qwen3_q8_0.gguf", "qwen3", 32, 4, 2, 32, 8, wtype=gguf.GGMLQuantizationType.Q8_0,
               extra={"attention.key_length": 8})
    tiny_moe(M + "qwen3moe.gguf")
    tiny_hybrid(M + "qwen35.gguf")


if __name__ == "__main__":
    import sys
    if sys.argv[1:] == ["models"]:  # only the model_load seeds (the gguf/ ones are committed as they are)
        model_seeds()
    else:
        main()
        model_seeds()
