#!/usr/bin/env python3
"""A scripted OpenAI-compatible streaming server for testing `tachyon bench-serve`.

stdlib only (asyncio), HTTP/1.1 keep-alive, chunked transfer encoding, one SSE event per HTTP chunk. The
k-th request the server receives (k = 0, 1, ...) is answered by a fixed script:

  first content chunk at  t_recv + ttft_ms + ttft_step_ms * (k % ttft_cycle) + ttft_per_word_ms * prompt words
  content chunk i (i>=1) at first + i * itl_ms        (absolute deadlines, so gaps do not drift)
  then the usage chunk (unless --no-usage) and data: [DONE], immediately after the last content chunk.

Failure injection by k (checked in this order): --fail-every F (HTTP 500 when k % F == F-1), --drop-every D
(connection closed after 2 content chunks when k % D == D-1), --malformed-every M (a non-JSON data: line after
1 chunk when k % M == M-1). --instant streams every chunk with no delay (overhead measurements).

It prints "PORT <n>" on stdout once listening. GET /stats returns {"requests", "max_inflight", "log"}, where log
has, per request, its id and the server's monotonic send times of every content chunk (seconds).
"""
import argparse
import asyncio
import json
import sys
import time


class State:
    def __init__(self, args):
        self.args = args
        self.k = 0
        self.inflight = 0
        self.max_inflight = 0
        self.log = []


def sse(obj):
    data = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
    return ("data: " + data + "\n\n").encode()


def chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


async def read_request(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for l in lines[1:]:
        if ":" in l:
            k, v = l.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0"))
    body = await reader.readexactly(n) if n else b""
    return method, path, headers, body


async def send_plain(writer, status, obj, reason="OK"):
    body = json.dumps(obj).encode()
    writer.write(b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                 % (status, reason.encode(), len(body), body))
    await writer.drain()


async def stream(st, writer, k, req, chat):
    a = st.args
    t_recv = time.monotonic()
    rid = "cmpl-%d" % k
    words = 0
    if chat:
        for m in req.get("messages", []):
            words += len(str(m.get("content", "")).split())
    else:
        words = len(str(req.get("prompt", "")).split())
    n = a.tokens if a.tokens > 0 else int(req.get("max_tokens", 16))
    entry = {"id": rid, "k": k, "t_recv": t_recv, "send": [], "request": req if a.keep_requests else None}
    st.log.append(entry)

    # --models a,b: request k answers as model k % 2 (a router's choice), with x-tachyon-routed-model
    models = a.models.split(",") if a.models else ["fake"]
    model = models[k % len(models)]
    # --model-ttft-ms a=MS: that model's first chunk comes this much later (tells the breakdown's rows apart)
    extra = dict(kv.split("=") for kv in a.model_ttft_ms.split(",")) if a.model_ttft_ms else {}

    def content(i):
        text = " tok%d" % i
        if chat:
            return {"id": rid, "object": "chat.completion.chunk", "model": model,
                    "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
        return {"id": rid, "object": "text_completion", "model": model,
                "choices": [{"index": 0, "text": text, "finish_reason": None}]}

    routed = b"x-tachyon-routed-model: %s\r\n" % model.encode() if a.models else b""
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n%sTransfer-Encoding: chunked\r\n\r\n"
                 % routed)
    if chat:  # a role-only first chunk (no content), as real servers send
        writer.write(chunk(sse({"id": rid, "object": "chat.completion.chunk",
                                "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})))
    loop = asyncio.get_running_loop()
    first = t_recv + (a.ttft_ms + a.ttft_step_ms * (k % a.ttft_cycle) + a.ttft_per_word_ms * words
                      + float(extra.get(model, 0))) / 1e3
    drop = a.drop_every and k % a.drop_every == a.drop_every - 1
    bad = a.malformed_every and k % a.malformed_every == a.malformed_every - 1
    for i in range(n):
        if not a.instant:
            delay = first + i * a.itl_ms / 1e3 - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        if drop and i == 2:
            await writer.drain()
            writer.transport.abort()
            return False
        if bad and i == 1:
            writer.write(chunk(b"data: {this is not json\n\n"))
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            return True
        entry["send"].append(time.monotonic())
        writer.write(chunk(sse(content(i))))
        if not a.instant or i % 64 == 63:
            await writer.drain()
    if not a.no_usage:
        usage = {"prompt_tokens": words, "completion_tokens": n, "total_tokens": words + n}
        writer.write(chunk(sse({"id": rid, "object": "chat.completion.chunk" if chat else "text_completion",
                                "choices": [], "usage": usage})))
    writer.write(chunk(sse("[DONE]")))
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    return True


async def handle(st, reader, writer):
    try:
        while True:
            try:
                method, path, headers, body = await read_request(reader)
            except (asyncio.IncompleteReadError, ConnectionError, ValueError):
                break
            if method == "GET" and path == "/stats":
                await send_plain(writer, 200, {"requests": st.k, "max_inflight": st.max_inflight, "log": st.log})
                continue
            if method != "POST" or path not in ("/v1/chat/completions", "/v1/completions"):
                await send_plain(writer, 404, {"error": {"message": "not found"}}, "Not Found")
                continue
            k = st.k
            st.k += 1
            st.inflight += 1
            st.max_inflight = max(st.max_inflight, st.inflight)
            try:
                a = st.args
                if a.expect_key and headers.get("authorization") != "Bearer " + a.expect_key:
                    await send_plain(writer, 401, {"error": {"message": "bad api key"}}, "Unauthorized")
                    continue
                if a.fail_every and k % a.fail_every == a.fail_every - 1:
                    await send_plain(writer, 500, {"error": {"message": "injected failure %d" % k}},
                                     "Internal Server Error")
                    continue
                req = json.loads(body)
                keep = await stream(st, writer, k, req, path.endswith("chat/completions"))
            finally:
                st.inflight -= 1
            if not keep:
                break
    except ConnectionError:
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ttft-ms", type=float, default=100)
    p.add_argument("--ttft-step-ms", type=float, default=0)
    p.add_argument("--ttft-cycle", type=int, default=1)
    p.add_argument("--ttft-per-word-ms", type=float, default=0, help="prefill cost: TTFT grows with the prompt")
    p.add_argument("--itl-ms", type=float, default=20)
    p.add_argument("--tokens", type=int, default=10, help="content chunks per response (0: the request's max_tokens)")
    p.add_argument("--fail-every", type=int, default=0)
    p.add_argument("--drop-every", type=int, default=0)
    p.add_argument("--malformed-every", type=int, default=0)
    p.add_argument("--no-usage", action="store_true")
    p.add_argument("--instant", action="store_true")
    p.add_argument("--keep-requests", action="store_true")
    p.add_argument("--models", default="", help="a,b: request k answers as model k %% n with x-tachyon-routed-model")
    p.add_argument("--model-ttft-ms", default="", help="a=MS,...: extra TTFT for that model's answers")
    p.add_argument("--expect-key", default=None)
    args = p.parse_args()
    st = State(args)
    server = await asyncio.start_server(lambda r, w: handle(st, r, w), "127.0.0.1", args.port, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    print("PORT %d" % port, flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
