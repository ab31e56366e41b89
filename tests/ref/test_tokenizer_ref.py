"""SmolLM2's GGUF tokenizer (tachyon) against HF `tokenizers` loading the model's tokenizer.json.

A deterministic corpus of >= 200 varied texts (prose, multilingual, emoji, code, numbers, whitespace runs,
punctuation, random mixes) is tokenized in one `tachyon tokenize --file` process and compared id for id.
"""
import json
import os
import random
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("TACHYON_BIN", str(ROOT / "build" / "tachyon"))
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
TOKJSON = ROOT / ".." / "shared" / "testdata" / "vocab" / "smollm2-135m-tokenizer.json"

tokenizers = pytest.importorskip("tokenizers")

PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "It's a truth universally acknowledged, that a single man in possession of a good fortune must be in want of a wife.",
    "I'm sure you'll agree: they've done it, haven't they? We'd better go.",
    "Call me Ishmael. Some years ago—never mind how long precisely—having little or no money in my purse…",
    "She said, \"Don't!\" and he replied, 'Why not?'",
    "HELLO WORLD, this Is MiXeD CaSe text with ALLCAPS and camelCaseWords and snake_case_words.",
]
MULTI = [
    "日本語のテキストです。東京は大きな都市です。",
    "中文文本测试：你好，世界！我们今天去公园吧。",
    "한국어 텍스트입니다. 안녕하세요!",
    "Русский текст: Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "العربية: مرحبا بالعالم، كيف حالك اليوم؟",
    "हिन्दी: नमस्ते दुनिया, आप कैसे हैं?",
    "Ελληνικά: Καλημέρα κόσμε",
    "עברית: שלום עולם",
    "ไทย: สวัสดีชาวโลก",
    "Tiếng Việt: Xin chào thế giới, đây là một bài kiểm tra.",
    "Déjà vu, naïve café, façade, coöperate, Ångström, smörgåsbord, Straße.",
    "e\u0301 vs \u00e9, n\u0303 vs \u00f1 (combining accents)",
]
EMOJI = [
    "I love pizza 🍕🍕 and 🎉 parties!",
    "Family: 👨‍👩‍👧‍👦 and flags 🇺🇸🇯🇵 and skin tones 👋🏽👍🏿",
    "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ (only emoji that has its own token)",
    "❤️‍🔥 ⭐️ ☕ 🫠 🧑‍💻",
]
CODE = [
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "int main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "for (let i = 0; i < arr.length; i++) { console.log(arr[i] ?? 'none'); }",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
    "<html><body><div class=\"x\">Hello &amp; welcome</div></body></html>",
    "x = {'a': [1, 2, 3], \"b\": (4, 5), 'c': None}  # comment",
    "fn main() -> Result<(), Box<dyn Error>> { let v: Vec<u8> = vec![0; 16]; Ok(()) }",
    "    indented\n        more\n\t\ttabs\n\n\n   trailing   \n",
    "$ ls -la | grep '^d' && echo \"done\" || exit 1",
    "#include <stdio.h>\n#define MAX(a,b) ((a)>(b)?(a):(b))\n",
]
NUMBERS = [
    "3.14159265358979 2.71828 1e-10 6.022e23",
    "1 12 123 1234 12345 123456 1234567 12345678 123456789",
    "Phone: +1 (555) 123-4567, ZIP 90210, year 2024, 1,000,000.00 dollars",
    "0x1F 0b1010 0o777 1_000_000 -42 +7 ½ ¾ ² ³ ٣ ४ 五",
    "Version 1.2.3-beta+build.456 released on 2023-10-05T12:34:56Z",
]
WS = [
    " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\t\n\t", "a  b   c    d",
    "   leading", "trailing   ", "\n\n\nparagraph\n\n\n", "mixed \t \n whitespace \u00a0 nbsp \u3000 ideographic",
    "line1\r\nline2\rline3\nline4", "     \n     \n",
]
PUNCT = [
    "Hello, world! How are you? I'm fine... Really?!",
    "!!!???...,,,;;;:::---___+++===",
    "«quotes» „German“ “curly” ‘single’ 「Japanese」 『double』",
    "a/b\\c|d~e^f`g@h#i$j%k&l*m(n)o[p]q{r}s<t>u",
    "—–-‒― … · • ‣ ※ † ‡ § ¶",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE",
]

ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    " \t\n.,;:!?'\"()[]{}<>-_+=*/\\|@#$%^&~`"
    "éüñçøåßæœ中文日本語한국어русскийعربيहिन्दी🙂🍕👨‍👩‍👧✅…—«»\u00a0\u3000"
)


def corpus():
    texts = PROSE + MULTI + EMOJI + CODE + NUMBERS + WS + PUNCT
    rng = random.Random(1234)
    base = PROSE + MULTI + EMOJI + CODE + NUMBERS + PUNCT
    # concatenations of two snippets with varied joins
    for _ in range(60):
        a, b = rng.choice(base), rng.choice(base)
        texts.append(a + rng.choice(["", " ", "\n", "  ", "\t", "\n\n"]) + b)
    # random character soup
    for _ in range(80):
        n = rng.randint(1, 60)
        texts.append("".join(rng.choice(ALPHABET) for _ in range(n)))
    # random digit and whitespace runs
    for _ in range(20):
        texts.append(" " * rng.randint(0, 5) + str(rng.randint(0, 10**12)) + " " * rng.randint(0, 5)
                     + "x" * rng.randint(0, 3))
    for _ in range(10):
        texts.append("".join(rng.choice([" ", "\n", "\t", "a", "1"]) for _ in range(rng.randint(1, 30))))
    return texts


def run_batch(texts, *flags):
    inp = "".join(json.dumps(t, ensure_ascii=True) + "\n" for t in texts)
    r = subprocess.run([BIN, "tokenize", "-m", str(MODEL), "--no-bos", *flags, "--file", "-"],
                       input=inp.encode(), capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stdout.decode().splitlines()
    assert len(lines) == len(texts)
    return [json.loads(l) for l in lines]


@pytest.fixture(scope="module")
def hf():
    if not MODEL.exists():
        pytest.skip(f"{MODEL} missing (make models)")
    return tokenizers.Tokenizer.from_file(str(TOKJSON))


def test_corpus_matches_hf(hf):
    texts = corpus()
    assert len(texts) >= 200
    ours = run_batch(texts)
    bad = []
    for t, got in zip(texts, ours):
        want = hf.encode(t, add_special_tokens=False).ids
        if got != want:
            bad.append((t, want, got))
    for t, want, got in bad[:10]:
        print(f"MISMATCH {t!r}\n  hf:   {want}\n  ours: {got}")
    assert not bad, f"{len(bad)}/{len(texts)} texts differ"


def test_special_tokens_match_hf(hf):
    # with --special, control tokens in the text are recognized, as HF does for its special added tokens
    texts = [
        "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
        "a<|im_end|>b<|endoftext|>c",
        "<|im_end|><|im_end|>",
        "text with <repo_name> and <filename> inside",
        "not special: <|im_end| and <im_end|>",
    ]
    ours = run_batch(texts, "--special")
    for t, got in zip(texts, ours):
        assert got == hf.encode(t, add_special_tokens=False).ids, t
    # without --special the same text is plain text: no control ids appear
    plain = run_batch(texts)
    for t, got in zip(texts, plain):
        assert all(i > 16 for i in got), (t, got)


def test_detokenize_roundtrip(hf):
    texts = corpus()[:60]
    ours = run_batch(texts)
    for t, ids in zip(texts[:15], ours[:15]):
        r = subprocess.run([BIN, "detokenize", "-m", str(MODEL), json.dumps(ids)], capture_output=True, timeout=30)
        assert r.returncode == 0, r.stderr.decode()
        assert r.stdout.decode()[:-1] == t  # CLI adds one newline
