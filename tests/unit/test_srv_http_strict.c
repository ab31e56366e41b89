// Strict request framing (server/srv_http_strict.c): where a request head ends, and which heads are refused
// (two Content-Length or Host headers, a non-numeric length, Transfer-Encoding with Content-Length, HTTP/1.1
// without Host, a NUL byte) while ordinary ones pass.
#include "server/srv_http_strict.h"
#include "test_util.h"

static int check(const char *head, size_t n) {
    srv_http_head h;
    char why[96] = "";
    return srv_http_head_check(head, n, &h, why, sizeof why);
}

static void test_end(void) {
    const char *a = "GET / HTTP/1.1\r\nHost: a\r\n\r\nBODY";
    CHECK_EQ_INT(srv_http_head_end(a, strlen(a), 0), (long)strlen(a) - 4);
    const char *b = "GET / HTTP/1.0\n\nX";
    CHECK_EQ_INT(srv_http_head_end(b, strlen(b), 0), (long)strlen(b) - 1);
    const char *c = "\r\nGET / HTTP/1.1\r\nHost: a\r\n"; // leading empty line skipped, end not arrived
    CHECK_EQ_INT(srv_http_head_end(c, strlen(c), 0), -1);
    // resumed search, one byte at a time: the same end
    long end = -1;
    for (size_t n = 1; n <= strlen(a) && end < 0; n++) end = srv_http_head_end(a, n, n > 1 ? n - 1 : 0);
    CHECK_EQ_INT(end, (long)strlen(a) - 4);
}

static void test_check(void) {
#define OK(s) CHECK_MSG(check(s, sizeof s - 1) == 0, "refused: %s", s)
#define BAD(s) CHECK_MSG(check(s, sizeof s - 1) == -1, "accepted: %s", s)
    OK("GET /health HTTP/1.1\r\nHost: a\r\n\r\n");
    OK("GET /health HTTP/1.0\r\n\r\n");
    OK("POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 12 \r\n\r\n");
    OK("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n");
    BAD("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n");
    BAD("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2, 2\r\n\r\n");
    BAD("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n");
    BAD("GET / HTTP/1.1\r\nHost: a\r\nHOST: b\r\n\r\n");
    BAD("GET / HTTP/1.1\r\n\r\n");
    BAD("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n");
    BAD("GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n");
#undef OK
#undef BAD
    srv_http_head h;
    char why[96];
    const char *te = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    CHECK(srv_http_head_check(te, strlen(te), &h, why, sizeof why) == 0 && h.chunked && h.http11);
}

int main(void) {
    test_end();
    test_check();
    TEST_MAIN_END();
}
