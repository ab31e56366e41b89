// Lingering close for connections refused early (srv_linger.c): the reply is written, our side is shut
// down, and what the client is still uploading is read and discarded (bounded in bytes and time) before the
// socket is closed. Closing with unread bytes makes the kernel send a reset, and a client that is still
// sending loses the reply with it (nginx's lingering_close).
#ifndef TACHYON_SRV_LINGER_H
#define TACHYON_SRV_LINGER_H

#include <event2/event.h>
#include <stddef.h>

typedef struct srv_lingerer srv_lingerer;

srv_lingerer *srv_linger_new(struct event_base *base); // owned, free with srv_linger_free; NULL on OOM
// Takes ownership of fd (a socket whose reply is written): shuts down its sending side, then discards what
// arrives until the peer closes, max_bytes were read, or max_s seconds passed (idle_s without a byte).
// Beyond SRV_LINGER_MAX sockets at once, fd is closed at once.
void srv_linger_fd(srv_lingerer *l, int fd, size_t max_bytes, double max_s, double idle_s);
void srv_linger_free(srv_lingerer *l); // closes every socket still lingering

#endif
