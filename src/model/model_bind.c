// Binding a model's weights: a GGUF tensor by name, its type and shape checked (model_internal.h).
#include <string.h>

#include "model/model_internal.h"
#include "tensor/ttype.h"

int model_bind(model *m, model_weight *w, const char *name, int64_t rows, int64_t cols, int64_t depth,
               int vector, int required, tc_err *err) {
    memset(w, 0, sizeof *w);
    const gguf_tensor *t = gguf_find_tensor(m->g, name);
    if (!t) return required ? tc_err_set(err, TC_ERR_FORMAT, "missing tensor '%s'", name) : 0;
    const tt_traits *tr = tt_get(t->type);
    if (!tr || !tr->to_float)
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "tensor '%s' has unsupported type %s", name,
                          tt_name(t->type));
    if (vector && t->type != TT_F32)
        return tc_err_set(err, TC_ERR_UNSUPPORTED, "tensor '%s' must be F32, is %s", name, tt_name(t->type));
    int64_t trows = t->n_dims >= 2 ? t->ne[1] : 1;
    if (t->ne[0] != cols || trows != rows || t->ne[2] != depth || t->ne[3] != 1)
        return tc_err_set(err, TC_ERR_FORMAT,
                          "tensor '%s' has shape [%lld, %lld, %lld], expected [%lld, %lld, %lld]", name,
                          (long long)t->ne[0], (long long)trows, (long long)t->ne[2], (long long)cols,
                          (long long)rows, (long long)depth);
    w->type = t->type;
    w->data = t->data;
    w->rows = rows;
    w->cols = cols;
    w->n_expert = depth;
    return 0;
}

int model_bind_tensor(model *m, model_weight *w, const char *name, int64_t rows, int64_t cols, int vector,
                      int required, tc_err *err) {
    return model_bind(m, w, name, rows, cols, 1, vector, required, err);
}
