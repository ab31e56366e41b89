// Streaming /v1/messages: chat.completion.chunk objects in, Anthropic's SSE events out, in its order:
// message_start, then per content block content_block_start / content_block_delta… / content_block_stop (a
// ping after the first block starts), then message_delta (stop_reason, stop_sequence, usage) and message_stop.
// A block is open while the chunks keep adding to the same kind (thinking, text, one tool call); a change of
// kind closes it and opens the next. message_start carries the prompt's size from the first chunk's usage (all
// of it as input_tokens: prefix-cache hits are not known yet), message_delta the final counts from the chat
// path's last chunk (input_tokens and cache_read_input_tokens split, which the SDK reads there too).
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/wire_anthropic.h"

typedef enum { BLK_NONE, BLK_THINKING, BLK_TEXT, BLK_TOOL } blk_kind;

struct wire_stream {
    char model[256];
    int started;     // message_start sent
    int pinged;      // the ping after the first content_block_start sent
    int ended;       // message_stop or an error sent: nothing more
    blk_kind open;   // the open block's kind
    int index;       // the open block's index (the next block's when none is open)
    const char *stop_reason; // static string; NULL until the finish chunk
    char *stop_sequence;     // owned; the matched stop string
    json_t *usage;           // owned: Anthropic's usage, once the usage chunk came
};

static void emit(struct evbuffer *out, const char *name, json_t *data) {
    char *t = data ? json_dumps(data, JSON_COMPACT) : NULL;
    json_decref(data);
    if (!t) return;
    evbuffer_add_printf(out, "event: %s\ndata: %s\n\n", name, t);
    free(t);
}

wire_stream *wire_anth_stream_new(const json_t *in) {
    wire_stream *st = calloc(1, sizeof *st);
    const char *m = json_string_value(json_object_get(in, "model"));
    if (st && m) snprintf(st->model, sizeof st->model, "%s", m);
    return st;
}

static void start(wire_stream *st, const json_t *chunk, struct evbuffer *out) {
    char id[96];
    wire_anth_msg_id(json_string_value(json_object_get(chunk, "id")), id, sizeof id);
    if (!st->model[0]) {
        const char *m = json_string_value(json_object_get(chunk, "model"));
        snprintf(st->model, sizeof st->model, "%s", m ? m : "");
    }
    json_t *msg = json_pack("{s:s,s:s,s:s,s:s,s:[],s:n,s:n,s:o}", "id", id, "type", "message", "role", "assistant",
                            "model", st->model, "content", "stop_reason", "stop_sequence", "usage", wire_anth_usage(json_object_get(chunk, "usage")));
    emit(out, "message_start", json_pack("{s:s,s:o}", "type", "message_start", "message", msg));
    st->started = 1;
}

static void close_block(wire_stream *st, struct evbuffer *out) {
    if (st->open == BLK_NONE) return;
    if (st->open == BLK_THINKING) // Anthropic ends a thinking block with its signature (none here)
        emit(out, "content_block_delta", json_pack("{s:s,s:i,s:{s:s,s:s}}", "type", "content_block_delta", "index",
                                                   st->index, "delta", "type", "signature_delta", "signature", ""));
    emit(out, "content_block_stop", json_pack("{s:s,s:i}", "type", "content_block_stop", "index", st->index));
    st->open = BLK_NONE;
    st->index++;
}

// Opens a block of kind k (closing another kind first) with its content_block_start body.
static void open_block(wire_stream *st, blk_kind k, json_t *block, struct evbuffer *out) {
    close_block(st, out);
    emit(out, "content_block_start", json_pack("{s:s,s:i,s:o}", "type", "content_block_start", "index", st->index,
                                               "content_block", block));
    st->open = k;
    if (!st->pinged) emit(out, "ping", json_pack("{s:s}", "type", "ping"));
    st->pinged = 1;
}

static void delta(wire_stream *st, const char *type, const char *key, json_t *val, struct evbuffer *out) {
    emit(out, "content_block_delta", json_pack("{s:s,s:i,s:{s:s,s:O}}", "type", "content_block_delta", "index",
                                               st->index, "delta", "type", type, key, val));
}

static void tool_deltas(wire_stream *st, json_t *calls, struct evbuffer *out) {
    size_t i;
    json_t *tc;
    json_array_foreach(calls, i, tc) {
        json_t *fn = json_object_get(tc, "function"), *id = json_object_get(tc, "id");
        if (json_is_string(id)) { // a new call
            const char *name = json_string_value(json_object_get(fn, "name"));
            open_block(st, BLK_TOOL, json_pack("{s:s,s:O,s:s,s:{}}", "type", "tool_use", "id", id, "name",
                                               name ? name : "", "input"), out);
        }
        json_t *args = json_object_get(fn, "arguments");
        if (st->open == BLK_TOOL && json_string_length(args)) delta(st, "input_json_delta", "partial_json", args, out);
    }
}

void wire_anth_stream_chunk(wire_stream *st, const json_t *chunk, struct evbuffer *out) {
    if (!st || st->ended) return;
    if (!st->started) start(st, chunk, out);
    json_t *u = json_object_get(chunk, "usage");
    if (json_is_object(u)) {
        json_decref(st->usage);
        st->usage = wire_anth_usage(u);
    }
    json_t *ch = json_array_get(json_object_get(chunk, "choices"), 0);
    if (!ch) return;
    json_t *d = json_object_get(ch, "delta"), *v;
    if (json_string_length(v = json_object_get(d, "reasoning_content"))) {
        if (st->open != BLK_THINKING)
            open_block(st, BLK_THINKING, json_pack("{s:s,s:s,s:s}", "type", "thinking", "thinking", "", "signature", ""), out);
        delta(st, "thinking_delta", "thinking", v, out);
    }
    if (json_string_length(v = json_object_get(d, "content"))) {
        if (st->open != BLK_TEXT) open_block(st, BLK_TEXT, json_pack("{s:s,s:s}", "type", "text", "text", ""), out);
        delta(st, "text_delta", "text", v, out);
    }
    if (json_is_array(v = json_object_get(d, "tool_calls"))) tool_deltas(st, v, out);
    const char *fr = json_string_value(json_object_get(ch, "finish_reason"));
    if (fr) {
        const char *matched = json_string_value(json_object_get(ch, "stop_reason"));
        st->stop_reason = wire_anth_stop_reason(fr, matched);
        free(st->stop_sequence);
        st->stop_sequence = !strcmp(st->stop_reason, "stop_sequence") ? strdup(matched) : NULL;
        close_block(st, out);
    }
}

void wire_anth_stream_end(wire_stream *st, struct evbuffer *out) {
    if (!st || st->ended) return;
    if (!st->started) start(st, NULL, out);
    close_block(st, out);
    json_t *u = st->usage ? json_incref(st->usage) : wire_anth_usage(NULL);
    json_t *dl = json_pack("{s:s,s:o}", "stop_reason", st->stop_reason ? st->stop_reason : "end_turn", "stop_sequence",
                           st->stop_sequence ? json_string(st->stop_sequence) : json_null());
    emit(out, "message_delta", json_pack("{s:s,s:o,s:o}", "type", "message_delta", "delta", dl, "usage", u));
    emit(out, "message_stop", json_pack("{s:s}", "type", "message_stop"));
    st->ended = 1;
}

void wire_anth_stream_error(wire_stream *st, const oai_err *e, struct evbuffer *out) {
    if (st && st->ended) return;
    emit(out, "error", wire_anth_error_obj(e));
    if (st) st->ended = 1;
}

void wire_anth_stream_free(wire_stream *st) {
    if (!st) return;
    free(st->stop_sequence);
    json_decref(st->usage);
    free(st);
}
