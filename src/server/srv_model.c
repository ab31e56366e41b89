// One served model's record (see srv_internal.h).
#include <string.h>

#include "server/srv_internal.h"

int srv_model_ok(const server *s, const char *name) {
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
