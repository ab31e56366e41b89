"""The context a server offers when the model's own (context_length) needs more KV cache than the memory holds:
models trained for 128k-1M tokens are common, and a KV pool sized for that would reserve more memory than the
machine has (allocated lazily, it would fail later, under a client's long prompt). Without --ctx-size the
context is cut to what a quarter of the free memory holds (logged, in /v1/models); an explicit --ctx-size is
honoured up to three quarters of the free memory and is a clear start-up error beyond.

The model: SmolLM2 with its context_length raised to 2^24 tokens (the most the loader reads), written with
the gguf package; 23 KiB of f16 KV per token, so 2^24 tokens need 368 GiB, more than any CI machine has."""
import json
import os
import subprocess

import pytest

from conftest import BIN, SMOL, Server

gguf = pytest.importorskip("gguf")

CTX_HUGE = 1 << 24


def copy_with_context(src, dst, ctx):
    r = gguf.GGUFReader(src)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    w = gguf.GGUFWriter(dst, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        t = f.types[0]
        if name == arch + ".context_length":
            w.add_uint32(name, ctx)
        elif t == gguf.GGUFValueType.ARRAY:
            if f.types[1] == gguf.GGUFValueType.STRING:
                w.add_array(name, [bytes(f.parts[i]).decode("utf-8", "replace") for i in f.data])
            else:
                w.add_array(name, [f.parts[i][0].item() for i in f.data])
        elif t == gguf.GGUFValueType.STRING:
            w.add_string(name, bytes(f.parts[-1]).decode("utf-8", "replace"))
        else:
            w.add_key_value(name, f.parts[-1][0].item(), t)
    for t in r.tensors:
        w.add_tensor(t.name, t.data, raw_shape=t.data.shape, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def long_ctx_model(tmp_path_factory):
    if not os.path.exists(SMOL):
        pytest.skip("SmolLM2 model not present (run make models)")
    path = str(tmp_path_factory.mktemp("ctxfit") / "smol-16m-ctx.gguf")
    copy_with_context(SMOL, path, CTX_HUGE)
    return path


def max_model_len(server):
    st, _, body = server.request("GET", "/v1/models")
    assert st == 200
    return json.loads(body)["data"][0]["max_model_len"]


def test_model_context_cut_to_memory(make_server, long_ctx_model):
    s = make_server(long_ctx_model)
    n = max_model_len(s)
    assert 4096 <= n < CTX_HUGE
    assert "per-request context is %d tokens" % n in s.read_log()
    st, _, body = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}],
                                                  "max_tokens": 4})
    assert st == 200, body
    # a request past the cut context is refused, not admitted to exhaust the memory
    st, _, body = s.post("/v1/completions", {"prompt": "hello", "max_tokens": n})
    assert st == 400 and "context" in body["error"]["message"], body


def test_explicit_context_honoured(make_server, long_ctx_model):
    s = make_server(long_ctx_model, "--ctx-size", 8192)
    assert max_model_len(s) == 8192


def test_explicit_context_beyond_memory_refused(long_ctx_model):
    if not os.path.exists(BIN):
        pytest.skip("no binary at %s" % BIN)
    with pytest.raises(RuntimeError) as e:
        Server(long_ctx_model, "--ctx-size", CTX_HUGE, timeout=60)
    msg = str(e.value)
    assert "needs" in msg and "GiB of KV cache" in msg and "--ctx-size" in msg, msg
