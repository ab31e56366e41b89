// llama-server's and vLLM's request fields for sampling and stopping (oai_samp.c): parsed into oai_req's
// samp_params and oai_samp_ext after the OpenAI fields.
#ifndef TACHYON_SERVER_OAI_SAMP_H
#define TACHYON_SERVER_OAI_SAMP_H

struct oai_req;
struct oai_err;

// The sampler fields and aliases (n_predict, repeat_penalty, repeat_last_n, n_probs, typical_p, mirostat*,
// dry_*, xtc_*, top_n_sigma, dynatemp_*, stop_token_ids, include_stop_str_in_output, skip_special_tokens,
// min_tokens). Runs after the OpenAI sampling and logprobs fields. 0, or -1 with *e (400 naming the field).
int oai_samp_parse(struct oai_req *r, struct oai_err *e);
// vLLM's guided decoding (guided_json, guided_choice, guided_grammar, guided_regex, structured_outputs) onto
// the grammar engine; runs after response_format / grammar / tools (oai_ext_parse). 0, or -1 with *e.
int oai_samp_guided(struct oai_req *r, struct oai_err *e);

#endif
