/*
 * usrsctp_pktdrop_control: a packet-drop report must not make the stack send a control chunk
 * outside the state in which it sends that chunk -- patch 0012 of the bundled stack
 * (src/sctp/usrsctp-patches).
 *
 * A PKTDROP chunk with the B bit reports a packet its sender discarded for a bad checksum and
 * carries that packet's bytes as they arrived, corrupted. usrsctp 0.9.5 walks the reported
 * chunks and sends each control chunk again: a SACK with one bit flipped (chunk type 3 -> 7)
 * reads as a SHUTDOWN, which the stack then sent in ESTABLISHED -- the peer shut the
 * association down in the middle of a packet-drop-reporting study run.
 *
 * Each round: a client connected over the in-process AF_CONN wire (conn_wire.h), packet-drop
 * reporting negotiated on both ends, sends messages that the server reads and acknowledges;
 * the wire keeps the server's last SACK. The client then sends the server a PKTDROP chunk (B
 * bit) that reports that SACK with its chunk type turned from 3 into 7, as the capture of the
 * failed run showed. The stack's own counter of end-host drop reports must rise (the report
 * was processed, or the round tested nothing); the server must send no SHUTDOWN; and the
 * client must go on sending.
 *
 * Exit status 0 when every round passes, 1 with one line otherwise.
 * Usage: usrsctp_pktdrop_control [--rounds N]
 */
#include <unistd.h>

#include "conn_wire.h"

#define PROGRAM "usrsctp_pktdrop_control"
#define LISTEN_PORT 5003
#define MAX_PACKET 2048

/* What the tap saw of the packets on the wire, by direction (the server's port tells). */
static pthread_mutex_t tap_mutex = PTHREAD_MUTEX_INITIALIZER;
static unsigned char last_sack[MAX_PACKET]; /* the server's last packet holding a SACK */
static size_t last_sack_length;
static uint32_t to_server_vtag;       /* the verification tag of packets to the server */
static atomic_ulong server_shutdowns; /* SHUTDOWN chunks the server sent */

enum { CHUNK_SACK = 3, CHUNK_SHUTDOWN = 7, CHUNK_PKTDROP = 0x81, PKTDROP_BADCRC = 0x02 };

static int tap_output(void* addr, void* buffer, size_t length, uint8_t tos, uint8_t set_df) {
  const unsigned char* p = buffer;
  if (length >= 16) {
    uint16_t source_port;
    memcpy(&source_port, p, 2);
    pthread_mutex_lock(&tap_mutex);
    if (ntohs(source_port) == LISTEN_PORT) {
      for (size_t offset = 12; offset + 4 <= length;) { /* the chunks after the common header */
        const unsigned type = p[offset];
        const size_t chunk_length = (size_t)p[offset + 2] << 8 | p[offset + 3];
        if (type == CHUNK_SHUTDOWN) atomic_fetch_add(&server_shutdowns, 1);
        if (type == CHUNK_SACK && length <= MAX_PACKET) {
          memcpy(last_sack, p, length);
          last_sack_length = length;
        }
        if (chunk_length < 4) break;
        offset += (chunk_length + 3) & ~(size_t)3;
      }
    } else {
      memcpy(&to_server_vtag, p + 4, 4);
    }
    pthread_mutex_unlock(&tap_mutex);
  }
  return conn_wire_output(addr, buffer, length, tos, set_df);
}

static void fail(const char* what) { conn_wire_fail(PROGRAM, what); }

static uint32_t reports_processed(void) { return conn_wire_stat().sctps_pdrpfehos; }

static void enable_pktdrop(struct socket* so) {
  struct sctp_assoc_value v = {.assoc_id = SCTP_FUTURE_ASSOC, .assoc_value = 1};
  if (usrsctp_setsockopt(so, IPPROTO_SCTP, SCTP_PKTDROP_SUPPORTED, &v, sizeof(v)) < 0)
    fail("cannot enable packet-drop reporting (SCTP_PKTDROP_SUPPORTED)");
}

/* The listener's option before it binds (the accepted server socket inherits it). */
static const char* prepare_listener(struct socket* so) {
  enable_pktdrop(so);
  return NULL;
}

/* The client's options before it connects: packet-drop reporting, and no Nagle (each message
 * goes out at once, not after a delayed SACK). */
static const char* prepare_client(struct socket* so) {
  enable_pktdrop(so);
  const int nodelay = 1;
  if (usrsctp_setsockopt(so, IPPROTO_SCTP, SCTP_NODELAY, &nodelay, sizeof(nodelay)) < 0)
    return "cannot set SCTP_NODELAY";
  return NULL;
}

/* Sends `count` messages from the client and reads them at the server (which acknowledges them);
 * 0, or -1 with errno when the client's send failed. */
static int exchange(struct socket* client, struct socket* server, int count) {
  static char message[1000];
  char buffer[2048];
  for (int i = 0; i < count; ++i) {
    if (usrsctp_sendv(client, message, sizeof(message), NULL, 0, NULL, 0, SCTP_SENDV_NOINFO, 0) < 0) return -1;
    socklen_t from_length = 0, info_length = 0;
    unsigned int info_type = 0;
    int flags = 0;
    if (usrsctp_recvv(server, buffer, sizeof(buffer), NULL, &from_length, NULL, &info_length, &info_type, &flags) <= 0)
      fail("the server could not read a message");
  }
  return 0;
}

/* Waits until the wire has delivered everything queued (and what that caused). */
static void settle(void) {
  for (int quiet = 0; quiet < 20;) {
    usleep(5000);
    quiet = conn_wire_busy() ? 0 : quiet + 1;
  }
}

/* The PKTDROP packet from the client that reports the server's SACK corrupted into a SHUTDOWN. */
static size_t forged_report(unsigned char* packet, uint16_t client_port) {
  pthread_mutex_lock(&tap_mutex);
  const size_t reported = last_sack_length;
  unsigned char copy[MAX_PACKET];
  memcpy(copy, last_sack, reported);
  const uint32_t vtag = to_server_vtag;
  pthread_mutex_unlock(&tap_mutex);
  if (reported < 16 || copy[12] != CHUNK_SACK) fail("the wire saw no SACK of the server's to report");
  copy[12] = CHUNK_SHUTDOWN; /* the one bit of the capture: 0b011 -> 0b111 */

  const size_t chunk_length = 16 + reported;
  const size_t length = 12 + ((chunk_length + 3) & ~(size_t)3);
  memset(packet, 0, length);
  const uint16_t source = htons(client_port), destination = htons(LISTEN_PORT);
  memcpy(packet, &source, 2);
  memcpy(packet + 2, &destination, 2);
  memcpy(packet + 4, &vtag, 4);
  unsigned char* chunk = packet + 12;
  chunk[0] = CHUNK_PKTDROP;
  chunk[1] = PKTDROP_BADCRC;
  chunk[2] = (unsigned char)(chunk_length >> 8);
  chunk[3] = (unsigned char)chunk_length;
  const uint32_t bottle_bw = htonl(12500), on_queue = 0;
  memcpy(chunk + 4, &bottle_bw, 4);
  memcpy(chunk + 8, &on_queue, 4); /* then trunc_len and reserved: 0 */
  memcpy(chunk + 16, copy, reported);
  const uint32_t crc = usrsctp_crc32c(packet, length);
  memcpy(packet + 8, &crc, 4);
  return length;
}

int main(int argc, char** argv) {
  const long rounds = conn_wire_option(PROGRAM, argc, argv, "--rounds", 3);

  usrsctp_init(0, tap_output, NULL);
  if (conn_wire_start(0) != 0) fail("cannot start the wire thread");

  const char* failed = NULL;
  struct socket* listener = conn_wire_listener(LISTEN_PORT, prepare_listener, &failed);
  if (listener == NULL) fail(failed);

  const double start = conn_wire_now();
  unsigned long processed = 0;
  for (long round = 0; round < rounds; ++round) {
    struct socket *client, *server;
    failed = conn_wire_connect(listener, LISTEN_PORT, 0, prepare_client, &client, &server);
    if (failed != NULL) fail(failed);
    struct sockaddr_conn local;
    struct sockaddr* addresses = NULL;
    if (usrsctp_getladdrs(client, 0, &addresses) <= 0) fail("cannot read the client's address");
    memcpy(&local, addresses, sizeof(local));
    usrsctp_freeladdrs(addresses);

    if (exchange(client, server, 20) != 0) fail("the client could not send before the report");
    settle();

    const unsigned long shutdowns = atomic_load(&server_shutdowns);
    const uint32_t before = reports_processed();
    unsigned char packet[MAX_PACKET + 64];
    const size_t length = forged_report(packet, ntohs(local.sconn_port));
    conn_wire_output(NULL, packet, length, 0, 0);
    settle();

    if (reports_processed() == before)
      fail(
          "the server's stack did not process the drop report (not negotiated, or the packet was refused): "
          "the round tested nothing");
    processed += reports_processed() - before;
    if (atomic_load(&server_shutdowns) != shutdowns)
      fail(
          "a drop report of a corrupted SACK that reads as a SHUTDOWN made the server send a SHUTDOWN "
          "in ESTABLISHED (the bug patch 0012 fixes)");
    if (exchange(client, server, 20) != 0) {
      fprintf(stderr, PROGRAM ": the client cannot send after the drop report: %s\n", strerror(errno));
      return 1;
    }
    usrsctp_close(client);
    usrsctp_close(server);
    settle();
  }
  usrsctp_close(listener);
  conn_wire_stop();
  if (!conn_wire_finish(10.0)) fail("usrsctp_finish() still refuses 10 s after every socket was closed");
  printf(PROGRAM
         ": %ld round(s): %lu drop report(s) of a SACK read as a SHUTDOWN processed, no SHUTDOWN "
         "sent, the association went on; %lu packets delivered; %.1f s\n",
         rounds, processed, atomic_load(&conn_wire_delivered), conn_wire_now() - start);
  return 0;
}
