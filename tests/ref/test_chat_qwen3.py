"""The Qwen3 chat template (tests/ref/chat-templates/Qwen-Qwen3-0.6B.jinja, as Qwen3 GGUFs carry it): our
renderer (`tachyon chat-template`) against Jinja, byte for byte, with enable_thinking unset and false —
reasoning kept after the last user query and dropped before it, multi-step tool results, system placement."""
import json
import subprocess
from pathlib import Path

import pytest

from test_chat_ref import BIN, _compiled, CONVS, S, U, A

QWEN3 = Path(__file__).resolve().parent / "chat-templates" / "Qwen-Qwen3-0.6B.jinja"


def T(c): return {"role": "tool", "content": c}


QCONVS = dict(CONVS)
QCONVS.update({
    # reasoning in the last assistant turn (kept, newlines trimmed) and in earlier ones (dropped)
    "think_last": [U("2+2?"), A("<think>\nadd them\n</think>\n\n4")],
    "think_then_user": [S("sys"), U("2+2?"), A("<think>\nadd\n</think>\n\n4"), U("and 3+3?")],
    "no_think_last": [U("hi"), A("\n\nhello")],
    "two_thinks": [U("q"), A("<think>a</think>b<think>c</think>\n\nd")],
    "empty_think": [U("q"), A("<think>\n\n</think>\n\nanswer")],
    # a tool round after the last query: the assistant turns after it keep their reasoning
    "tools": [S("Use tools."), U("weather?"), A("<think>call it</think>ok"), T("sunny"), T("warm"),
              A("<think>\nsummarize\n</think>It is sunny."), ],
    "tool_response_user": [U("real question"), A("<think>r1</think>a1"),
                           U("<tool_response>\nx\n</tool_response>"), A("<think>r2</think>a2")],
    "late_system": [U("hi"), S("be brief"), U("ok")],
})


def ours(msgs, gen=True, thinking=True):
    cmd = [BIN, "chat-template", "--template-file", str(QWEN3), "--family", "auto"] + ([] if gen else ["--no-gen-prompt"]) + \
        ([] if thinking else ["--no-thinking"]) + [json.dumps(msgs)]
    p = subprocess.run(cmd, capture_output=True)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.decode()


def jinja(msgs, gen=True, thinking=None):
    kw = {} if thinking is None else {"enable_thinking": thinking}
    return _compiled(QWEN3.read_text()).render(messages=msgs, add_generation_prompt=gen, bos_token="",
                                               eos_token="<|im_end|>", **kw)


def test_detected_as_qwen3():
    p = subprocess.run([BIN, "chat-template", "--template-file", str(QWEN3), "--detect", "[]"], capture_output=True)
    assert p.stdout.decode().strip() == "qwen3", p.stdout + p.stderr


@pytest.mark.parametrize("conv", sorted(QCONVS))
@pytest.mark.parametrize("gen", [True, False])
@pytest.mark.parametrize("thinking", [None, False])
def test_qwen3_matches_jinja(conv, gen, thinking):
    msgs = QCONVS[conv]
    want = jinja(msgs, gen, thinking)
    got = ours(msgs, gen, thinking is None)
    assert got == want, f"\n--- jinja ---\n{want!r}\n--- ours ---\n{got!r}"


def test_enable_thinking_false_closes_an_empty_think():
    assert ours([U("hi")], thinking=False).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert ours([U("hi")]).endswith("<|im_start|>assistant\n")
