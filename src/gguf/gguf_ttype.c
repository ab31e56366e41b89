// Block geometry of tensor types for validating tensor infos. Kept private to the reader until the
// shared traits table (tensor/ttype.c) is on main; the sizes are the ggml ones and match tensor/ttype.h.
#include "gguf/gguf_internal.h"
#include "tensor/ttype.h"

int gguf_ttype_info(uint32_t type, int64_t *block_size, uint64_t *type_size) {
    int64_t bs;
    uint64_t ts;
    switch (type) {
    case TT_F32: bs = 1, ts = 4; break;
    case TT_F16: bs = 1, ts = 2; break;
    case TT_BF16: bs = 1, ts = 2; break;
    case TT_Q4_0: bs = QK4_0, ts = sizeof(tt_block_q4_0); break;
    case TT_Q4_1: bs = QK4_1, ts = sizeof(tt_block_q4_1); break;
    case TT_Q5_0: bs = QK5_0, ts = sizeof(tt_block_q5_0); break;
    case TT_Q5_1: bs = QK5_1, ts = sizeof(tt_block_q5_1); break;
    case TT_Q8_0: bs = QK8_0, ts = sizeof(tt_block_q8_0); break;
    case TT_Q8_1: bs = QK8_1, ts = sizeof(tt_block_q8_1); break;
    case TT_Q2_K: bs = QK_K, ts = 2 * 2 + QK_K / 16 + QK_K / 4; break;              // 84
    case TT_Q3_K: bs = QK_K, ts = 2 + QK_K / 4 + QK_K / 8 + K_SCALE_SIZE; break;    // 110
    case TT_Q4_K: bs = QK_K, ts = sizeof(tt_block_q4_K); break;
    case TT_Q5_K: bs = QK_K, ts = sizeof(tt_block_q5_K); break;
    case TT_Q6_K: bs = QK_K, ts = sizeof(tt_block_q6_K); break;
    case TT_Q8_K: bs = QK_K, ts = sizeof(tt_block_q8_K); break;
    default: return 0;
    }
    *block_size = bs;
    *type_size = ts;
    return 1;
}
