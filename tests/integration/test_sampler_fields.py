"""llama-server's and vLLM's sampler and stopping fields through the HTTP API, against `tachyon serve` of
SmolLM2-135M-Instruct: each real field changes the output the way its sampler says (DRY breaks a loop the
plain greedy output repeats, stop_token_ids ends at the token, include_stop_str_in_output keeps the stop
string, min_tokens forces at least n tokens past EOS and stop strings, mirostat / XTC / typical-p change
outputs and reproduce with a seed), aliases equal the OpenAI names, guided_* constrain the output, and bad
values are a 400 naming the field."""
import json
import re

import pytest

MSGS = [{"role": "user", "content": "Write the word 'apple' twenty times, separated by commas."}]


def chat(srv, msgs=MSGS, **kw):
    b = {"messages": msgs, "max_tokens": 48, "temperature": 0}
    b.update(kw)
    st, _, j = srv.post("/v1/chat/completions", b)
    assert st == 200, j
    return j


def text(j):
    return j["choices"][0]["message"]["content"]


def toks(srv, s):
    st, _, j = srv.post("/tokenize", {"content": s})
    assert st == 200, j
    return j["tokens"]


def bad(srv, field, value, **kw):
    b = {"messages": MSGS, "max_tokens": 4, field: value}
    b.update(kw)
    st, _, j = srv.post("/v1/chat/completions", b)
    assert st == 400, (field, value, st, j)
    assert j["error"]["param"].startswith(field.split(".")[0]), (field, j)
    return j


def longest_repeat(ids, n=4):
    """How many times the most frequent n-gram of ids occurs."""
    grams = {}
    for i in range(len(ids) - n + 1):
        g = tuple(ids[i:i + n])
        grams[g] = grams.get(g, 0) + 1
    return max(grams.values()) if grams else 0


# A prompt whose greedy answer loops ("apple, apple, ...") at every ISA level: MSGS's answer starts on a near
# tie (top-2 logits 0.02 apart) and loops at some levels only.
LOOP = [{"role": "user", "content": "Continue the list: apple, apple, apple, apple, apple, apple, apple, apple,"}]


def test_dry_breaks_a_loop(smol):
    plain = text(chat(smol, LOOP, max_tokens=48))
    dry = text(chat(smol, LOOP, max_tokens=48, dry_multiplier=0.8))
    rp, rd = longest_repeat(toks(smol, plain)), longest_repeat(toks(smol, dry))
    assert rp >= 6, plain  # the plain greedy output loops
    assert rd < rp, (plain, dry)  # DRY penalizes continuing the loop
    assert text(chat(smol, LOOP, max_tokens=48, dry_multiplier=0.8)) == dry  # greedy + DRY is deterministic
    # a breaker token ("," here) caps the repeats DRY sees: the loop of "apple," survives it
    assert longest_repeat(toks(smol, text(chat(smol, LOOP, max_tokens=48, dry_multiplier=0.8,
                                              dry_sequence_breakers=[","])))) > rd


def test_stop_token_ids(smol):
    base = chat(smol, max_tokens=24)
    ids = toks(smol, text(base))
    stop = ids[3]  # a token the greedy output produces early
    j = chat(smol, max_tokens=24, stop_token_ids=[stop])
    assert j["choices"][0]["finish_reason"] == "stop"
    out = toks(smol, text(j))
    assert stop not in out[:-1] and len(out) <= ids.index(stop) + 2, (text(base), text(j))
    assert text(base).startswith(text(j)) or text(j).startswith(text(base)[:len(text(j)) - 8]), (text(base), text(j))
    bad(smol, "stop_token_ids", [10 ** 9])
    bad(smol, "stop_token_ids", "x")


def test_include_stop_str_in_output(smol):
    sky = [{"role": "user", "content": "Explain in two sentences why the sky is blue."}]
    base = text(chat(smol, sky, max_tokens=32))
    word = re.findall(r"[A-Za-z]{4,}", base)[1]
    cut = text(chat(smol, sky, max_tokens=32, stop=[word]))
    kept = text(chat(smol, sky, max_tokens=32, stop=[word], include_stop_str_in_output=True))
    assert word not in cut and kept == cut + word, (cut, kept)
    bad(smol, "include_stop_str_in_output", "yes")


def test_min_tokens(smol):
    short = chat(smol, [{"role": "user", "content": "Hi"}], max_tokens=64)
    n0 = short["usage"]["completion_tokens"]
    assert short["choices"][0]["finish_reason"] == "stop" and n0 < 20, short
    j = chat(smol, [{"role": "user", "content": "Hi"}], max_tokens=64, min_tokens=n0 + 10)
    assert j["usage"]["completion_tokens"] >= n0 + 10, j
    # a stop string that occurs early is not honoured before min_tokens
    base = text(chat(smol, max_tokens=40))
    first = re.findall(r"[A-Za-z]{3,}", base)[0]
    early = chat(smol, max_tokens=40, stop=[first])
    late = chat(smol, max_tokens=40, stop=[first], min_tokens=12)
    assert late["usage"]["completion_tokens"] >= 12 > early["usage"]["completion_tokens"], (early, late)
    bad(smol, "min_tokens", -1)
    bad(smol, "min_tokens", 10, max_tokens=5)


# Each sampler against the same chain with a neutral setting (mirostat with a target surprise nothing
# exceeds; llama-server's chain turned on by a top-n-sigma that keeps everything): same seeds, so only the
# sampler itself can make the texts differ.
NEUTRAL = {"top_n_sigma": 1e6}


@pytest.mark.parametrize("fields,neutral", [
    ({"mirostat": 2, "mirostat_tau": 3.0, "mirostat_eta": 0.1}, {"mirostat": 2, "mirostat_tau": 100.0}),
    ({"mirostat": 1, "mirostat_tau": 3.0}, {"mirostat": 1, "mirostat_tau": 100.0}),
    # XTC at threshold 0.5 draws as often but never removes anything (two tokens cannot both reach 0.5)
    ({"xtc_probability": 1.0, "xtc_threshold": 0.05}, {"xtc_probability": 1.0, "xtc_threshold": 0.5}),
    ({"typical_p": 0.3}, NEUTRAL),
    ({"top_n_sigma": 0.5}, NEUTRAL),
    ({"dynatemp_range": 0.9, "dynatemp_exponent": 0.5}, NEUTRAL),
])
def test_sampler_changes_output_reproducibly(smol, fields, neutral):
    def run(seed, f):
        return text(chat(smol, max_tokens=40, temperature=1.0, seed=seed, **f))
    base = [run(s, neutral) for s in (1, 2, 3)]
    got = [run(s, fields) for s in (1, 2, 3)]
    assert got == [run(s, fields) for s in (1, 2, 3)]  # same seed, same text
    assert got != base, (fields, got)  # and the sampler changed it


def test_xtc_at_temperature_zero_removes_the_top_token(smol):
    greedy = text(chat(smol, max_tokens=24))
    assert text(chat(smol, max_tokens=24, xtc_probability=1.0, xtc_threshold=0.1, seed=5)) != greedy


def test_aliases(smol):
    assert chat(smol, max_tokens=None, n_predict=7)["usage"]["completion_tokens"] <= 7
    a = text(chat(smol, max_tokens=40, repetition_penalty=1.3))
    assert text(chat(smol, max_tokens=40, repeat_penalty=1.3)) == a
    assert text(chat(smol, max_tokens=40, repeat_penalty=1.3, repeat_last_n=-1)) == a  # OpenAI's default window
    j = chat(smol, max_tokens=4, n_probs=3)
    assert len(j["choices"][0]["logprobs"]["content"][0]["top_logprobs"]) == 3, j
    base = text(chat(smol, max_tokens=16))
    assert text(chat(smol, max_tokens=16, cache_prompt=True, id_slot=0)) == base  # accepted, no effect
    bad(smol, "repeat_penalty", 1.1, repetition_penalty=1.2)
    bad(smol, "n_predict", 0)


def test_guided(smol):
    j = chat(smol, max_tokens=10, guided_choice=["yes", "no"])
    assert text(j) in ("yes", "no"), j
    schema = {"type": "object", "properties": {"n": {"enum": [1, 2, 3]}}, "required": ["n"],
              "additionalProperties": False}
    assert json.loads(text(chat(smol, max_tokens=30, guided_json=schema)))["n"] in (1, 2, 3)
    assert json.loads(text(chat(smol, max_tokens=30, structured_outputs={"json": schema})))["n"] in (1, 2, 3)
    assert re.fullmatch(r"(red|blue)!", text(chat(smol, max_tokens=10, guided_grammar='root ::= ("red" | "blue") "!"')))
    j = bad(smol, "guided_regex", "[0-9]+")
    assert "regular" in j["error"]["message"], j
    bad(smol, "guided_choice", ["a"], guided_json=schema)
    bad(smol, "guided_choice", [], )


@pytest.mark.parametrize("field,value", [
    ("typical_p", 0), ("typical_p", 1.5), ("mirostat", 3), ("mirostat_tau", -1), ("xtc_probability", 2),
    ("xtc_threshold", -0.1), ("dry_multiplier", -1), ("dry_base", 0.5), ("dry_allowed_length", -1),
    ("dry_penalty_last_n", -2), ("dry_sequence_breakers", "\n"), ("dry_sequence_breakers", [""]),
    ("dynatemp_range", -1), ("dynatemp_exponent", "x"), ("top_n_sigma", "x"), ("repeat_last_n", -5),
    ("skip_special_tokens", 1), ("n_probs", 100),
])
def test_bad_values(smol, field, value):
    bad(smol, field, value)


def test_speculation_keeps_stateful_samplers_exact(smol, make_server):
    """The default server drafts (--spec auto: prompt lookup on the looping output); the verifier accepts
    tokens through each request's own sampler, so DRY's history, mirostat's mu and min_tokens' count see
    the accepted tokens only and the text equals a server that never drafts, token for token."""
    from conftest import SMOL
    off = make_server(SMOL, "--ctx-size", 2048, "--spec", "off")
    for f in [{"dry_multiplier": 0.8}, {"dry_multiplier": 0.8, "dry_sequence_breakers": [","]},
              {"mirostat": 2, "mirostat_tau": 2.0, "temperature": 1.0, "seed": 4},
              {"xtc_probability": 0.5, "xtc_threshold": 0.05, "temperature": 1.0, "seed": 4},
              {"min_tokens": 30, "ignore_eos": False}]:
        assert text(chat(smol, max_tokens=48, **f)) == text(chat(off, max_tokens=48, **f)), f
