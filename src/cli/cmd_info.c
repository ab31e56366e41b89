// tachyon info: architecture, shapes, tensor types, vocabulary, size.
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cpu/cpu.h"
#include "model/model.h"
#include "tensor/ttype.h"
#include "tokenizer/tokenizer.h"

// Bytes of the process in transparent huge pages (AnonHugePages of /proc/self/smaps_rollup; 0 where unknown):
// after a load, the moved weights' (model_placement), as far as the kernel granted them.
static unsigned long long info_huge_pages(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    unsigned long long kb = 0;
    char line[128];
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %llu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

// One line tests and benchmark scripts parse: the level in use, and every level this host can run
// ("cpu isa avx2 (host levels: scalar avx2; not on this host: avx512)"; on aarch64 the levels are scalar
// neon dotprod i8mm).
static void info_print_isa(void) {
    cpu_isa hw = cpu_hw_isa();
    printf("cpu isa         %s (host levels:", cpu_isa_name(cpu_best_isa()));
    for (int l = CPU_ISA_SCALAR; l <= (int)hw; l++) printf(" %s", cpu_isa_name((cpu_isa)l));
    if (hw < CPU_ISA_TOP) {
        printf("; not on this host:");
        for (int l = (int)hw + 1; l <= CPU_ISA_TOP; l++) printf(" %s", cpu_isa_name((cpu_isa)l));
    }
    printf(")\n");
}

// The English ordinal suffix of n: 1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st, ...
static const char *ordinal(int n) {
    if (n % 100 >= 11 && n % 100 <= 13) return "th";
    return n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
}

int cli_info(int argc, char **argv) {
    const char *path = NULL;
    int cpu_only = 0;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--cpu")) cpu_only = 1;
    }
    if (cpu_only) {
        info_print_isa();
        return 0;
    }
    if (!path) {
        fprintf(stderr, "usage: tachyon info -m MODEL | tachyon info --cpu\n");
        return 2;
    }
    tc_err err = {0};
    model *m = NULL;
    tok_vocab *v = NULL;
    if (model_load(path, &m, &err)) {
        fprintf(stderr, "info: %s\n", err.msg);
        return 1;
    }
    const model_hparams *hp = model_get_hparams(m);
    const gguf_ctx *g = model_gguf(m);
    printf("file            %s (GGUF v%u, %.1f MiB)\n", path, gguf_version(g), gguf_file_size(g) / 1048576.0);
    printf("architecture    %s%s%s\n", hp->arch, hp->name[0] ? "  name: " : "", hp->name);
    printf("parameters      %.1f M (%.1f MiB of weights, %.2f bits/weight)\n", hp->n_params / 1e6,
           hp->weight_bytes / 1048576.0, hp->weight_bytes * 8.0 / (double)hp->n_params);
    printf("dim %d, layers %d, heads %d, kv heads %d, head dim %d, ffn %d, vocab %d, ctx %d\n", hp->dim,
           hp->n_layers, hp->n_heads, hp->n_kv_heads, hp->head_dim, hp->ffn_dim, hp->n_vocab, hp->ctx_train);
    printf("rope            %s, dims %d, base %g, scale %g; norm eps %g; %s embeddings\n",
           hp->rope_neox ? "neox" : "normal", hp->rope_dim, hp->rope_base, hp->rope_scale, hp->norm_eps,
           hp->tied_embeddings ? "tied" : "separate output");
    if (hp->swa_window > 0 && hp->rope_base_swa > 0)
        printf("sliding window  %d positions on local layers (every %d%s layer global), local rope base %g\n",
               hp->swa_window, hp->swa_pattern, ordinal(hp->swa_pattern), hp->rope_base_swa);
    else if (hp->swa_window > 0)
        printf("sliding window  %d positions on local layers (every %d%s layer global), the global layers' rope\n",
               hp->swa_window, hp->swa_pattern, ordinal(hp->swa_pattern));
    if (hp->attn_sinks) printf("attention sinks one learned logit per query head in every softmax\n");
    if (hp->attn_softcap > 0 || hp->final_softcap > 0)
        printf("soft-capping    attention scores %g, logits %g (c·tanh(x/c); 0: none)\n", hp->attn_softcap,
               hp->final_softcap);
    if (hp->no_rope_step == 1) printf("no-rope layers  every layer attends without RoPE\n");
    else if (hp->no_rope_step > 0)
        printf("no-rope layers  every %d%s layer attends without RoPE\n", hp->no_rope_step,
               ordinal(hp->no_rope_step));
    if (!strncmp(hp->arch, "granite", 7))
        printf("multipliers     embeddings %g, attention scores %g, residual %g, logits 1/%g\n",
               hp->embd_scale, hp->attn_scale, hp->residual_scale > 0 ? hp->residual_scale : 1.0f,
               hp->logit_scale > 0 ? hp->logit_scale : 1.0f);
    if (hp->yarn_factor > 0)
        printf("yarn            factor %g over original context %d, beta fast %g slow %g, cos/sin times %g\n",
               hp->yarn_factor, hp->rope_orig_ctx, hp->yarn_beta_fast, hp->yarn_beta_slow, hp->rope_mscale);
    if (hp->attn_temp_scale > 0)
        printf("attn temperature 1 + %g·ln(1 + floor(pos / %d)) on queries\n", hp->attn_temp_scale, hp->rope_orig_ctx);
    if (gguf_find_tensor(g, "rope_factors_long.weight"))
        printf("longrope        %s frequency factors, attention factor %g\n", hp->rope_long ? "long" : "short",
               hp->rope_mscale);
    if (hp->n_expert > 0) {
        printf("experts         %d used of %d per layer, expert ffn %d", hp->n_expert_used, hp->n_expert,
               hp->expert_ffn_dim);
        if (hp->shexp_ffn_dim) printf(", shared expert ffn %d", hp->shexp_ffn_dim);
        printf("; top-k weights %s\n", hp->moe_norm_w ? "renormalised" : "as the softmax gives them");
        if (hp->swiglu_limit > 0)
            printf("expert swiglu   clamped at %g, alpha %g: min(g, c)·σ(alpha·min(g, c))·(clamp(u, ±c) + 1)\n",
                   hp->swiglu_limit, hp->swiglu_alpha);
    }
    if (hp->ssm_state > 0) {
        int n_rec = 0;
        for (int l = 0; l < hp->n_layers; l++) n_rec += model_layer_is_recurrent(hp, l);
        printf("gated deltanet  %d of %d layers (every %d%s layer full attention with a sigmoid output gate); "
               "%d key and %d value heads of %d, conv %d\n", n_rec, hp->n_layers, hp->full_attn_interval,
               hp->full_attn_interval == 2 ? "nd" : hp->full_attn_interval == 3 ? "rd" : "th", hp->ssm_groups,
               hp->ssm_vheads, hp->ssm_state, hp->ssm_conv);
        printf("recurrent state %.1f KiB per sequence\n", (double)model_rs_slot_floats(hp) * sizeof(float) / 1024.0);
    }
    int count[TT_COUNT] = {0};
    uint64_t bytes[TT_COUNT] = {0};
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        if (t->type < TT_COUNT) count[t->type]++, bytes[t->type] += t->size;
    }
    info_print_isa();
    printf("tensor types   ");
    for (int t = 0; t < TT_COUNT; t++)
        if (count[t]) printf(" %s x%d (%.1f MiB)", tt_name((uint32_t)t), count[t], bytes[t] / 1048576.0);
    printf("\n");
    uint64_t repacked, copied;
    model_placement(m, &repacked, &copied);
    printf("weights moved   %.1f MiB repacked, %.1f MiB copied; %.1f MiB of the process in huge pages\n",
           repacked / 1048576.0, copied / 1048576.0, info_huge_pages() / 1048576.0);
    if (tok_load(g, &v, &err) == 0) {
        printf("vocabulary      %s, %d tokens, bos %d, eos %d, add_bos %d\n",
               tok_get_kind(v) == TOK_KIND_SPM ? "SentencePiece (llama)" : "byte-level BPE (gpt2)", tok_n_vocab(v),
               tok_bos(v), tok_eos(v), tok_add_bos(v));
        tok_free(v);
    } else {
        printf("vocabulary      not loaded: %s\n", err.msg);
    }
    model_free(m);
    return 0;
}
