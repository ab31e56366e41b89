// One served model's record (see srv_model.h).
#include <stdlib.h>
#include <string.h>

#include "server/srv_config.h"
#include "server/srv_model.h"

int srv_model_ok(const srv_model *s, const char *name) {
    if (!name || !name[0]) return 1;
    if (srv_config_router(s->o.cfg, name)) return 1; // srv_route_pick chose this model for the alias
    // the served name or the file's basename (with or without .gguf); never a path: the model's location
    // on disk is not the client's business
    if (!strcmp(name, s->name) || !strcmp(name, s->basename)) return 1;
    size_t n = strlen(s->basename);
    if (n > 5 && !strcmp(s->basename + n - 5, ".gguf") && strlen(name) == n - 5 && !strncmp(name, s->basename, n - 5))
        return 1;
    return 0;
}

int srv_model_serves(const srv_model *s, const char *name) { return s->o.any_model || srv_model_ok(s, name); }

void srv_model_free(srv_model *s) {
    if (!s) return;
    if (s->ev_engine) event_free(s->ev_engine);
    if (s->eng) engine_free(s->eng, 0.5);
    if (s->vocab) tok_free(s->vocab);
    gram_vocab_free(s->gvocab);
    if (s->m) model_free(s->m);
    if (s->draft_m) model_free(s->draft_m);
    free(s->eog_ids);
    free(s->chat_src);
    chat_tmpl_free(s->tmpl);
    srv_metrics_free(&s->mt); // the registry is freed with the first model's, after the others'
    free(s);
}
