"""Regenerates the GGUF fuzz seeds in tests/fuzz/seeds/gguf/ with the independent `gguf` PyPI writer.

Run from the repository root: python tests/fuzz/make_gguf_seeds.py
(stories260K_head4k.gguf is the first 4096 bytes of testdata/models/stories260K.gguf: a truncated real header.)
"""
import numpy as np
import gguf

D = "tests/fuzz/seeds/gguf/"


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


if __name__ == "__main__":
    main()
