"""Chat templates: our C renderers (via `tachyon chat-template`) against Jinja rendering of the real template
text, byte for byte, the way HF transformers renders it (ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, raise_exception, strftime_now). Real templates come from ../shared/testdata/chat-templates/
and the SmolLM2 GGUF; families without a file there use their documented template, written below."""
import functools
import json
import os
import subprocess
from datetime import datetime
from pathlib import Path

import jinja2
import jinja2.ext
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = Path(__file__).resolve().parents[2]
TDIR = ROOT / ".." / "shared" / "testdata" / "chat-templates"
SMOL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
BIN = os.environ.get("TACHYON_BIN", str(ROOT / "build" / "tachyon"))

DS_BOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>"
DS_EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"


def _raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


@functools.lru_cache(maxsize=None)
def _compiled(template):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(template)


def jinja_render(template, messages, add_generation_prompt, bos_token, eos_token):
    return _compiled(template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                      bos_token=bos_token, eos_token=eos_token)


def ours(args, messages, gen=True):
    cmd = [BIN, "chat-template", *args] + ([] if gen else ["--no-gen-prompt"]) + [json.dumps(messages)]
    p = subprocess.run(cmd, capture_output=True)
    assert p.returncode == 0, f"{cmd} failed: {p.stderr.decode()}"
    return p.stdout.decode()


def S(c): return {"role": "system", "content": c}
def U(c): return {"role": "user", "content": c}
def A(c): return {"role": "assistant", "content": c}


# Conversations: plain, with whitespace around contents (templates differ in trimming), reasoning in an
# assistant turn (DeepSeek drops it), one ending with an assistant turn.
CONVS = {
    "user": [U("Hello!")],
    "sys_user": [S("You are terse."), U("What is 2+2?")],
    "sys_user_asst_user": [S("  Be kind.\n"), U(" Hi there \n"), A("<think>greet</think>\n\nHello! How can I help?  "),
                           U("Tell me a joke.")],
    "user_asst_user": [U("Hi"), A("Hello."), U("Bye")],
    "sys_user_asst": [S("Sys"), U("Q"), A("A")],
}

# --- canonical templates of families that have no file in testdata (from the models' published configs)
LLAMA2 = r"""{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"""

LLAMA3_0 = r"""{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"""

MISTRAL_V1 = r"""{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
"""

MISTRAL_V3 = r"""{%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
        {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif %}
    {%- set ns.index = ns.index + 1 %}
{%- endfor %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
"""

MISTRAL_LEGACY = r"""{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"""

MISTRAL_V7 = r"""{{- bos_token }}
{%- for message in messages %}
    {%- if message['role'] == 'user' %}
        {{- '[INST]' + message['content'] + '[/INST]' }}
    {%- elif message['role'] == 'system' %}
        {{- '[SYSTEM_PROMPT]' + message['content'] + '[/SYSTEM_PROMPT]' }}
    {%- elif message['role'] == 'assistant' %}
        {{- message['content'] + eos_token }}
    {%- endif %}
{%- endfor %}
"""

ZEPHYR = r"""{% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>
'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %}"""

GEMMA3 = r"""{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
"""

CHATML_PLAIN = r"""{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"""
HERMES_DEFAULT = "{{bos_token}}" + CHATML_PLAIN


@functools.lru_cache(maxsize=None)
def smollm2_template():
    gguf = pytest.importorskip("gguf")
    r = gguf.GGUFReader(str(SMOL))
    f = r.fields["tokenizer.chat_template"]
    return bytes(f.parts[f.data[0]]).decode()


def tfile(name):
    return (TDIR / name).read_text()


# name -> (template text used by us, reference template text, family, bos, eos, conversations that the
# reference template rejects (raise_exception) and we render anyway, the documented way: see DOCUMENTED)
CASES = {
    "smollm2": (smollm2_template, None, "chatml", "<|im_start|>", "<|im_end|>", ()),
    "qwen2.5": (lambda: tfile("Qwen-Qwen2.5-7B-Instruct.jinja"), None, "chatml", "", "<|im_end|>", ()),
    "hermes2pro": (lambda: tfile("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja"), HERMES_DEFAULT, "chatml",
                   "<|begin_of_text|>", "<|im_end|>", ()),
    "hermes3": (lambda: tfile("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja"), HERMES_DEFAULT, "chatml",
                "<|begin_of_text|>", "<|im_end|>", ()),
    "chatml-plain": (lambda: CHATML_PLAIN, None, "chatml", "", "<|im_end|>", ()),
    "llama2": (lambda: LLAMA2, None, "llama2", "<s>", "</s>", ()),
    "llama3.0": (lambda: LLAMA3_0, None, "llama3", "<|begin_of_text|>", "<|eot_id|>", ()),
    "llama3.1": (lambda: tfile("meta-llama-Llama-3.1-8B-Instruct.jinja"), None, "llama3", "<|begin_of_text|>",
                 "<|eot_id|>", ()),
    "llama3.2": (lambda: tfile("meta-llama-Llama-3.2-3B-Instruct.jinja"), None, "llama3", "<|begin_of_text|>",
                 "<|eot_id|>", ()),
    "llama3.3": (lambda: tfile("meta-llama-Llama-3.3-70B-Instruct.jinja"), None, "llama3", "<|begin_of_text|>",
                 "<|eot_id|>", ()),
    "mistral-v1": (lambda: MISTRAL_V1, None, "mistral", "<s>", "</s>", ()),
    "mistral-v3": (lambda: MISTRAL_V3, None, "mistral", "<s>", "</s>", ()),
    "mistral-nemo": (lambda: tfile("mistralai-Mistral-Nemo-Instruct-2407.jinja"), None, "mistral", "<s>", "</s>", ()),
    "mistral-legacy": (lambda: MISTRAL_LEGACY, None, "mistral", "<s>", "</s>",
                       ("sys_user", "sys_user_asst_user", "sys_user_asst")),
    "mistral-v7": (lambda: MISTRAL_V7, None, "mistral", "<s>", "</s>", ()),
    "gemma2": (lambda: tfile("google-gemma-2-2b-it.jinja"), None, "gemma", "<bos>", "<eos>",
               ("sys_user", "sys_user_asst_user", "sys_user_asst")),
    "gemma3": (lambda: GEMMA3, None, "gemma", "<bos>", "<eos>", ()),
    "phi3.5": (lambda: tfile("microsoft-Phi-3.5-mini-instruct.jinja"), None, "phi3", "<s>", "<|endoftext|>", ()),
    "zephyr": (lambda: ZEPHYR, None, "zephyr", "<s>", "</s>", ()),
    "deepseek-r1-llama": (lambda: tfile("deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja"), None, "deepseek", DS_BOS,
                          DS_EOS, ()),
    "deepseek-r1-qwen": (lambda: tfile("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"), None, "deepseek", DS_BOS,
                         DS_EOS, ()),
    "deepseek-r1-llamacpp": (lambda: tfile("llama-cpp-deepseek-r1.jinja"), None, "deepseek", DS_BOS, DS_EOS, ()),
}


def fold_system(msgs):
    """A leading system message prepended to the first user turn, separated by a blank line (what Mistral
    v1 does and what tachyon does for Mistral templates without a system role)."""
    if not msgs or msgs[0]["role"] != "system":
        return msgs
    return [U(msgs[0]["content"] + "\n\n" + msgs[1]["content"])] + msgs[2:]


# What tachyon renders where the real template raises on a system message (README, chat templates):
# Gemma 2's system message goes into the first user turn as Gemma 3's template puts it; legacy Mistral
# (v0.1) gets it before the first user message like Mistral v1.
DOCUMENTED = {
    "gemma2": lambda msgs, gen, bos, eos: jinja_render(GEMMA3, msgs, gen, bos, eos),
    "mistral-legacy": lambda msgs, gen, bos, eos: jinja_render(MISTRAL_LEGACY, fold_system(msgs), gen, bos, eos),
}


def _detect(path):
    p = subprocess.run([BIN, "chat-template", "--template-file", str(path), "--detect"], capture_output=True)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.decode().strip()


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("conv", sorted(CONVS))
@pytest.mark.parametrize("gen", [True, False])
def test_render_matches_jinja(tmp_path, name, conv, gen):
    get_tmpl, ref_tmpl, family, bos, eos, rejected = CASES[name]
    tmpl = get_tmpl()
    path = tmp_path / "t.jinja"
    path.write_text(tmpl)
    assert _detect(path) == family
    msgs = CONVS[conv]
    if conv in rejected:
        # the real template refuses this conversation; we render it the documented way instead
        with pytest.raises(jinja2.exceptions.TemplateError, match="[Ss]ystem role|alternate|roles are supported"):
            jinja_render(ref_tmpl or tmpl, msgs, gen, bos, eos)
        want = DOCUMENTED[name](msgs, gen, bos, eos)
    else:
        want = jinja_render(ref_tmpl or tmpl, msgs, gen, bos, eos)
    got = ours(["--template-file", str(path), "--family", "auto", "--bos", bos], msgs, gen)
    assert got == want, f"\n--- reference ---\n{want!r}\n--- ours ---\n{got!r}"


def test_rejections_are_exactly_the_system_placements():
    """Every conversation a template rejects has a system message, and every such template has a
    documented rendering: nothing is left untested."""
    for name, (get_tmpl, ref_tmpl, _, bos, eos, rejected) in CASES.items():
        assert not rejected or name in DOCUMENTED, name
        for conv in CONVS:
            raised = False
            try:
                jinja_render(ref_tmpl or get_tmpl(), CONVS[conv], True, bos, eos)
            except jinja2.exceptions.TemplateError:
                raised = True
            assert raised == (conv in rejected), (name, conv)
            assert not raised or CONVS[conv][0]["role"] == "system", (name, conv)


# --family NAME without template text renders the family's main template.
FAMILY_DEFAULTS = {
    "chatml": (CHATML_PLAIN, "", "<|im_end|>"),
    "llama2": (LLAMA2, "<s>", "</s>"),
    "llama3": (None, "<|begin_of_text|>", "<|eot_id|>"),  # Llama 3.1 file
    "mistral": (MISTRAL_V3, "<s>", "</s>"),
    "gemma": (GEMMA3, "<bos>", "<eos>"),
    "phi3": (None, "<s>", "<|endoftext|>"),
    "zephyr": (ZEPHYR, "<s>", "</s>"),
    "deepseek": (None, DS_BOS, DS_EOS),
}
FAMILY_FILES = {"llama3": "meta-llama-Llama-3.1-8B-Instruct.jinja", "phi3": "microsoft-Phi-3.5-mini-instruct.jinja",
                "deepseek": "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja"}


@pytest.mark.parametrize("family", sorted(FAMILY_DEFAULTS))
@pytest.mark.parametrize("conv", ["user", "sys_user_asst_user", "user_asst_user"])
def test_family_default(family, conv):
    tmpl, bos, eos = FAMILY_DEFAULTS[family]
    tmpl = tmpl or tfile(FAMILY_FILES[family])
    want = jinja_render(tmpl, CONVS[conv], True, bos, eos)
    got = ours(["--family", family, "--bos", bos], CONVS[conv])
    assert got == want, f"\n--- jinja ---\n{want!r}\n--- ours ---\n{got!r}"


def test_model_gguf_template_and_bos():
    """-m reads tokenizer.chat_template and the BOS text from the GGUF itself."""
    msgs = CONVS["user_asst_user"]
    want = jinja_render(smollm2_template(), msgs, True, "<|im_start|>", "<|im_end|>")
    assert ours(["-m", str(SMOL)], msgs) == want
    assert "SmolLM" in want  # the default system prompt is there


@pytest.mark.parametrize("fname", ["CohereForAI-c4ai-command-r-plus-tool_use.jinja",
                                   "meetkai-functionary-medium-v3.2.jinja"])
def test_unknown_template_error_names_override(fname):
    p = subprocess.run([BIN, "chat-template", "--template-file", str(TDIR / fname), "--family", "auto",
                        json.dumps(CONVS["user"])],
                       capture_output=True)
    assert p.returncode != 0
    err = p.stderr.decode()
    assert "--chat-template" in err and "chatml" in err and "llama3" in err and "gemma" in err, err


def test_role_rejected_by_family():
    p = subprocess.run([BIN, "chat-template", "--family", "gemma", json.dumps([{"role": "tool", "content": "x"}])],
                       capture_output=True)
    assert p.returncode != 0 and b"tool" in p.stderr
