// Lingering close (see srv_linger.h). Each socket has one persistent read event on the loop; nothing else
// refers to it, so the list here is the only owner.
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "server/srv_linger.h"

#define SRV_LINGER_MAX 1024 // sockets lingering at once (each holds a descriptor)

typedef struct srv_linger {
    struct srv_lingerer *l;
    int fd;
    struct event *ev;
    size_t left;     // bytes still to discard
    double t_end;    // monotonic seconds: close by then
    double idle_s;   // seconds without a byte before closing
    struct srv_linger *prev, *next;
} srv_linger;

struct srv_lingerer {
    struct event_base *base;
    srv_linger *all;
    int n;
};

static void linger_close(srv_linger *g) {
    srv_lingerer *l = g->l;
    if (g->prev) g->prev->next = g->next;
    else l->all = g->next;
    if (g->next) g->next->prev = g->prev;
    l->n--;
    event_free(g->ev);
    close(g->fd);
    free(g);
}

static void linger_cb(evutil_socket_t fd, short what, void *arg) {
    srv_linger *g = arg;
    if (what & EV_TIMEOUT) {
        linger_close(g);
        return;
    }
    char junk[16384];
    for (;;) {
        ssize_t n = recv(fd, junk, sizeof junk, MSG_DONTWAIT);
        if (n > 0) {
            g->left = (size_t)n >= g->left ? 0 : g->left - (size_t)n;
            if (g->left == 0) break;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            double now = tc_now();
            if (now >= g->t_end) break;
            double wait = g->idle_s < g->t_end - now ? g->idle_s : g->t_end - now;
            struct timeval tv = {(time_t)wait, (suseconds_t)((wait - (double)(time_t)wait) * 1e6)};
            event_add(g->ev, &tv); // re-arms the idle timeout
            return;
        }
        break; // the peer closed, or the socket failed
    }
    linger_close(g);
}

srv_lingerer *srv_linger_new(struct event_base *base) {
    srv_lingerer *l = calloc(1, sizeof *l);
    if (l) l->base = base;
    return l;
}

void srv_linger_fd(srv_lingerer *l, int fd, size_t max_bytes, double max_s, double idle_s) {
    if (fd < 0) return;
    srv_linger *g = l && l->n < SRV_LINGER_MAX ? calloc(1, sizeof *g) : NULL;
    if (g) g->ev = event_new(l->base, fd, EV_READ | EV_PERSIST, linger_cb, g);
    if (!g || !g->ev) {
        free(g);
        close(fd);
        return;
    }
    shutdown(fd, SHUT_WR); // the reply is complete: a FIN after it
    g->l = l;
    g->fd = fd;
    g->left = max_bytes;
    g->idle_s = idle_s;
    g->t_end = tc_now() + max_s;
    g->next = l->all;
    if (g->next) g->next->prev = g;
    l->all = g;
    l->n++;
    struct timeval tv = {(time_t)idle_s, (suseconds_t)((idle_s - (double)(time_t)idle_s) * 1e6)};
    event_add(g->ev, &tv);
}

void srv_linger_free(srv_lingerer *l) {
    if (!l) return;
    while (l->all) linger_close(l->all);
    free(l);
}
