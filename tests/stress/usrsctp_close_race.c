/*
 * usrsctp_close_race: closes SCTP associations of the userland stack while packets for them
 * are being processed, the window of the double free fixed by the bundled stack's patch 0003
 * (src/sctp/usrsctp-patches): a receive thread tested SCTP_PCB_FLAGS_SOCKET_GONE, the user's
 * usrsctp_close() dropped the last reference, and the receive thread's reference, taken then,
 * freed the socket a second time.
 *
 * Everything runs in this process over usrsctp's AF_CONN "wire" (conn_wire.h), whose thread
 * plays the receive thread of netperfmeter's UDP encapsulation.
 * Each round connects a client to a listener, makes the server side send until the client's
 * window is full (the wire thread is then busy with the client's packets) and closes the
 * client at once, with unread data: the close meets the input processing of its association.
 * Busy threads (--hogs) preempt both at random points, as a loaded machine does.
 *
 * Built with AddressSanitizer (tests/stress/CMakeLists.txt), a double free ends the program
 * with ASan's report and a non-zero status; otherwise it prints what it did and exits 0.
 * Usage: usrsctp_close_race [--seconds S] [--hogs N] [--max-rounds N]
 */
#include <pthread.h>
#include <unistd.h>

#include "conn_wire.h"

#define LISTEN_PORT 5001

static atomic_int stopping;

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

static void die(const char* what) {
  fprintf(stderr, "usrsctp_close_race: %s: %s\n", what, strerror(errno));
  exit(1);
}

int main(int argc, char** argv) {
  const double seconds = (double)conn_wire_option("usrsctp_close_race", argc, argv, "--seconds", 20);
  const long hogs = conn_wire_option("usrsctp_close_race", argc, argv, "--hogs", 4);
  const long max_rounds = conn_wire_option("usrsctp_close_race", argc, argv, "--max-rounds", 0);

  usrsctp_init(0, conn_wire_output, NULL);
  usrsctp_sysctl_set_sctp_ecn_enable(0);
  if (conn_wire_start(0) != 0) die("wire thread");
  pthread_t hog_ids[64];
  const long hog_count = hogs > 64 ? 64 : hogs;
  for (long i = 0; i < hog_count; ++i)
    if (pthread_create(&hog_ids[i], NULL, hog_thread, NULL) != 0) die("busy thread");

  struct socket* listener = usrsctp_socket(AF_CONN, SOCK_STREAM, IPPROTO_SCTP, NULL, NULL, 0, NULL);
  if (listener == NULL) die("listener socket");
  struct sockaddr_conn listen_address = conn_wire_address(LISTEN_PORT);
  if (usrsctp_bind(listener, (struct sockaddr*)&listen_address, sizeof(listen_address)) < 0) die("bind");
  if (usrsctp_listen(listener, 16) < 0) die("listen");

  static char message[1200];
  memset(message, 'x', sizeof(message));
  unsigned long rounds = 0, closed_with_traffic = 0, messages = 0;
  const double start = conn_wire_now();
  while (conn_wire_now() - start < seconds && (max_rounds == 0 || (long)rounds < max_rounds)) {
    struct socket* client = usrsctp_socket(AF_CONN, SOCK_STREAM, IPPROTO_SCTP, NULL, NULL, 0, NULL);
    if (client == NULL) die("client socket");
    struct sockaddr_conn any = conn_wire_address(0);
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
    if (conn_wire_busy()) ++closed_with_traffic;
    usrsctp_close(client); /* with data unread: an ABORT, while its packets are processed */
    usrsctp_close(server);
    ++rounds;
  }
  usrsctp_close(listener);

  atomic_store(&stopping, 1);
  conn_wire_stop();
  for (long i = 0; i < hog_count; ++i) pthread_join(hog_ids[i], NULL);
  (void)conn_wire_finish(3.0); /* its result is not this program's question */
  printf(
      "usrsctp_close_race: %lu associations closed in %.1f s (%lu of them with packets queued for "
      "the stack), %lu messages sent, %lu packets delivered, %ld busy threads\n",
      rounds, conn_wire_now() - start, closed_with_traffic, messages, atomic_load(&conn_wire_delivered), hog_count);
  return 0;
}
