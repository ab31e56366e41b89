"""Client libraries run unchanged against `tachyon serve` of SmolLM2: LangChain (ChatOpenAI: invoke, stream,
bind_tools with a forced tool, with_structured_output of a model with bounds; ChatAnthropic: invoke), LiteLLM
(the openai/ provider with api_base: completion, streaming, a forced tool call) and instructor (a Pydantic
model through JSON-schema and TOOLS modes). Each test skips only when its library cannot be imported; replies
are short (max_tokens) so the file stays quick on a small model."""
import json
import os

import pytest

from conftest import SMOL

MODEL = os.path.basename(SMOL)[: -len(".gguf")]
ASK = "Write one sentence about the sea."
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}

# LiteLLM reads its bundled model cost map instead of fetching one (the tests run offline)
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")


def lc_openai(srv, **kw):
    lco = pytest.importorskip("langchain_openai")
    return lco.ChatOpenAI(model=MODEL, base_url=srv.base + "/v1", api_key="unused", temperature=0, max_retries=0,
                          **kw)


# --- LangChain ----------------------------------------------------------------------------------------------

def test_langchain_invoke_and_stream(smol):
    llm = lc_openai(smol, max_tokens=24)
    full = llm.invoke(ASK)
    assert isinstance(full.content, str) and full.content.strip()
    assert full.usage_metadata["input_tokens"] > 5 and 0 < full.usage_metadata["output_tokens"] <= 24
    streamed = "".join(chunk.content for chunk in llm.stream(ASK))
    assert streamed == full.content


def test_langchain_forced_tool(smol):
    llm = lc_openai(smol, max_tokens=48).bind_tools([WEATHER], tool_choice="get_weather")
    msg = llm.invoke("What is the weather in Paris?")
    assert len(msg.tool_calls) == 1, msg
    call = msg.tool_calls[0]
    assert call["name"] == "get_weather" and isinstance(call["args"].get("city"), str)
    assert not msg.invalid_tool_calls


def test_langchain_structured_output_bounds(smol):
    pydantic = pytest.importorskip("pydantic")

    class Person(pydantic.BaseModel):
        name: str = pydantic.Field(max_length=20)
        age: int = pydantic.Field(ge=0, le=120)
        code: str = pydantic.Field(pattern=r"^[A-Z]{3}[0-9]{2}$")
        site: pydantic.HttpUrl  # format uri, maxLength 2083

    llm = lc_openai(smol, max_tokens=96).with_structured_output(Person)  # strict json_schema by default
    p = llm.invoke("Describe a person called Ann who is 31, with code ABC12 and website https://ann.example.com")
    assert isinstance(p, Person) and 0 <= p.age <= 120 and len(p.name) <= 20 and p.site.scheme.startswith("http")


def test_langchain_anthropic_invoke(smol):
    lca = pytest.importorskip("langchain_anthropic")
    llm = lca.ChatAnthropic(model=MODEL, base_url=smol.base, api_key="unused", max_tokens=24, temperature=0,
                            max_retries=0)
    msg = llm.invoke(ASK)
    text = msg.content if isinstance(msg.content, str) else "".join(
        b.get("text", "") for b in msg.content if isinstance(b, dict))
    assert text.strip()
    assert msg.usage_metadata["input_tokens"] > 5 and 0 < msg.usage_metadata["output_tokens"] <= 24


# --- LiteLLM ------------------------------------------------------------------------------------------------

def litellm_kw(srv, **kw):
    kw.update(model="openai/" + MODEL, api_base=srv.base + "/v1", api_key="unused", temperature=0)
    return kw


def test_litellm_completion_and_stream(smol):
    litellm = pytest.importorskip("litellm")
    msgs = [{"role": "user", "content": ASK}]
    full = litellm.completion(**litellm_kw(smol, messages=msgs, max_tokens=24))
    text = full.choices[0].message.content
    assert text.strip() and full.usage.prompt_tokens > 5
    parts = [c.choices[0].delta.content or "" for c in
             litellm.completion(**litellm_kw(smol, messages=msgs, max_tokens=24, stream=True)) if c.choices]
    assert "".join(parts) == text


def test_litellm_forced_tool(smol):
    litellm = pytest.importorskip("litellm")
    r = litellm.completion(**litellm_kw(smol, max_tokens=48, tools=[WEATHER],
                                        messages=[{"role": "user", "content": "Weather in Paris?"}],
                                        tool_choice={"type": "function", "function": {"name": "get_weather"}}))
    calls = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls" and len(calls) == 1
    assert calls[0].function.name == "get_weather"
    assert isinstance(json.loads(calls[0].function.arguments)["city"], str)


# --- instructor ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["JSON_SCHEMA", "TOOLS"])
def test_instructor_validated_object(smol, mode):
    instructor = pytest.importorskip("instructor")
    openai = pytest.importorskip("openai")
    pydantic = pytest.importorskip("pydantic")

    class City(pydantic.BaseModel):
        name: str = pydantic.Field(min_length=1, max_length=30)
        population: int = pydantic.Field(ge=0, le=100_000_000)

    client = instructor.from_openai(openai.OpenAI(base_url=smol.base + "/v1", api_key="unused", max_retries=0),
                                    mode=getattr(instructor.Mode, mode))
    city = client.chat.completions.create(model=MODEL, response_model=City, max_retries=0, max_tokens=48,
                                          temperature=0,
                                          messages=[{"role": "user", "content": "Paris has 2 million people."}])
    assert isinstance(city, City) and city.name and 0 <= city.population <= 100_000_000
