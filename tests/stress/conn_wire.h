/*
 * The in-process "wire" of the stress programs: usrsctp's AF_CONN transport, one address that
 * both ends bind to (ports tell them apart). The stack hands each packet to conn_wire_output(),
 * which only queues it (the stack may hold its locks); a wire thread feeds the queue back with
 * usrsctp_conninput(), so it plays the receive thread of netperfmeter's UDP encapsulation.
 *
 *   usrsctp_init(0, conn_wire_output, NULL); conn_wire_start(limit);
 *   ... sockets bound to conn_wire_address(port) ...
 *   conn_wire_stop();
 *
 * Header-only (static functions): each program is one translation unit.
 */
#ifndef NPM_TESTS_STRESS_CONN_WIRE_H
#define NPM_TESTS_STRESS_CONN_WIRE_H

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <usrsctp.h>

struct conn_wire_packet {
  struct conn_wire_packet* next;
  size_t length;
  unsigned char data[];
};

static int conn_wire_endpoint; /* its address is the AF_CONN address */
static pthread_mutex_t conn_wire_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t conn_wire_cond = PTHREAD_COND_INITIALIZER;
static struct conn_wire_packet* conn_wire_head;
static struct conn_wire_packet* conn_wire_tail;
static size_t conn_wire_length;
static size_t conn_wire_limit = 20000; /* packets; beyond it the wire drops, SCTP retransmits */
static atomic_int conn_wire_stopping;
static atomic_ulong conn_wire_delivered;
static pthread_t conn_wire_thread_id;

static double conn_wire_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int conn_wire_output(void* addr, void* buffer, size_t length, uint8_t tos, uint8_t set_df) {
  (void)addr;
  (void)tos;
  (void)set_df;
  struct conn_wire_packet* p = malloc(sizeof(*p) + length);
  if (p == NULL) return ENOMEM;
  p->next = NULL;
  p->length = length;
  memcpy(p->data, buffer, length);
  pthread_mutex_lock(&conn_wire_mutex);
  if (conn_wire_length >= conn_wire_limit) {
    pthread_mutex_unlock(&conn_wire_mutex);
    free(p);
    return 0;
  }
  if (conn_wire_tail != NULL)
    conn_wire_tail->next = p;
  else
    conn_wire_head = p;
  conn_wire_tail = p;
  ++conn_wire_length;
  pthread_cond_signal(&conn_wire_cond);
  pthread_mutex_unlock(&conn_wire_mutex);
  return 0;
}

/* True while packets wait to be delivered. */
static int conn_wire_busy(void) {
  pthread_mutex_lock(&conn_wire_mutex);
  const int busy = conn_wire_head != NULL;
  pthread_mutex_unlock(&conn_wire_mutex);
  return busy;
}

static void* conn_wire_thread(void* arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&conn_wire_mutex);
    while (conn_wire_head == NULL && !atomic_load(&conn_wire_stopping))
      pthread_cond_wait(&conn_wire_cond, &conn_wire_mutex);
    struct conn_wire_packet* p = conn_wire_head;
    if (p == NULL) {
      pthread_mutex_unlock(&conn_wire_mutex);
      return NULL;
    }
    conn_wire_head = p->next;
    if (conn_wire_head == NULL) conn_wire_tail = NULL;
    --conn_wire_length;
    pthread_mutex_unlock(&conn_wire_mutex);
    usrsctp_conninput(&conn_wire_endpoint, p->data, p->length, 0);
    atomic_fetch_add(&conn_wire_delivered, 1);
    free(p);
  }
}

/* Registers the address and starts the wire thread; 0 or an errno value. */
static int conn_wire_start(size_t limit) {
  if (limit > 0) conn_wire_limit = limit;
  usrsctp_register_address(&conn_wire_endpoint);
  return pthread_create(&conn_wire_thread_id, NULL, conn_wire_thread, NULL);
}

/* Delivers what is queued, then ends the wire thread. */
static void conn_wire_stop(void) {
  atomic_store(&conn_wire_stopping, 1);
  pthread_mutex_lock(&conn_wire_mutex);
  pthread_cond_broadcast(&conn_wire_cond);
  pthread_mutex_unlock(&conn_wire_mutex);
  pthread_join(conn_wire_thread_id, NULL);
}

static struct sockaddr_conn conn_wire_address(uint16_t port) {
  struct sockaddr_conn a;
  memset(&a, 0, sizeof(a));
  a.sconn_family = AF_CONN;
  a.sconn_port = htons(port);
  a.sconn_addr = &conn_wire_endpoint;
  return a;
}

/* A client connected over the wire to a listener bound to listen_port, and the server's
 * accepted socket: NULL, or what failed. A client send buffer of sndbuf bytes unless 0; prepare,
 * unless NULL, sets the client's options before it connects (NULL, or what failed). */
/* A listening socket on the wire at listen_port; prepare (NULL: none) sets its options before it
 * binds (accepted sockets inherit them). NULL with *failed set when a step failed. */
__attribute__((unused)) static struct socket* conn_wire_listener(uint16_t listen_port,
                                                                 const char* (*prepare)(struct socket*),
                                                                 const char** failed) {
  struct socket* listener = usrsctp_socket(AF_CONN, SOCK_STREAM, IPPROTO_SCTP, NULL, NULL, 0, NULL);
  *failed = listener == NULL ? "cannot create the listener" : prepare != NULL ? prepare(listener) : NULL;
  if (*failed != NULL) return NULL;
  struct sockaddr_conn listen_address = conn_wire_address(listen_port);
  if (usrsctp_bind(listener, (struct sockaddr*)&listen_address, sizeof(listen_address)) < 0 ||
      usrsctp_listen(listener, 4) < 0) {
    *failed = "cannot bind and listen";
    return NULL;
  }
  return listener;
}

__attribute__((unused)) static const char* conn_wire_connect(struct socket* listener, uint16_t listen_port, int sndbuf,
                                                             const char* (*prepare)(struct socket*),
                                                             struct socket** client, struct socket** server) {
  *client = usrsctp_socket(AF_CONN, SOCK_STREAM, IPPROTO_SCTP, NULL, NULL, 0, NULL);
  if (*client == NULL) return "cannot create a client socket";
  if (sndbuf > 0 && usrsctp_setsockopt(*client, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)) < 0)
    return "cannot set the client's SO_SNDBUF";
  const char* failed = prepare != NULL ? prepare(*client) : NULL;
  if (failed != NULL) return failed;
  struct sockaddr_conn any = conn_wire_address(0);
  struct sockaddr_conn listen_address = conn_wire_address(listen_port);
  if (usrsctp_bind(*client, (struct sockaddr*)&any, sizeof(any)) < 0 ||
      usrsctp_connect(*client, (struct sockaddr*)&listen_address, sizeof(listen_address)) < 0)
    return "cannot connect";
  *server = usrsctp_accept(listener, NULL, NULL);
  return *server == NULL ? "cannot accept" : NULL;
}

/* usrsctp_finish(), tried until it succeeds or the seconds are over: 1 when it did. With every
 * socket closed it must succeed (a socket or endpoint left behind makes it refuse). */
static int conn_wire_finish(double seconds) {
  const double deadline = conn_wire_now() + seconds;
  int finished = 0;
  while (!(finished = usrsctp_finish() == 0) && conn_wire_now() < deadline) {
    struct timespec pause = {0, 10000000};
    nanosleep(&pause, NULL);
  }
  return finished;
}

/* The stack's counters (struct sctpstat), e.g. conn_wire_stat().sctps_timoassockill. */
__attribute__((unused)) static struct sctpstat conn_wire_stat(void) {
  struct sctpstat stat;
  usrsctp_get_stat(&stat);
  return stat;
}

/* Ends the program: "program: what" on stderr, exit status 1. */
__attribute__((noreturn, unused)) static void conn_wire_fail(const char* program, const char* what) {
  fprintf(stderr, "%s: %s\n", program, what);
  exit(1);
}

/* A non-negative integer option "--name N" of argv, or the fallback; exit status 2 if malformed. */
static long conn_wire_option(const char* program, int argc, char** argv, const char* name, long fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (strcmp(argv[i], name) == 0) {
      char* end = NULL;
      long value = strtol(argv[i + 1], &end, 10);
      if (end == argv[i + 1] || *end != '\0' || value < 0) {
        fprintf(stderr, "%s: %s needs a non-negative integer, not \"%s\"\n", program, name, argv[i + 1]);
        exit(2);
      }
      return value;
    }
  }
  return fallback;
}

#endif
