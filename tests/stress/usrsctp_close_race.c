/*
 * usrsctp_close_race: closes SCTP associations of the userland stack while packets for them
 * are being processed, the window of the double free fixed by the bundled stack's patch 0003
 * (src/sctp/usrsctp-patches): a receive thread tested SCTP_PCB_FLAGS_SOCKET_GONE, the user's
 * usrsctp_close() dropped the last reference, and the receive thread's reference, taken then,
 * freed the socket a second time.
 *
 * Everything runs in this process over usrsctp's AF_CONN "wire": the stack hands each packet
 * to conn_output(), which queues it; a wire thread feeds the queue back with
 * usrsctp_conninput(), so it plays the receive thread of netperfmeter's UDP encapsulation.
 * Each round connects a client to a listener, makes the server side send until the client's
 * window is full (the wire thread is then busy with the client's packets) and closes the
 * client at once, with unread data: the close meets the input processing of its association.
 * Busy threads (--hogs) preempt both at random points, as a loaded machine does.
 *
 * Built with AddressSanitizer (tests/stress/CMakeLists.txt), a double free ends the program
 * with ASan's report and a non-zero status; otherwise it prints what it did and exits 0.
 * Usage: usrsctp_close_race [--seconds S] [--hogs N] [--max-rounds N]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <usrsctp.h>

#define LISTEN_PORT 5001
#define QUEUE_LIMIT 20000 /* packets; beyond it the wire drops, SCTP retransmits */

struct packet {
  struct packet* next;
  size_t length;
  unsigned char data[];
};

static int wire; /* the one AF_CONN address: both ends bind to it, ports tell them apart */
static pthread_mutex_t queue_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_cond = PTHREAD_COND_INITIALIZER;
static struct packet* queue_head;
static struct packet* queue_tail;
static size_t queue_length;
static atomic_int stopping;
static atomic_ulong delivered;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Called by the stack, possibly with its locks held: only queue the packet. */
static int conn_output(void* addr, void* buffer, size_t length, uint8_t tos, uint8_t set_df) {
  (void)addr;
  (void)tos;
  (void)set_df;
  struct packet* p = malloc(sizeof(*p) + length);
  if (p == NULL) return ENOMEM;
  p->next = NULL;
  p->length = length;
  memcpy(p->data, buffer, length);
  pthread_mutex_lock(&queue_mutex);
  if (queue_length >= QUEUE_LIMIT) {
    pthread_mutex_unlock(&queue_mutex);
    free(p);
    return 0;
  }
  if (queue_tail != NULL) queue_tail->next = p;
  else queue_head = p;
  queue_tail = p;
  ++queue_length;
  pthread_cond_signal(&queue_cond);
  pthread_mutex_unlock(&queue_mutex);
  return 0;
}

static void* wire_thread(void* arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&queue_mutex);
    while (queue_head == NULL && !atomic_load(&stopping)) pthread_cond_wait(&queue_cond, &queue_mutex);
    struct packet* p = queue_head;
    if (p == NULL) {
      pthread_mutex_unlock(&queue_mutex);
      return NULL;
    }
    queue_head = p->next;
    if (queue_head == NULL) queue_tail = NULL;
    --queue_length;
    pthread_mutex_unlock(&queue_mutex);
    usrsctp_conninput(&wire, p->data, p->length, 0);
    atomic_fetch_add(&delivered, 1);
    free(p);
  }
}

static void* hog_thread(void* arg) {
  (void)arg;
  volatile unsigned long spin = 0;
  while (!atomic_load(&stopping)) ++spin;
  return NULL;
}

static void upcall(struct socket* so, void* arg, int flags) {
  (void)so;
  (void)arg;
  (void)flags;
}

static struct sockaddr_conn address(uint16_t port) {
  struct sockaddr_conn a;
  memset(&a, 0, sizeof(a));
  a.sconn_family = AF_CONN;
  a.sconn_port = htons(port);
  a.sconn_addr = &wire;
  return a;
}

static void die(const char* what) {
  fprintf(stderr, "usrsctp_close_race: %s: %s\n", what, strerror(errno));
  exit(1);
}

static long option(int argc, char** argv, const char* name, long fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (strcmp(argv[i], name) == 0) {
      char* end = NULL;
      long value = strtol(argv[i + 1], &end, 10);
      if (end == argv[i + 1] || *end != '\0' || value < 0) {
        fprintf(stderr, "usrsctp_close_race: %s needs a non-negative integer, not \"%s\"\n", name, argv[i + 1]);
        exit(2);
      }
      return value;
    }
  }
  return fallback;
}

int main(int argc, char** argv) {
  const double seconds = (double)option(argc, argv, "--seconds", 20);
  const long hogs = option(argc, argv, "--hogs", 4);
  const long max_rounds = option(argc, argv, "--max-rounds", 0);

  usrsctp_init(0, conn_output, NULL);
  usrsctp_sysctl_set_sctp_ecn_enable(0);
  usrsctp_register_address(&wire);

  pthread_t wire_id;
  if (pthread_create(&wire_id, NULL, wire_thread, NULL) != 0) die("wire thread");
  pthread_t hog_ids[64];
  const long hog_count = hogs > 64 ? 64 : hogs;
  for (long i = 0; i < hog_count; ++i)
    if (pthread_create(&hog_ids[i], NULL, hog_thread, NULL) != 0) die("busy thread");

  struct socket* listener = usrsctp_socket(AF_CONN, SOCK_STREAM, IPPROTO_SCTP, NULL, NULL, 0, NULL);
  if (listener == NULL) die("listener socket");
  struct sockaddr_conn listen_address = address(LISTEN_PORT);
  if (usrsctp_bind(listener, (struct sockaddr*)&listen_address, sizeof(listen_address)) < 0) die("bind");
  if (usrsctp_listen(listener, 16) < 0) die("listen");

  static char message[1200];
  memset(message, 'x', sizeof(message));
  unsigned long rounds = 0, closed_with_traffic = 0, messages = 0;
  const double start = now();
  while (now() - start < seconds && (max_rounds == 0 || (long)rounds < max_rounds)) {
    struct socket* client = usrsctp_socket(AF_CONN, SOCK_STREAM, IPPROTO_SCTP, NULL, NULL, 0, NULL);
    if (client == NULL) die("client socket");
    struct sockaddr_conn any = address(0);
    if (usrsctp_bind(client, (struct sockaddr*)&any, sizeof(any)) < 0) die("client bind");
    usrsctp_set_upcall(client, upcall, NULL);
    if (usrsctp_connect(client, (struct sockaddr*)&listen_address, sizeof(listen_address)) < 0) die("connect");
    struct socket* server = usrsctp_accept(listener, NULL, NULL);
    if (server == NULL) die("accept");
    usrsctp_set_non_blocking(server, 1);
    /* Fill the client's window: the wire thread now delivers DATA to the client. */
    for (int i = 0; i < 256; ++i) {
      if (usrsctp_sendv(server, message, sizeof(message), NULL, 0, NULL, 0, SCTP_SENDV_NOINFO, 0) < 0) break;
      ++messages;
    }
    pthread_mutex_lock(&queue_mutex);
    const int busy = queue_head != NULL;
    pthread_mutex_unlock(&queue_mutex);
    if (busy) ++closed_with_traffic;
    usrsctp_close(client); /* with data unread: an ABORT, while its packets are processed */
    usrsctp_close(server);
    ++rounds;
  }
  usrsctp_close(listener);

  atomic_store(&stopping, 1);
  pthread_mutex_lock(&queue_mutex);
  pthread_cond_broadcast(&queue_cond);
  pthread_mutex_unlock(&queue_mutex);
  pthread_join(wire_id, NULL);
  for (long i = 0; i < hog_count; ++i) pthread_join(hog_ids[i], NULL);
  for (int i = 0; i < 300 && usrsctp_finish() != 0; ++i) usleep(10000);
  printf("usrsctp_close_race: %lu associations closed in %.1f s (%lu of them with packets queued for "
         "the stack), %lu messages sent, %lu packets delivered, %ld busy threads\n",
         rounds, now() - start, closed_with_traffic, messages, atomic_load(&delivered), hog_count);
  return 0;
}
