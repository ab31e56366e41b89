// tachyon chat: an interactive multi-turn chat in the terminal. Each turn renders the whole conversation with
// the model's chat template (or --chat-template / --chat-template-file) and generates through the one engine,
// whose prefix cache keeps the earlier turns' KV, so a turn prefills only what is new. The answer streams as
// it is generated; TTFT and tokens/s follow it on stderr. Ctrl-C stops the current answer (the part written so
// far stays in the history), not the program; Ctrl-D or /exit ends it.
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_engine.h"
#include "common/timeutil.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

#define CHAT_MAX_TURNS 4096 // messages kept; the oldest user/assistant pair goes first past it

static void chat_usage(void) {
    fprintf(stderr, "usage: tachyon chat -m MODEL [--system TEXT] [-n N] [-c CTX] [-t THREADS] [--temp T]\n"
                    "                    [--top-p P] [--top-k K] [--min-p M] [--seed S]\n"
                    "                    [--chat-template NAME | --chat-template-file F]\n"
                    "  type a message and press Enter; commands: /clear (forget the conversation), /system TEXT\n"
                    "  (set the system message and clear), /exit; Ctrl-C stops the current answer, Ctrl-D exits\n");
}

typedef struct chatcli_opts {
    const char *model, *system, *chat_template, *chat_template_file;
    int n_predict, threads, ctx;
    samp_params sp;
} chatcli_opts;

static int parse(int argc, char **argv, chatcli_opts *o) {
    static const struct option lo[] = {
        {"model", 1, 0, 'm'}, {"n-predict", 1, 0, 'n'}, {"threads", 1, 0, 't'}, {"ctx-size", 1, 0, 'c'},
        {"temp", 1, 0, 1}, {"top-p", 1, 0, 2}, {"top-k", 1, 0, 3}, {"min-p", 1, 0, 4}, {"seed", 1, 0, 5},
        {"system", 1, 0, 6}, {"chat-template", 1, 0, 7}, {"chat-template-file", 1, 0, 8}, {"help", 0, 0, 'h'},
        {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->n_predict = 1024;
    o->threads = 2;
    samp_params_default(&o->sp);
    o->sp.no_logprob = 1;
    o->sp.temperature = 0.7f;
    o->sp.seed = (uint64_t)(tc_now() * 1e6);
    int c, bad = 0;
    double v = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:n:t:c:h", lo, NULL)) != -1) {
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'n': bad = cli_num("chat", "-n/--n-predict", optarg, 1, 1 << 24, &v), o->n_predict = (int)v; break;
        case 't': bad = cli_num("chat", "-t/--threads", optarg, 1, 256, &v), o->threads = (int)v; break;
        case 'c': bad = cli_num("chat", "-c/--ctx-size", optarg, 16, 1 << 24, &v), o->ctx = (int)v; break;
        case 1: bad = cli_num("chat", "--temp", optarg, 0, 100, &v), o->sp.temperature = (float)v; break;
        case 2: bad = cli_num("chat", "--top-p", optarg, 0, 1, &v), o->sp.top_p = (float)v; break;
        case 3: bad = cli_num("chat", "--top-k", optarg, 0, 1e9, &v), o->sp.top_k = (int)v; break;
        case 4: bad = cli_num("chat", "--min-p", optarg, 0, 1, &v), o->sp.min_p = (float)v; break;
        case 5: bad = cli_num("chat", "--seed", optarg, 0, 9007199254740992.0, &v), o->sp.seed = (uint64_t)v; break;
        case 6: o->system = optarg; break;
        case 7: o->chat_template = optarg; break;
        case 8: o->chat_template_file = optarg; break;
        default: chat_usage(); return -1;
        }
        if (bad) return -1;
    }
    if (!o->model || optind < argc) {
        chat_usage();
        return -1;
    }
    return 0;
}

// The conversation: messages with owned contents.
typedef struct chat_hist {
    chat_msg m[CHAT_MAX_TURNS];
    int n;
} chat_hist;

static void hist_clear(chat_hist *h, int keep_system) {
    int from = keep_system && h->n && !strcmp(h->m[0].role, "system") ? 1 : 0;
    for (int i = from; i < h->n; i++) free((char *)h->m[i].content);
    h->n = from;
}

static int hist_add(chat_hist *h, const char *role, const char *text, size_t len) {
    int first = h->n && !strcmp(h->m[0].role, "system") ? 1 : 0;
    while (h->n + 1 > CHAT_MAX_TURNS && h->n - first >= 2) { // the oldest exchange makes room
        free((char *)h->m[first].content), free((char *)h->m[first + 1].content);
        memmove(&h->m[first], &h->m[first + 2], (size_t)(h->n - first - 2) * sizeof h->m[0]);
        h->n -= 2;
    }
    char *c = strndup(text, len);
    if (!c || h->n >= CHAT_MAX_TURNS) {
        free(c);
        return -1;
    }
    h->m[h->n].role = role, h->m[h->n].content = c;
    h->n++;
    return 0;
}

static volatile sig_atomic_t stop_answer;
static void on_sigint(int sig) {
    (void)sig;
    stop_answer = 1;
}

// The answer as it streams: printed, and kept for the history.
typedef struct chat_out {
    tok_stream *ts;
    char *text;
    size_t len, cap;
} chat_out;

static void out_put(chat_out *o, const char *p, int n) {
    if (n <= 0) return;
    fwrite(p, 1, (size_t)n, stdout);
    fflush(stdout);
    if (o->len + (size_t)n + 1 > o->cap) {
        size_t cap = (o->cap ? o->cap * 2 : 1024) + (size_t)n;
        char *t = realloc(o->text, cap);
        if (!t) return; // the history keeps what fitted
        o->text = t, o->cap = cap;
    }
    memcpy(o->text + o->len, p, (size_t)n);
    o->len += (size_t)n;
    o->text[o->len] = 0;
}

static void on_token(void *ctx, const samp_result *tok) {
    chat_out *o = ctx;
    char piece[256];
    int n = tok_stream_push(o->ts, tok->token, piece, sizeof piece);
    if (n <= (int)sizeof piece) out_put(o, piece, n);
}

typedef struct chat_ctx {
    const chatcli_opts *o;
    model *m;
    tok_vocab *v;
    engine *eng;
    int ctx;
} chat_ctx;

// One turn: the conversation (ending with the user's message) → the answer, streamed and added to h.
static int answer(chat_ctx *cc, chat_hist *h, tc_err *err) {
    int32_t *ids = NULL;
    int n_ids = 0;
    if (cli_encode_chat_msgs(cc->m, cc->v, cc->o->chat_template, cc->o->chat_template_file, h->m, h->n, &ids, &n_ids,
                             err))
        return -1;
    if (n_ids + 1 > cc->ctx) {
        free(ids);
        return tc_err_set(err, TC_ERR_INVALID, "the conversation (%d tokens) fills the context of %d tokens: /clear "
                          "to start over, or restart with a larger -c", n_ids, cc->ctx);
    }
    int max = cc->ctx - n_ids < cc->o->n_predict ? cc->ctx - n_ids : cc->o->n_predict;
    chat_out out = {tok_stream_new(cc->v, 0), NULL, 0, 0};
    if (!out.ts) {
        free(ids);
        return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    }
    engine_req q = {.prompt = ids, .n_prompt = n_ids, .max_tokens = max, .sp = cc->o->sp};
    engine_event fin;
    stop_answer = 0;
    int rc = cli_engine_generate_until(cc->eng, &q, on_token, &out, &stop_answer, &fin, err);
    free(q.prompt); // NULL when the engine took it
    char piece[256];
    int n = tok_stream_flush(out.ts, piece, sizeof piece);
    if (n <= (int)sizeof piece) out_put(&out, piece, n);
    tok_stream_free(out.ts);
    printf("\n");
    if (rc == 0) {
        if (hist_add(h, "assistant", out.text ? out.text : "", out.len)) rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        double ttft = fin.t_first_token - fin.t_arrival, dec = fin.t_finish - fin.t_first_token;
        fprintf(stderr, "[%s%d prompt tokens (%d cached), TTFT %.0f ms | %d tokens, %.1f tokens/s]\n",
                fin.finish == ENGINE_FINISH_CANCELLED ? "stopped | " : fin.finish == ENGINE_FINISH_LENGTH ? "length | " : "",
                fin.n_prompt, fin.n_cached, ttft > 0 ? ttft * 1e3 : 0.0, fin.n_generated,
                fin.n_generated > 1 && dec > 0 ? (fin.n_generated - 1) / dec : 0.0);
    }
    free(out.text);
    return rc;
}

// A line typed by the user: a command, or a message to answer. 1 to exit.
static int on_line(chat_ctx *cc, chat_hist *h, char *line) {
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    if (!n) return 0;
    if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) return 1;
    if (!strcmp(line, "/clear")) {
        hist_clear(h, 1);
        fprintf(stderr, "[conversation cleared]\n");
        return 0;
    }
    if (!strncmp(line, "/system", 7) && (line[7] == ' ' || !line[7])) {
        const char *t = line[7] ? line + 8 : "";
        hist_clear(h, 0);
        if (*t && hist_add(h, "system", t, strlen(t))) fprintf(stderr, "chat: out of memory\n");
        fprintf(stderr, "[system message %s; conversation cleared]\n", *t ? "set" : "removed");
        return 0;
    }
    if (line[0] == '/' && line[1] != '/') {
        fprintf(stderr, "[unknown command %s: /clear, /system TEXT, /exit; start with // to send a '/']\n", line);
        return 0;
    }
    const char *msg = line[0] == '/' ? line + 1 : line;
    if (hist_add(h, "user", msg, strlen(msg))) {
        fprintf(stderr, "chat: out of memory\n");
        return 0;
    }
    tc_err err = {0};
    if (answer(cc, h, &err)) {
        fprintf(stderr, "chat: %s\n", err.msg[0] ? err.msg : "failed");
        free((char *)h->m[--h->n].content); // the unanswered message leaves the history
    }
    return 0;
}

int cli_chat(int argc, char **argv) {
    chatcli_opts o;
    if (parse(argc, argv, &o)) return 2;
    tc_err err = {0};
    chat_ctx cc = {.o = &o};
    static chat_hist h;
    int status = 1;
    if (model_load(o.model, &cc.m, &err) || tok_load(model_gguf(cc.m), &cc.v, &err)) goto fail;
    int train = model_get_hparams(cc.m)->ctx_train;
    cc.ctx = o.ctx ? o.ctx : train < 4096 ? train : 4096;
    if (cc.ctx > train) cc.ctx = train;
    engine_opts eo;
    cli_engine_opts(&eo, cc.ctx, 512, o.threads);
    eo.prefix_cache = 1; // earlier turns are a prefix of the next prompt
    if (cli_engine_new(cc.m, cc.v, &eo, &cc.eng, &err)) goto fail;
    if (o.system && hist_add(&h, "system", o.system, strlen(o.system))) goto fail;
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint; // no SA_RESTART: a read in progress returns, the line is dropped
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    fprintf(stderr, "tachyon chat: %s, context %d tokens. /clear, /system TEXT, /exit; Ctrl-C stops an answer.\n",
            o.model, cc.ctx);
    char *line = NULL;
    size_t cap = 0;
    for (;;) {
        fputs("> ", stdout);
        fflush(stdout);
        stop_answer = 0;
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) {
            if (stop_answer && !feof(stdin)) { // Ctrl-C at the prompt: a fresh prompt
                clearerr(stdin);
                printf("\n");
                continue;
            }
            printf("\n");
            break;
        }
        if (on_line(&cc, &h, line)) break;
    }
    free(line);
    status = 0;
    goto done;
fail:
    fprintf(stderr, "chat: %s\n", err.msg[0] ? err.msg : "failed");
done:
    hist_clear(&h, 0);
    engine_free(cc.eng, 0);
    tok_free(cc.v);
    model_free(cc.m);
    return status;
}
