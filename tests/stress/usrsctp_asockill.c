/*
 * usrsctp_asockill: an association freed by the ASOCKILL timer must give back the socket
 * reference that the timer handler took for its upcall -- the socket reference leak fixed
 * upstream by 37a9dc3e ("Fix refcounting for sockets when stcb/inp kill timer fires"), patch
 * 0010 of the bundled stack (src/sctp/usrsctp-patches).
 *
 * When an association is freed while another thread is inside a call on it (a sender blocked
 * in usrsctp_sendv() holds a reference), usrsctp defers the free to the ASOCKILL timer. In
 * libusrsctp 0.9.5 that timer's handler takes a reference on the association's socket for the
 * upcall and then leaves by a path that skips the matching sorele(): the socket keeps a
 * reference nobody holds, usrsctp_close() no longer frees it, its endpoint stays, and
 * usrsctp_finish() refuses to finish for the rest of the process -- in netperfmeter's passive,
 * a socket and an endpoint per association that a peer aborts while a flow sends to it.
 *
 * Each attempt: a client connects over the in-process AF_CONN wire (conn_wire.h), a thread
 * sends to it until usrsctp_sendv() blocks (the server never reads), the server aborts (linger
 * 0), the client's association is freed -- through the ASOCKILL timer if the sender was still
 * inside its call then, which the stack's own counter (sctps_timoassockill) shows -- and the
 * client is closed. Attempts go on until N associations went through the timer (at most 20 N
 * attempts, or the program fails for having tested too little). At the end, with every socket
 * closed, usrsctp_finish() must succeed within its deadline.
 *
 * Exit status 0 when it does, 1 with one line otherwise. Usage: usrsctp_asockill [--rounds N]
 */
#include <pthread.h>
#include <unistd.h>

#include "conn_wire.h"

#define PROGRAM "usrsctp_asockill"
#define LISTEN_PORT 5001

struct sender {
  struct socket* so;
  atomic_ulong sent;
  atomic_int done;
  int error; /* errno of the call that failed */
};

static void* sender_thread(void* arg) {
  struct sender* s = arg;
  static char message[1200];
  memset(message, 'x', sizeof(message));
  for (;;) {
    if (usrsctp_sendv(s->so, message, sizeof(message), NULL, 0, NULL, 0, SCTP_SENDV_NOINFO, 0) < 0) {
      s->error = errno;
      break;
    }
    atomic_fetch_add(&s->sent, 1);
  }
  atomic_store(&s->done, 1);
  return NULL;
}

static void fail(const char* what) { conn_wire_fail(PROGRAM, what); }

static uint32_t asockill_count(void) { return conn_wire_stat().sctps_timoassockill; }

/* Waits (with a deadline) until the sender has stopped making progress and the wire is idle:
 * it is then blocked inside usrsctp_sendv(). */
static void wait_until_blocked(struct sender* s) {
  const double deadline = conn_wire_now() + 10.0;
  unsigned long last = atomic_load(&s->sent);
  double since = conn_wire_now();
  while (conn_wire_now() < deadline) {
    usleep(10000);
    const unsigned long sent = atomic_load(&s->sent);
    if (atomic_load(&s->done)) fail("the sender's call failed before the peer aborted");
    if (sent != last || conn_wire_busy()) {
      last = sent;
      since = conn_wire_now();
    } else if (sent > 0 && conn_wire_now() - since >= 0.2) {
      return;
    }
  }
  fail("the sender never blocked (the server's window did not close within 10 s)");
}

/* Small buffers (the listener's inherited by the accepted sockets), so that the sender blocks
 * soon. */
enum { BUFFER = 16384 };

static const char* prepare_listener(struct socket* so) {
  const int buffer = BUFFER;
  if (usrsctp_setsockopt(so, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer)) < 0)
    return "cannot set the listener's SO_RCVBUF";
  return NULL;
}

int main(int argc, char** argv) {
  const long rounds = conn_wire_option(PROGRAM, argc, argv, "--rounds", 5);

  usrsctp_init(0, conn_wire_output, NULL);
  if (conn_wire_start(0) != 0) fail("cannot start the wire thread");

  const char* failed = NULL;
  struct socket* listener = conn_wire_listener(LISTEN_PORT, prepare_listener, &failed);
  if (listener == NULL) fail(failed);

  /* An attempt misses when the sender leaves its call (woken by the ABORT's notification)
   * before the input thread frees the association: then no reference is held and the free is
   * immediate. Attempts go on until --rounds of them went through the ASOCKILL timer. */
  const double start = conn_wire_now();
  const long max_attempts = 20 * (rounds > 0 ? rounds : 1);
  unsigned long fired = 0, messages = 0;
  long hits = 0, attempts = 0;
  while (hits < rounds && attempts < max_attempts) {
    ++attempts;
    struct socket *client, *server;
    failed = conn_wire_connect(listener, LISTEN_PORT, BUFFER, NULL, &client, &server);
    if (failed != NULL) fail(failed);

    struct sender s = {.so = client};
    pthread_t id;
    if (pthread_create(&id, NULL, sender_thread, &s) != 0) fail("cannot start the sender");
    wait_until_blocked(&s);

    const uint32_t before = asockill_count();
    const struct linger abort_on_close = {.l_onoff = 1, .l_linger = 0};
    if (usrsctp_setsockopt(server, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close)) < 0)
      fail("cannot set SO_LINGER on the server");
    usrsctp_close(server); /* an ABORT to the client, whose sender is inside usrsctp_sendv() */

    double deadline = conn_wire_now() + 10.0;
    while (!atomic_load(&s.done) && conn_wire_now() < deadline) usleep(1000);
    if (!atomic_load(&s.done)) fail("the sender stayed blocked after the peer's ABORT");
    pthread_join(id, NULL);
    if (s.error != ECONNRESET) {
      fprintf(stderr, PROGRAM ": the sender's call ended with \"%s\", not with the peer's ABORT\n", strerror(s.error));
      return 1;
    }
    /* The timer runs 10 ms after the deferred free (SCTP_ASOC_KILL_TIMEOUT). */
    deadline = conn_wire_now() + 1.0;
    while (asockill_count() == before && conn_wire_now() < deadline) usleep(1000);
    if (asockill_count() != before) {
      ++hits;
      fired += asockill_count() - before;
    }
    messages += atomic_load(&s.sent);
    usrsctp_close(client);
  }
  if (hits < rounds) {
    fprintf(stderr,
            PROGRAM
            ": only %ld of %ld aborted associations went through the ASOCKILL timer: "
            "the program tested too little\n",
            hits, attempts);
    return 1;
  }
  usrsctp_close(listener);

  /* Every socket is closed: the stack must be able to finish. */
  while (conn_wire_busy()) usleep(1000);
  conn_wire_stop();
  if (!conn_wire_finish(10.0)) {
    fprintf(stderr,
            PROGRAM
            ": usrsctp_finish() still refuses 10 s after every socket was closed: %lu ASOCKILL "
            "timer(s) for %ld association(s) left socket references behind (the leak of upstream 37a9dc3e)\n",
            fired, hits);
    return 1;
  }
  printf(PROGRAM
         ": %ld association(s) aborted under a blocked sender, %ld of them freed by %lu "
         "ASOCKILL timer(s); %lu messages sent, %lu packets delivered; usrsctp_finish() succeeded; %.1f s\n",
         attempts, hits, fired, messages, atomic_load(&conn_wire_delivered), conn_wire_now() - start);
  return 0;
}
