"""No request field is silently ignored: every top-level field of OpenAI's CreateChatCompletionRequest and
CreateCompletionRequest (written out below from the API reference), plus the vLLM / llama.cpp extensions
tachyon honours, is sent to a real server; each one is either honoured (and its effect checked) or refused with
a 400 whose `param` names it. Also: unknown fields, --lenient, logit_bias, completions with several prompts,
echo and suffix, through the official `openai` client where it can express the request."""
import json
import re

import openai
import pytest

from conftest import STORIES, stream_text

MSGS = [{"role": "user", "content": "Once upon a time"}]
M = "stories260K"  # the served model name (the file name)
PROMPT = "Once upon a time"

# --- the schema, as OpenAI documents it -------------------------------------------------------------------
CHAT_FIELDS = ["model", "messages", "audio", "frequency_penalty", "function_call", "functions", "logit_bias",
               "logprobs", "max_completion_tokens", "max_tokens", "metadata", "modalities", "n",
               "parallel_tool_calls", "prediction", "presence_penalty", "prompt_cache_key", "reasoning_effort",
               "response_format", "safety_identifier", "seed", "service_tier", "stop", "store", "stream",
               "stream_options", "temperature", "tool_choice", "tools", "top_logprobs", "top_p", "user",
               "verbosity", "web_search_options"]
CMPL_FIELDS = ["model", "prompt", "best_of", "echo", "frequency_penalty", "logit_bias", "logprobs", "max_tokens",
               "n", "presence_penalty", "seed", "stop", "stream", "stream_options", "suffix", "temperature",
               "top_p", "user"]
# extensions (vLLM / llama.cpp names) tachyon honours
EXT_FIELDS = ["top_k", "min_p", "repetition_penalty", "ignore_eos", "timeout", "ttft_slo_ms", "min_tokens", "priority",
              "chat_template_kwargs", "grammar"]
# chat fields tachyon also honours on completions
CMPL_EXT_FIELDS = ["response_format", "prediction"]

# Fields refused today (400 naming them), with a value a client would send. Features that land move a field
# from here to HONOURED below (and flip its row in src/server/oai_fields.c).
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {},
                                                                      "additionalProperties": False}}}
TOOL2 = {"type": "function", "function": {"name": "g", "parameters": TOOL["function"]["parameters"]}}
REFUSED = {
    "chat": {
        "audio": {"voice": "alloy", "format": "wav"},
        "function_call": "auto",
        "functions": [TOOL["function"]],
        "reasoning_effort": "low",
        "verbosity": "low",
        "web_search_options": {},
    },
    "cmpl": {
        "suffix": " the end.",  # stories260K has no FIM tokens
    },
}


def post(srv, kind, extra, base=None):
    path = "/v1/chat/completions" if kind == "chat" else "/v1/completions"
    b = dict(base or ({"messages": MSGS} if kind == "chat" else {"prompt": PROMPT}))
    b.setdefault("max_tokens", 12)
    b.setdefault("temperature", 0)
    b.update(extra)
    return srv.post(path, b)


def text(kind, j, i=0):
    c = j["choices"][i]
    return c["message"]["content"] if kind == "chat" else c["text"]


def expect_refused(st, j, field):
    assert st == 400, (field, st, j)
    assert j["error"]["param"] == field, (field, j)
    assert j["error"]["type"] == "invalid_request_error", j
    assert field in j["error"]["message"], j


def expect_bad_value(st, j, field):
    """400 for a malformed value of a handled field: param names it or a part of it ("tools[0].function")."""
    assert st == 400, (field, st, j)
    p = j["error"]["param"]
    assert p == field or p.startswith(field + ".") or p.startswith(field + "["), (field, j)


# Honoured fields: each gets a request and a check of its effect against the greedy baseline.
def honoured_checks(srv, kind, base_text, make_server):
    model = json.loads(srv.request("GET", "/v1/models")[2])["data"][0]["id"]

    def ok(extra, **kw):
        st, _, j = post(srv, kind, extra, **kw)
        assert st == 200, (extra, j)
        return j

    chk = {}
    def model_check():
        assert text(kind, ok({"model": model})) == base_text
        st, _, j = post(srv, kind, {"model": "gpt-17"})
        assert st == 404 and j["error"]["param"] == "model", j
    chk["model"] = model_check
    chk["messages" if kind == "chat" else "prompt"] = lambda: text(kind, ok({})) == base_text or pytest.fail("base")
    # penalties change the greedy continuation of a repetitive story
    long = {"max_tokens": 60, "ignore_eos": True}
    plain = text(kind, ok(long))
    chk["frequency_penalty"] = lambda: text(kind, ok({**long, "frequency_penalty": 2.0})) != plain or pytest.fail("fp")
    chk["presence_penalty"] = lambda: text(kind, ok({**long, "presence_penalty": 2.0})) != plain or pytest.fail("pp")
    chk["repetition_penalty"] = lambda: (text(kind, ok({**long, "repetition_penalty": 1.8})) != plain
                                         or pytest.fail("rp"))

    def logit_bias():
        j = ok({"logprobs": True} if kind == "chat" else {"logprobs": 0})
        lp = j["choices"][0]["logprobs"]
        first = lp["content"][0]["token"] if kind == "chat" else lp["tokens"][0]
        j2 = ok({"logit_bias": {str(token_id(srv, first)): -100}, **({"logprobs": True} if kind == "chat"
                                                                      else {"logprobs": 0})})
        lp2 = j2["choices"][0]["logprobs"]
        assert (lp2["content"][0]["token"] if kind == "chat" else lp2["tokens"][0]) != first
    chk["logit_bias"] = logit_bias

    def logprobs():
        if kind == "chat":
            j = ok({"logprobs": True, "top_logprobs": 3})
            lp = j["choices"][0]["logprobs"]["content"]
            assert len(lp) > 0 and len(lp[0]["top_logprobs"]) == 3
        else:
            j = ok({"logprobs": 3})
            assert len(j["choices"][0]["logprobs"]["top_logprobs"][0]) == 3
    chk["logprobs"] = logprobs
    if kind == "chat":
        chk["top_logprobs"] = logprobs

    def max_tok(field):
        j = ok({field: 3, "ignore_eos": True})
        assert j["usage"]["completion_tokens"] == 3 and j["choices"][0]["finish_reason"] == "length"
    chk["max_tokens"] = lambda: max_tok("max_tokens")
    if kind == "chat":
        chk["max_completion_tokens"] = lambda: max_tok("max_completion_tokens")
    chk["n"] = lambda: len(ok({"n": 3})["choices"]) == 3 or pytest.fail("n")

    def seed():
        a = text(kind, ok({"temperature": 1.0, "seed": 7, "max_tokens": 30, "ignore_eos": True}))
        assert a == text(kind, ok({"temperature": 1.0, "seed": 7, "max_tokens": 30, "ignore_eos": True}))
        others = {text(kind, ok({"temperature": 1.0, "seed": s, "max_tokens": 30, "ignore_eos": True}))
                  for s in (8, 9, 10)}
        assert others != {a}
    chk["seed"] = seed

    def stop():
        cut = base_text[len(base_text) // 2:][:3]
        assert cut
        t = text(kind, ok({"stop": [cut]}))
        assert cut not in t and base_text.startswith(t), (t, cut, base_text)
    chk["stop"] = stop

    def stream():
        b = {"messages": MSGS} if kind == "chat" else {"prompt": PROMPT}
        b.update({"max_tokens": 12, "temperature": 0, "stream": True, "stream_options": {"include_usage": True}})
        st, events, _ = srv.stream("/v1/chat/completions" if kind == "chat" else "/v1/completions", b)
        assert st == 200
        assert stream_text(events, kind=kind) == base_text
        assert any(isinstance(e, dict) and e.get("usage") for e in events)
    chk["stream"] = chk["stream_options"] = stream
    chk["temperature"] = lambda: (len({text(kind, ok({"temperature": 1.5, "seed": s, "max_tokens": 30,
                                                      "ignore_eos": True})) for s in range(4)}) > 1
                                  or pytest.fail("temperature"))
    # filters that leave only the argmax reproduce greedy at temperature 1
    chk["top_p"] = lambda: text(kind, ok({"temperature": 1.0, "top_p": 1e-6, "seed": 3})) == base_text or pytest.fail("top_p")
    chk["top_k"] = lambda: text(kind, ok({"temperature": 1.0, "top_k": 1, "seed": 3})) == base_text or pytest.fail("top_k")
    chk["min_p"] = lambda: text(kind, ok({"temperature": 1.0, "min_p": 1.0, "seed": 3})) == base_text or pytest.fail("min_p")
    chk["ignore_eos"] = lambda: max_tok("max_tokens")
    chk["min_tokens"] = lambda: ((ok({"min_tokens": 10})["usage"]["completion_tokens"] >= 10 or pytest.fail("min_tokens")),
                                 expect_bad_value(*post(srv, kind, {"min_tokens": -1})[::2], "min_tokens"))
    chk["timeout"] = lambda: text(kind, ok({"timeout": 100})) == base_text or pytest.fail("timeout")
    # scheduling fields never change the output (under the default fifo policy they change nothing at all)
    chk["priority"] = lambda: ((text(kind, ok({"priority": 5})) == base_text or pytest.fail("priority")),
                               expect_refused(*post(srv, kind, {"priority": 1.5})[::2], "priority"))
    chk["ttft_slo_ms"] = lambda: ((text(kind, ok({"ttft_slo_ms": 5000})) == base_text or pytest.fail("ttft_slo_ms")),
                                  expect_refused(*post(srv, kind, {"ttft_slo_ms": -1})[::2], "ttft_slo_ms"))
    # documented as not affecting generation: accepted, output unchanged
    for f, v in [("user", "u-1"), ("store", False), ("metadata", {"k": "v"}), ("service_tier", "auto"),
                 ("safety_identifier", "s"), ("prompt_cache_key", "k")]:
        chk[f] = (lambda f=f, v=v: text(kind, ok({f: v})) == base_text or pytest.fail(f))
    # structured outputs (src/grammar/): a bounded schema always parses; json_object parses when it ends
    def response_format():
        schema = {"type": "object", "additionalProperties": False, "required": ["n"],
                  "properties": {"n": {"enum": [1, 2, 3]}}}
        j = ok({"response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
                "max_tokens": 40})
        assert json.loads(text(kind, j))["n"] in (1, 2, 3), j
        j = ok({"response_format": {"type": "json_object"}, "max_tokens": 200})
        t = text(kind, j)
        assert t.lstrip().startswith("{"), t
        if j["choices"][0]["finish_reason"] == "stop":
            assert isinstance(json.loads(t), dict), t
        expect_bad_value(*post(srv, kind, {"response_format": {"type": "xml"}})[::2], "response_format")
    chk["response_format"] = response_format

    def grammar():
        t = text(kind, ok({"grammar": 'root ::= ("yes" | "no") " " [a-z]{1,5}', "max_tokens": 20}))
        assert re.fullmatch(r"(yes|no) [a-z]{1,5}", t), t
        expect_bad_value(*post(srv, kind, {"grammar": "root ::= missing"})[::2], "grammar")
    chk["grammar"] = grammar

    # predicted outputs: a draft source only: same greedy text, usage reports the prediction tokens
    def prediction():
        j = ok({"prediction": {"type": "content", "content": base_text}})
        assert text(kind, j) == base_text
        d = j["usage"]["completion_tokens_details"]
        assert "accepted_prediction_tokens" in d and "rejected_prediction_tokens" in d, j["usage"]
        expect_bad_value(*post(srv, kind, {"prediction": {"type": "image"}})[::2], "prediction")
    chk["prediction"] = prediction
    if kind == "chat":  # tool definitions take ~400 of stories260K's tokens: a server with room for the calls
        big = []

        def tool_srv():
            if not big:
                big.append(make_server(STORIES, "--ctx-size", 1024))
            return big[0]

        def call(tools, **kw):
            b = {"messages": MSGS, "tools": tools, "max_tokens": 120, "temperature": 0, **kw}
            st, _, j = tool_srv().post("/v1/chat/completions", b)
            assert st == 200, j
            return j["choices"][0]

        def tools():
            c = call([TOOL], tool_choice="required", parallel_tool_calls=False)
            assert c["finish_reason"] == "tool_calls", c
            calls = c["message"]["tool_calls"]
            assert len(calls) == 1 and calls[0]["function"]["name"] == "f", c
            assert json.loads(calls[0]["function"]["arguments"]) == {}, c
            c = call([TOOL, TOOL2], tool_choice={"type": "function", "function": {"name": "g"}},
                     parallel_tool_calls=False)
            assert [x["function"]["name"] for x in c["message"]["tool_calls"]] == ["g"], c
            c = call([TOOL], tool_choice="none", max_tokens=12)  # plain text, no calls
            assert not c["message"].get("tool_calls") and "<tool_call>" not in c["message"]["content"], c
            expect_bad_value(*post(srv, kind, {"tools": [{"type": "function"}]})[::2], "tools")
            expect_bad_value(*post(srv, kind, {"tools": [TOOL], "tool_choice": "maybe"})[::2], "tool_choice")
        chk["tools"] = chk["tool_choice"] = tools

        def parallel_tool_calls():
            # required calls: unless parallel_tool_calls is true the grammar ends after one call; allowed
            # several, this tiny model keeps calling (up to max_tokens)
            def n_calls(c):
                return len(c["message"].get("tool_calls") or []) or (c["message"]["content"] or "").count("<tool_call>")
            for seed in range(3):
                one = call([TOOL, TOOL2], tool_choice="required", parallel_tool_calls=False, temperature=1.0, seed=seed)
                assert one["finish_reason"] == "tool_calls" and n_calls(one) == 1, one
                dflt = call([TOOL, TOOL2], tool_choice="required", temperature=1.0, seed=seed)
                assert dflt["finish_reason"] == "tool_calls" and n_calls(dflt) == 1, dflt
                many = call([TOOL, TOOL2], tool_choice="required", parallel_tool_calls=True, temperature=1.0, seed=seed)
                assert n_calls(many) > 1, many
            expect_bad_value(*post(srv, kind, {"tools": [TOOL], "parallel_tool_calls": "no"})[::2],
                           "parallel_tool_calls")
        chk["parallel_tool_calls"] = parallel_tool_calls
    if kind == "chat":
        chk["modalities"] = lambda: (ok({"modalities": ["text"]}),
                                     expect_refused(*post(srv, kind, {"modalities": ["text", "audio"]})[::2],
                                                    "modalities"))
        # the template's variables: ones it does not read are accepted and change nothing (as transformers)
        chk["chat_template_kwargs"] = lambda: (
            ok({"chat_template_kwargs": {"enable_thinking": False, "custom_var": [1, "x"]}})["usage"]["prompt_tokens"]
            == ok({})["usage"]["prompt_tokens"] or pytest.fail("unused kwargs changed the prompt"),
            expect_bad_value(*post(srv, kind, {"chat_template_kwargs": "x"})[::2], "chat_template_kwargs"),
            expect_bad_value(*post(srv, kind, {"chat_template_kwargs": {"enable_thinking": "no"}})[::2],
                             "chat_template_kwargs"))
    else:
        chk["best_of"] = lambda: (len(ok({"best_of": 2, "n": 2})["choices"]) == 2,
                                  expect_refused(*post(srv, kind, {"best_of": 3})[::2], "best_of"))
        chk["echo"] = lambda: text(kind, ok({"echo": True})) == PROMPT + base_text or pytest.fail("echo")
    return chk


def tokenize(srv, text):
    st, _, t = srv.post("/tokenize", {"content": text, "add_special": True})
    assert st == 200, t
    return t["tokens"]


def detokenize(srv, ids):
    st, _, t = srv.post("/detokenize", {"tokens": ids})
    assert st == 200, t
    return t["content"]


def token_id(srv, piece, prompt=PROMPT):
    """The id of a token generated right after `prompt` whose text is `piece` (checked by detokenizing)."""
    p, q = tokenize(srv, prompt), tokenize(srv, prompt + piece)
    assert q[:len(p)] == p and len(q) == len(p) + 1, (piece, p, q)
    assert detokenize(srv, q).endswith(piece)
    return q[-1]


@pytest.mark.parametrize("kind", ["chat", "cmpl"])
def test_every_schema_field_honoured_or_refused(stories, make_server, kind):
    st, _, base = post(stories, kind, {})
    assert st == 200, base
    base_text = text(kind, base)
    assert base_text
    checks = honoured_checks(stories, kind, base_text, make_server)
    fields = (CHAT_FIELDS if kind == "chat" else CMPL_FIELDS + CMPL_EXT_FIELDS) + EXT_FIELDS
    if kind == "cmpl":
        fields = [f for f in fields if f != "chat_template_kwargs"]
    unaccounted = []
    for f in fields:
        if f in REFUSED[kind]:
            st, _, j = post(stories, kind, {f: REFUSED[kind][f]})
            expect_refused(st, j, f)
        elif f in checks:
            checks[f]()
        else:
            unaccounted.append(f)
    assert not unaccounted, "fields neither refused nor checked: %s" % unaccounted


@pytest.mark.parametrize("kind", ["chat", "cmpl"])
def test_unknown_fields_refused(stories, kind):
    for f, v in [("frobnicate", 1), ("tfs_z", 0.5), ("messages" if kind == "cmpl" else "prompt", "x"),
                 ("echo" if kind == "chat" else "top_logprobs", True)]:
        st, _, j = post(stories, kind, {f: v})
        expect_refused(st, j, f)


def test_refusal_through_openai_client(stories):
    client = openai.OpenAI(base_url=stories.base + "/v1", api_key="unused")
    with pytest.raises(openai.BadRequestError) as ei:
        client.chat.completions.create(model=M, messages=MSGS, max_tokens=4, functions=[TOOL["function"]])
    assert ei.value.body["param"] == "functions"
    with pytest.raises(openai.BadRequestError) as ei:
        client.chat.completions.create(model=M, messages=MSGS, max_tokens=4, reasoning_effort="low")
    assert ei.value.body["param"] == "reasoning_effort"
    with pytest.raises(openai.BadRequestError) as ei:
        client.chat.completions.create(model=M, messages=MSGS, max_tokens=4, extra_body={"frobnicate": 1})
    assert ei.value.body["param"] == "frobnicate"
    with pytest.raises(openai.BadRequestError) as ei:
        client.chat.completions.create(model=M, messages=MSGS, max_tokens=4,
                                       extra_body={"chat_template_kwargs": {"enable_thinking": 1}})
    assert ei.value.body["param"] == "chat_template_kwargs" and "boolean" in ei.value.body["message"]
    # a switch the template does not have is accepted, as transformers accepts unused template variables
    r = client.chat.completions.create(model=M, messages=MSGS, max_tokens=4,
                                       extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    assert r.choices[0].finish_reason in ("stop", "length")


def test_lenient_drops_with_warning(make_server):
    srv = make_server(None, "--ctx-size", 256, "--lenient")
    st, _, ref = post(srv, "chat", {})
    assert st == 200
    for i in range(3):
        st, _, j = post(srv, "chat", {"functions": [TOOL["function"]], "frobnicate": i})
        assert st == 200, j
        assert text("chat", j) == text("chat", ref)
    log = srv.read_log()
    assert "--lenient" in log and "frobnicate" in log and "functions" in log, log
    assert log.count("ignored unsupported request fields") == 1, log  # rate-limited
    # values of honoured fields are still validated
    st, _, j = post(srv, "chat", {"logit_bias": {"x": 1}})
    expect_refused(st, j, "logit_bias")


# --- logit_bias ------------------------------------------------------------------------------------------

def test_logit_bias_bans_and_forces(stories):
    client = openai.OpenAI(base_url=stories.base + "/v1", api_key="unused")
    r = client.completions.create(model=M, prompt=PROMPT, max_tokens=8, temperature=0, logprobs=0)
    first_text = r.choices[0].logprobs.tokens[0]
    first = token_id(stories, first_text)
    # -100 on the greedy first token: it never comes first, greedy or sampled (many seeds), and the rest of the
    # distribution is reported (logprobs are of the raw model, so the banned token still shows its own)
    r2 = client.completions.create(model=M, prompt=PROMPT, max_tokens=1, temperature=0, logprobs=0,
                                   logit_bias={str(first): -100})
    assert r2.choices[0].logprobs.tokens[0] != first_text
    seen = set()
    for seed in range(12):
        rs = client.completions.create(model=M, prompt=PROMPT, max_tokens=1, temperature=1.5, seed=seed, n=8,
                                       logprobs=0, logit_bias={str(first): -100})
        for c in rs.choices:
            seen.add(c.logprobs.tokens[0])
    assert first_text not in seen and len(seen) > 3, seen
    # +100 forces a token every step, sampled at temperature 1
    forced = 300
    p = tokenize(stories, PROMPT)
    head, want = detokenize(stories, p), detokenize(stories, p + [forced] * 5)
    assert want.startswith(head) and len(want) > len(head)
    r3 = client.completions.create(model=M, prompt=PROMPT, max_tokens=5, temperature=1.0, seed=1,
                                   logit_bias={str(forced): 100}, extra_body={"ignore_eos": True})
    assert r3.choices[0].text == want[len(head):], (r3.choices[0].text, want)


@pytest.mark.parametrize("bias", [{"abc": 1}, {"-3": 1}, {"1.5": 1}, {"": 2}, {"5": 100.5}, {"5": -101},
                                  {"5": "1"}, {"5": None}, {"5": [1]}, {"999999": 1}, [1, 2], "x"])
def test_logit_bias_malformed(stories, bias):
    st, _, j = stories.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 2, "logit_bias": bias})
    expect_refused(st, j, "logit_bias")


# --- completions: several prompts, echo, suffix ----------------------------------------------------------

def test_completions_list_of_prompts_equals_single(stories):
    client = openai.OpenAI(base_url=stories.base + "/v1", api_key="unused")
    prompts = ["Once upon a time", "The cat sat", "Lily wanted to", "One day, a big"]
    singles = [client.completions.create(model=M, prompt=p, max_tokens=16, temperature=0).choices[0].text
               for p in prompts]
    r = client.completions.create(model=M, prompt=prompts, max_tokens=16, temperature=0, n=2)
    assert [c.index for c in r.choices] == list(range(8))
    for i, p in enumerate(prompts):
        for j in range(2):
            assert r.choices[i * 2 + j].text == singles[i], (i, j)
    # token ids, and a list of lists of ids
    ids = [tokenize(stories, p) for p in prompts]
    r1 = client.completions.create(model=M, prompt=ids[0], max_tokens=16, temperature=0)
    assert r1.choices[0].text == singles[0]
    r2 = client.completions.create(model=M, prompt=ids, max_tokens=16, temperature=0)
    assert [c.text for c in r2.choices] == singles
    assert r2.usage.prompt_tokens == sum(len(x) for x in ids)
    # a body over 64 KiB is prepared on the worker thread: same result
    st, _, j = stories.post("/v1/completions", {"prompt": prompts, "max_tokens": 16, "temperature": 0,
                                                "user": "u" * 70000})
    assert st == 200 and [c["text"] for c in j["choices"]] == singles
    # streamed: each choice's text in order
    st, events, _ = stories.stream("/v1/completions", {"prompt": prompts, "max_tokens": 16, "temperature": 0,
                                                       "stream": True})
    assert st == 200
    for i in range(len(prompts)):
        assert stream_text(events, index=i, kind="cmpl") == singles[i]


def test_completions_echo(stories):
    client = openai.OpenAI(base_url=stories.base + "/v1", api_key="unused")
    plain = client.completions.create(model=M, prompt=PROMPT, max_tokens=8, temperature=0).choices[0].text
    r = client.completions.create(model=M, prompt=[PROMPT, "The dog"], max_tokens=8, temperature=0, echo=True)
    assert r.choices[0].text == PROMPT + plain
    assert r.choices[1].text.startswith("The dog")
    st, events, _ = stories.stream("/v1/completions", {"prompt": PROMPT, "max_tokens": 8, "temperature": 0,
                                                       "echo": True, "stream": True})
    assert stream_text(events, kind="cmpl") == PROMPT + plain


@pytest.mark.parametrize("chunk", [None, 4])
def test_completions_echo_logprobs_match_reference(stories, make_server, chunk):
    """echo + logprobs: the prompt tokens' logprobs (first one null, as OpenAI) equal the reference model's
    log-softmax, then the generated tokens follow; also across prefill chunks and for each prompt of a list."""
    import os
    import sys
    import numpy as np
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ref"))
    from llama_ref import LlamaRef
    from conftest import STORIES
    ids = [1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315]  # > 8 rows scored per output matmul
    if chunk:  # prefill in chunks of 4: prompt rows arrive over several steps
        stories = make_server(STORIES, "--ctx-size", 256, "--max-batch-tokens", chunk)
    client = openai.OpenAI(base_url=stories.base + "/v1", api_key="unused")
    plain = client.completions.create(model=M, prompt=ids, max_tokens=4, temperature=0, logprobs=2)
    r = client.completions.create(model=M, prompt=[ids, ids[:5]], max_tokens=4, temperature=0, logprobs=2, echo=True)
    ref = LlamaRef(STORIES, act_quant=True).forward(ids)
    ref = ref - np.log(np.exp(ref - ref.max(1, keepdims=True)).sum(1, keepdims=True)) - ref.max(1, keepdims=True)
    for c, seq in zip(r.choices, [ids, ids[:5]]):
        lp = c.logprobs
        n = len(seq)
        assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
        got = np.array(lp.token_logprobs[1:n])
        want = np.array([ref[i - 1, seq[i]] for i in range(1, n)])
        assert np.abs(got - want).max() < 5e-3, (got, want)
        assert all(len(t) == 2 for t in lp.top_logprobs[1:])
        assert lp.text_offset == sorted(lp.text_offset)
    # the generated part is unchanged by echo
    assert r.choices[0].logprobs.tokens[len(ids):] == plain.choices[0].logprobs.tokens
    assert np.allclose(r.choices[0].logprobs.token_logprobs[len(ids):], plain.choices[0].logprobs.token_logprobs)
    assert r.choices[0].text.endswith(plain.choices[0].text)


def test_completions_suffix_refused_without_fim(stories):
    client = openai.OpenAI(base_url=stories.base + "/v1", api_key="unused")
    with pytest.raises(openai.BadRequestError) as ei:
        client.completions.create(model=M, prompt="def f(", suffix="    return x\n", max_tokens=4)
    assert ei.value.body["param"] == "suffix" and "fim" in ei.value.body["message"].lower()


# --- with speculative decoding ---------------------------------------------------------------------------

def _drafted(srv):
    return sum(v for k, v in srv.metrics().items() if k.startswith("tachyon:spec_draft_tokens_total"))


def test_logit_bias_and_echo_logprobs_under_speculation(make_server):
    """logit_bias is a sampler step, so the speculative verifier (which samples every row with the request's
    sampler) honours it: the same text with drafting forced on as with it off, greedy and seeded. Prompt-logprob
    (echo + logprobs) and embedding requests are never drafted for."""
    off = make_server(STORIES, "--ctx-size", 512, "--spec", "off")
    ng = make_server(STORIES, "--ctx-size", 512, "--spec", "ngram", "--spec-k", 4)
    body = {"prompt": PROMPT, "max_tokens": 80, "temperature": 0, "ignore_eos": True, "logprobs": 0}
    st, _, plain = off.post("/v1/completions", body)
    assert st == 200, plain
    toks = plain["choices"][0]["logprobs"]["tokens"]
    banned = token_id(off, toks[0])
    for extra in ({"logit_bias": {str(banned): -100}},
                  {"logit_bias": {str(banned): -100, "300": 4}, "temperature": 1.0, "seed": 11}):
        b = {**body, **extra}
        d0 = _drafted(ng)
        st, _, a = off.post("/v1/completions", b)
        st2, _, c = ng.post("/v1/completions", b)
        assert st == st2 == 200, (a, c)
        assert a["choices"][0]["text"] == c["choices"][0]["text"], extra
        assert a["choices"][0]["logprobs"]["tokens"][0] != toks[0]
        assert _drafted(ng) > d0, "no drafts: the verifier was not exercised"
    # echo + logprobs: prompt rows scored, no drafts; the same request without echo is drafted for
    d0 = _drafted(ng)
    st, _, e = ng.post("/v1/completions", {**body, "echo": True})
    assert st == 200 and e["choices"][0]["text"] == PROMPT + plain["choices"][0]["text"], e
    assert _drafted(ng) == d0
    st, _, _ = ng.post("/v1/embeddings", {"input": PROMPT * 8})
    assert st == 200 and _drafted(ng) == d0
    st, _, j = ng.post("/v1/completions", body)
    assert st == 200 and j["choices"][0]["text"] == plain["choices"][0]["text"] and _drafted(ng) > d0
