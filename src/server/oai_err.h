// A leaf that every request parser and handler fills: oai_err_set never fails and calls nothing of the server.
#ifndef TACHYON_SERVER_OAI_ERR_H
#define TACHYON_SERVER_OAI_ERR_H

// An error as OpenAI returns it: HTTP status + {"error": {"message", "type", "param", "code"}}.
typedef struct oai_err {
    int status;       // HTTP status
    const char *type; // "invalid_request_error", "authentication_error", "server_error" … (static string)
    const char *code; // NULL → null; e.g. "model_not_found", "context_length_exceeded" (static string)
    char param[64];   // "" → null
    char msg[480];
    double retry_after; // 503 only: seconds for the Retry-After header (0 = 1 s); oai_err_set clears it
} oai_err;

int oai_err_set(oai_err *e, int status, const char *type, const char *code, const char *param, const char *fmt,
                ...) __attribute__((format(printf, 6, 7))); // returns -1
char *oai_err_json(const oai_err *e); // malloc'd compact JSON, owned by the caller; NULL on OOM

#endif
