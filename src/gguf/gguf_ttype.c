// Block geometry of tensor types for validating tensor infos: the shared traits table (tensor/ttype.c), plus
// the file geometry of ggml types that table does not compute with, so that such files still open (`tachyon
// info` can list them; the model loader rejects what it cannot run). Every type of the table has a row, so
// the switch holds no type today; it is where a type that tachyon reads but cannot decode would go.
#include "gguf/gguf_internal.h"
#include "tensor/ttype.h"

int gguf_ttype_info(uint32_t type, int64_t *block_size, uint64_t *type_size) {
    const tt_traits *t = tt_get(type);
    if (t) {
        *block_size = t->block_size;
        *type_size = t->type_size;
        return 1;
    }
    switch (type) {
    case TT_Q2_K: *block_size = QK_K, *type_size = 2 * 2 + QK_K / 16 + QK_K / 4; return 1;           // 84
    case TT_Q3_K: *block_size = QK_K, *type_size = 2 + QK_K / 4 + QK_K / 8 + K_SCALE_SIZE; return 1; // 110
    default: return 0;
    }
}
