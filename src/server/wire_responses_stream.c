// The OpenAI Responses API's event stream, from the chat path's chat.completion.chunk objects in order:
// response.created and response.in_progress with the first chunk; then per output item
// response.output_item.added, its content part (response.content_part.added, response.output_text.delta or
// response.reasoning_text.delta …, .done, response.content_part.done) or its arguments
// (response.function_call_arguments.delta/.done), response.output_item.done; response.completed (or
// response.incomplete when max_output_tokens cut it) with the whole Response at the end; an error that ends
// the stream as `error` then response.failed. Every event carries a sequence_number and goes out as
// "event: NAME\ndata: JSON\n\n".
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/wire_responses_impl.h"

enum { OPEN_NONE, OPEN_MSG, OPEN_RS };

struct wire_stream {
    json_t *in;     // the request (a reference: its echoed fields go into every Response snapshot)
    long seq;       // the next sequence_number
    int started;    // response.created sent
    int finished;   // the chat finish_reason arrived: every item is closed
    int done;       // response.completed / .incomplete / .failed sent: nothing more goes out
    int cut;        // finish_reason "length": status incomplete
    char chat_id[96];
    char id[112];   // resp_…
    long created;   // seconds since the epoch
    char model[128];
    json_t *output; // the items by output_index (null while an item is open)
    int open;       // the open text item: OPEN_NONE, OPEN_MSG or OPEN_RS
    int open_index; // its output_index
    char open_id[112];
    char *text;     // its text so far (malloc'd, text_len bytes + NUL)
    size_t text_len;
    int had_msg;    // a message item was added
    json_t *calls;  // the function-call items in progress, by the chat's tool-call index: {item, index}
    json_t *usage;  // the Responses usage (null until the usage chunk)
};

// --- output ------------------------------------------------------------------------------------------------

// Sends ev (stolen) as the event `type` with the next sequence_number.
static void emit(wire_stream *st, const char *type, json_t *ev, struct evbuffer *out) {
    json_t *o = json_pack("{s:s,s:I}", "type", type, "sequence_number", (json_int_t)st->seq++);
    json_object_update(o, ev);
    json_decref(ev);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!s) return;
    evbuffer_add_printf(out, "event: %s\ndata: %s\n\n", type, s);
    free(s);
}

// The Response as it stands (status as given; the closed items; the usage when known).
static json_t *snapshot(wire_stream *st, const char *status) {
    json_t *r = wresp_base(st->in, st->id, st->created, st->model, status), *out = json_object_get(r, "output"), *it;
    size_t k;
    json_array_foreach(st->output, k, it) if (!json_is_null(it)) json_array_append(out, it);
    if (strcmp(status, "in_progress")) json_object_set(r, "usage", st->usage);
    return r;
}

static void start(wire_stream *st, const json_t *chunk, struct evbuffer *out) {
    const char *cid = json_string_value(json_object_get(chunk, "id")), *m = json_string_value(json_object_get(chunk, "model"));
    static unsigned long n_anon; // ids of streams that fail before their first chunk
    char anon[40];
    if (!cid) snprintf(anon, sizeof anon, "chatcmpl-failed%lu", ++n_anon), cid = anon;
    snprintf(st->chat_id, sizeof st->chat_id, "%s", cid);
    wresp_id(st->id, sizeof st->id, "resp", cid, -1);
    snprintf(st->model, sizeof st->model, "%s", m ? m : "");
    st->created = (long)json_integer_value(json_object_get(chunk, "created"));
    st->started = 1;
    emit(st, "response.created", json_pack("{s:o}", "response", snapshot(st, "in_progress")), out);
    emit(st, "response.in_progress", json_pack("{s:o}", "response", snapshot(st, "in_progress")), out);
}

// --- text items (message, reasoning) -------------------------------------------------------------------------

static void close_text(wire_stream *st, const char *status, struct evbuffer *out) {
    if (st->open == OPEN_NONE) return;
    int msg = st->open == OPEN_MSG;
    const char *t = st->text ? st->text : "";
    json_t *part = msg ? json_pack("{s:s,s:s,s:[]}", "type", "output_text", "text", t, "annotations")
                       : json_pack("{s:s,s:s}", "type", "reasoning_text", "text", t);
    json_t *where = json_pack("{s:s,s:i,s:i}", "item_id", st->open_id, "output_index", st->open_index,
                              "content_index", 0);
    json_t *done = json_deep_copy(where);
    json_object_set_new(done, "text", json_string(t));
    if (msg) json_object_set_new(done, "logprobs", json_array());
    emit(st, msg ? "response.output_text.done" : "response.reasoning_text.done", done, out);
    json_object_set_new(where, "part", part);
    emit(st, "response.content_part.done", where, out);
    json_t *item = msg ? wresp_msg_item(st->open_id, t, status) : wresp_rs_item(st->open_id, t, status);
    json_array_set(st->output, (size_t)st->open_index, item);
    emit(st, "response.output_item.done", json_pack("{s:i,s:o}", "output_index", st->open_index, "item", item), out);
    st->open = OPEN_NONE;
    free(st->text);
    st->text = NULL, st->text_len = 0;
}

static void open_text(wire_stream *st, int kind, struct evbuffer *out) {
    close_text(st, "completed", out);
    st->open = kind;
    st->open_index = (int)json_array_size(st->output);
    json_array_append_new(st->output, json_null());
    int msg = kind == OPEN_MSG;
    wresp_id(st->open_id, sizeof st->open_id, msg ? "msg" : "rs", st->chat_id, -1);
    if (msg) st->had_msg = 1;
    json_t *item = msg ? wresp_msg_item(st->open_id, NULL, "in_progress") : wresp_rs_item(st->open_id, NULL, "in_progress");
    emit(st, "response.output_item.added", json_pack("{s:i,s:o}", "output_index", st->open_index, "item", item), out);
    json_t *part = msg ? json_pack("{s:s,s:s,s:[]}", "type", "output_text", "text", "", "annotations")
                       : json_pack("{s:s,s:s}", "type", "reasoning_text", "text", "");
    emit(st, "response.content_part.added",
         json_pack("{s:s,s:i,s:i,s:o}", "item_id", st->open_id, "output_index", st->open_index, "content_index", 0,
                   "part", part),
         out);
}

static void text_delta(wire_stream *st, int kind, const json_t *d, struct evbuffer *out) {
    size_t n = json_string_length(d);
    if (!n) return;
    if (st->open != kind) open_text(st, kind, out);
    char *t = realloc(st->text, st->text_len + n + 1);
    if (!t) return;
    memcpy(t + st->text_len, json_string_value(d), n);
    st->text = t, st->text_len += n;
    t[st->text_len] = 0;
    json_t *ev = json_pack("{s:s,s:i,s:i,s:O}", "item_id", st->open_id, "output_index", st->open_index,
                           "content_index", 0, "delta", d);
    if (kind == OPEN_MSG) json_object_set_new(ev, "logprobs", json_array());
    emit(st, kind == OPEN_MSG ? "response.output_text.delta" : "response.reasoning_text.delta", ev, out);
}

// --- function calls ------------------------------------------------------------------------------------------

// One delta.tool_calls entry: a new index opens a function_call item; arguments arrive as deltas.
static void call_delta(wire_stream *st, const json_t *tc, struct evbuffer *out) {
    json_int_t k = json_integer_value(json_object_get(tc, "index"));
    json_t *fn = json_object_get(tc, "function"), *args = json_object_get(fn, "arguments");
    if (k < 0 || k > (json_int_t)json_array_size(st->calls)) return; // indexes arrive in order
    if (k == (json_int_t)json_array_size(st->calls)) {
        close_text(st, "completed", out);
        char id[112];
        wresp_id(id, sizeof id, "fc", st->chat_id, (int)k);
        const char *call_id = json_string_value(json_object_get(tc, "id")), *name = json_string_value(json_object_get(fn, "name"));
        json_t *item = wresp_fc_item(id, call_id ? call_id : id, name ? name : "", "", "in_progress");
        int oi = (int)json_array_size(st->output);
        json_array_append_new(st->output, json_null());
        json_array_append_new(st->calls, json_pack("{s:O,s:i}", "item", item, "index", oi));
        emit(st, "response.output_item.added", json_pack("{s:i,s:o}", "output_index", oi, "item", item), out);
    }
    json_t *c = json_array_get(st->calls, (size_t)k), *item = json_object_get(c, "item");
    if (!json_string_length(args)) return;
    const char *old = json_string_value(json_object_get(item, "arguments"));
    size_t n0 = strlen(old), n = json_string_length(args);
    char *a = malloc(n0 + n + 1);
    if (!a) return;
    memcpy(a, old, n0), memcpy(a + n0, json_string_value(args), n), a[n0 + n] = 0;
    json_object_set_new(item, "arguments", json_string(a));
    free(a);
    emit(st, "response.function_call_arguments.delta",
         json_pack("{s:O,s:O,s:O}", "item_id", json_object_get(item, "id"), "output_index", json_object_get(c, "index"),
                   "delta", args),
         out);
}

static void close_calls(wire_stream *st, struct evbuffer *out) {
    size_t k;
    json_t *c;
    json_array_foreach(st->calls, k, c) {
        json_t *item = json_object_get(c, "item"), *oi = json_object_get(c, "index");
        emit(st, "response.function_call_arguments.done",
             json_pack("{s:O,s:O,s:O,s:O}", "item_id", json_object_get(item, "id"), "output_index", oi, "name",
                       json_object_get(item, "name"), "arguments", json_object_get(item, "arguments")),
             out);
        json_object_set_new(item, "status", json_string("completed"));
        json_array_set(st->output, (size_t)json_integer_value(oi), item);
        emit(st, "response.output_item.done", json_pack("{s:O,s:O}", "output_index", oi, "item", item), out);
    }
    json_array_clear(st->calls);
}

// The choice ended: every item closes; a reply with neither text nor calls is an empty message.
static void finish(wire_stream *st, struct evbuffer *out) {
    const char *status = st->cut ? "incomplete" : "completed";
    if (!st->had_msg && !json_array_size(st->calls)) open_text(st, OPEN_MSG, out);
    close_text(st, status, out);
    close_calls(st, out);
    st->finished = 1;
}

// --- the wire_ops slots ----------------------------------------------------------------------------------------

wire_stream *wresp_stream_new(const json_t *in) {
    wire_stream *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->in = json_incref((json_t *)in);
    st->output = json_array();
    st->calls = json_array();
    st->usage = json_null();
    return st;
}

void wresp_stream_chunk(wire_stream *st, const json_t *chunk, struct evbuffer *out) {
    if (!st || st->done) return;
    if (!st->started) start(st, chunk, out);
    json_t *u = json_object_get(chunk, "usage");
    if (json_is_object(u)) json_decref(st->usage), st->usage = wresp_usage(u);
    json_t *ch = json_array_get(json_object_get(chunk, "choices"), 0);
    if (!ch || st->finished) return;
    json_t *d = json_object_get(ch, "delta"), *v, *tc;
    if (json_is_string(v = json_object_get(d, "reasoning_content"))) text_delta(st, OPEN_RS, v, out);
    if (json_is_string(v = json_object_get(d, "content"))) text_delta(st, OPEN_MSG, v, out);
    size_t k;
    json_array_foreach(json_object_get(d, "tool_calls"), k, tc) call_delta(st, tc, out);
    const char *fr = json_string_value(json_object_get(ch, "finish_reason"));
    if (fr) {
        st->cut = !strcmp(fr, "length");
        finish(st, out);
    }
}

void wresp_stream_end(wire_stream *st, struct evbuffer *out) {
    if (!st || st->done) return;
    if (!st->started) start(st, NULL, out);
    if (!st->finished) finish(st, out);
    json_t *r = snapshot(st, "completed");
    wresp_set_status(r, st->cut);
    emit(st, st->cut ? "response.incomplete" : "response.completed", json_pack("{s:o}", "response", r), out);
    st->done = 1;
}

void wresp_stream_error(wire_stream *st, const oai_err *e, struct evbuffer *out) {
    if (!st || st->done) return;
    if (!st->started) start(st, NULL, out);
    emit(st, "error",
         json_pack("{s:s?,s:s,s:s?}", "code", e->code ? e->code : e->type, "message", e->msg, "param",
                   e->param[0] ? e->param : NULL),
         out);
    json_t *r = snapshot(st, "failed");
    json_object_set_new(r, "error", json_pack("{s:s,s:s}", "code", e->status == 429 ? "rate_limit_exceeded" : "server_error",
                                              "message", e->msg));
    emit(st, "response.failed", json_pack("{s:o}", "response", r), out);
    st->done = 1;
}

void wresp_stream_free(wire_stream *st) {
    if (!st) return;
    json_decref(st->in);
    json_decref(st->output);
    json_decref(st->calls);
    json_decref(st->usage);
    free(st->text);
    free(st);
}
