"""Qwen3 reasoning through the real server with the official openai client. No Qwen3 model is available, so
SmolLM2 runs with the Qwen3 chat template forced (`--chat-template qwen3`) and a GBNF grammar (the llama.cpp
`grammar` extension) makes it generate a fixed "<think>…</think>answer" text token by token — the tags come
out split across several SmolLM2 tokens, which is what exercises the streaming splitter's hold-back. What this
covers: the field wiring (message.reasoning_content, streamed delta.reasoning_content, --reasoning-format
none/auto/deepseek, chat_template_kwargs.enable_thinking accepted and changing the prompt). What it does not:
a real Qwen3 model's own <think> tokens (single special tokens in Qwen3's vocabulary)."""
import os

import pytest

from conftest import SMOL

openai = pytest.importorskip("openai")

REASONING = "I add two and two."
ANSWER = "Four."
GRAMMAR = 'root ::= "<think>\\n%s\\n</think>\\n\\n%s"' % (REASONING, ANSWER)
MODEL = "SmolLM2-135M-Instruct.Q4_1"
MSGS = [{"role": "user", "content": "What is 2+2?"}]


def serve(make_server, *args):
    if not os.path.exists(SMOL):
        pytest.skip("SmolLM2 model not present (run make models)")
    srv = make_server(SMOL, "--ctx-size", 512, "--threads", 2, *args)
    return openai.OpenAI(base_url=srv.base + "/v1", api_key="unused")


def ask(client, stream=False, **kw):
    return client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=60, temperature=0, stream=stream,
                                          extra_body={"grammar": GRAMMAR, **kw})


def streamed(client, **kw):
    reasoning, content, n_reason_chunks = "", "", 0
    for ch in ask(client, stream=True, **kw):
        if not ch.choices:
            continue
        d = ch.choices[0].delta
        r = getattr(d, "reasoning_content", None) or (d.model_extra or {}).get("reasoning_content")
        if r:
            reasoning += r
            n_reason_chunks += 1
        content += d.content or ""
    return reasoning, content, n_reason_chunks


def reasoning_of(msg):
    return getattr(msg, "reasoning_content", None) if hasattr(msg, "reasoning_content") else \
        (msg.model_extra or {}).get("reasoning_content")


def test_qwen3_template_splits_reasoning(make_server):
    client = serve(make_server, "--chat-template", "qwen3")
    m = ask(client).choices[0].message
    assert reasoning_of(m) == REASONING + "\n" and m.content == ANSWER, m
    r, c, n = streamed(client)
    assert (r, c) == (REASONING + "\n", ANSWER)
    assert n > 1  # reasoning arrives token by token, not in one piece at the end


def test_reasoning_format_none_keeps_it_inline(make_server):
    client = serve(make_server, "--chat-template", "qwen3", "--reasoning-format", "none")
    whole = "<think>\n%s\n</think>\n\n%s" % (REASONING, ANSWER)
    m = ask(client).choices[0].message
    assert m.content == whole and reasoning_of(m) is None
    assert streamed(client)[:2] == ("", whole)


def test_not_a_reasoning_template_by_default(make_server):
    client = serve(make_server)  # SmolLM2's own ChatML template: no split unless asked for
    whole = "<think>\n%s\n</think>\n\n%s" % (REASONING, ANSWER)
    assert ask(client).choices[0].message.content == whole
    client = serve(make_server, "--reasoning-format", "deepseek")  # always split
    m = ask(client).choices[0].message
    assert reasoning_of(m) == REASONING + "\n" and m.content == ANSWER


def test_enable_thinking_false_changes_the_prompt(make_server):
    client = serve(make_server, "--chat-template", "qwen3")
    on = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=1, temperature=0)
    off = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=1, temperature=0,
                                         extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    # "<think>\n\n</think>\n\n" closes the think block in the generation prompt: a few more prompt tokens
    assert off.usage.prompt_tokens > on.usage.prompt_tokens + 3, (on.usage, off.usage)
    # without reasoning in the output, everything is content
    plain = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=20, temperature=0,
                                           extra_body={"grammar": 'root ::= "Just four."',
                                                       "chat_template_kwargs": {"enable_thinking": False}})
    assert plain.choices[0].message.content == "Just four." and reasoning_of(plain.choices[0].message) is None
    with pytest.raises(openai.BadRequestError) as ei:
        client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=1,
                                       extra_body={"chat_template_kwargs": {"enable_thinking": "no"}})
    assert ei.value.body["param"] == "chat_template_kwargs" and "boolean" in ei.value.body["message"]
