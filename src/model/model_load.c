// Loading a model: the GGUF opened (file or memory), its hyper-parameters read, its weights bound (the hybrid
// layers' by model_hybrid.c), repacked for the CPU kernels.
#include <stdlib.h>

#include "model/model_internal.h"

// path names the file in messages; data/size: a GGUF image in memory instead of the file (data != NULL).
static int load(const char *path, const void *data, size_t size, model **out, tc_err *err) {
    *out = NULL;
    model *m = calloc(1, sizeof *m);
    if (!m) return tc_err_set(err, TC_ERR_NOMEM, "out of memory");
    int rc = data ? gguf_open_memory(data, size, &m->g, err) : gguf_open(path, &m->g, err);
    if (rc) goto fail;
    // model_read_hparams sets m->arch: the hybrid steps are decided after it
    if ((rc = model_read_hparams(m, err)) || (m->arch->hybrid && (rc = model_hybrid_read_hparams(m, err))) ||
        (rc = model_bind_weights(m, err)) || (m->arch->hybrid && (rc = model_hybrid_bind(m, err))) ||
        (rc = model_repack_weights(m, data == NULL, err))) {
        tc_err_wrap(err, "%s", path);
        goto fail;
    }
    *out = m;
    return 0;
fail:
    model_free(m);
    return rc;
}

int model_load(const char *path, model **out, tc_err *err) {
    return load(path, NULL, 0, out, err);
}

int model_load_memory(const void *data, size_t size, model **out, tc_err *err) {
    if (!data) return tc_err_set(err, TC_ERR_INVALID, "model: NULL buffer");
    return load("(memory)", data, size, out, err);
}
