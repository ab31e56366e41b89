"""Model names as clients send them: GET /v1/models/{id} through the openai SDK (served name, file name, unknown →
NotFoundError), and --any-model-name, which lets clients whose configuration fixes a model name (a placeholder
such as "gpt-4o" or "claude-sonnet-4-6") reach the served model, on every generation API; without it the name
is a 404."""
import anthropic
import openai
import pytest

from conftest import SMOL


def test_retrieve_model(make_server):
    srv = make_server(None, "--ctx-size", 256)  # stories260K
    c = openai.OpenAI(base_url=srv.base + "/v1", api_key="unused")
    name = c.models.list().data[0].id
    assert c.models.retrieve(name).id == name
    assert c.models.retrieve(name + ".gguf").id == name  # the file's name reaches the model too
    with pytest.raises(openai.NotFoundError) as ei:
        c.models.retrieve("no-such-model")
    assert ei.value.body["code"] == "model_not_found"
    with pytest.raises(openai.NotFoundError):
        c.chat.completions.create(model="gpt-4o", max_tokens=2, messages=[{"role": "user", "content": "hi"}])


def test_any_model_name(make_server):
    srv = make_server(SMOL, "--ctx-size", 512, "--any-model-name")
    c = openai.OpenAI(base_url=srv.base + "/v1", api_key="unused")
    msgs = [{"role": "user", "content": "hi"}]
    r = c.chat.completions.create(model="gpt-4o", max_tokens=2, messages=msgs)
    assert r.usage.completion_tokens == 2 and r.model == c.models.list().data[0].id
    assert c.completions.create(model="gpt-3.5-turbo-instruct", max_tokens=2, prompt="Hi").usage.completion_tokens == 2
    assert c.responses.create(model="gpt-5", input="hi", max_output_tokens=2).usage.output_tokens == 2
    a = anthropic.Anthropic(base_url=srv.base, api_key="unused")
    assert a.messages.create(model="claude-sonnet-4-6", max_tokens=2, messages=msgs).usage.output_tokens == 2
    assert len(c.embeddings.create(model="text-embedding-3-small", input="hi").data[0].embedding) > 0
