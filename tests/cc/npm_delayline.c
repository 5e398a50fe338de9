/*
 * npm_delayline IF_A IF_B DELAY_MS
 *
 * A userspace propagation-delay line (the kernel here has no netem): every
 * frame received on IF_A is sent out of IF_B DELAY_MS later and vice versa,
 * in order. AF_PACKET sockets with PACKET_VNET_HDR keep GSO/checksum offload
 * metadata, so TSO-sized frames pass unchanged. Runs until SIGTERM/SIGINT.
 * Prints counters on exit.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

#define QCAP 16384
#define FRAME_MAX (65536 + 64)

struct pkt {
	long long due;
	size_t len;
	unsigned char *data;
};

struct queue {
	struct pkt q[QCAP];
	unsigned head, tail;     /* tail - head = count */
	unsigned long long in, out, dropped;
};

static volatile sig_atomic_t stop;
static void on_sig(int s) { (void)s; stop = 1; }

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int open_if(const char *ifname)
{
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
	struct sockaddr_ll sll;
	int one = 1, buf = 8 << 20;

	if (fd < 0) {
		perror("npm_delayline: socket(AF_PACKET)");
		exit(1);
	}
	if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) != 0) {
		perror("npm_delayline: PACKET_VNET_HDR");
		exit(1);
	}
	setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf));
	memset(&sll, 0, sizeof(sll));
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(ETH_P_ALL);
	sll.sll_ifindex = (int)if_nametoindex(ifname);
	if (!sll.sll_ifindex || bind(fd, (struct sockaddr *)&sll, sizeof(sll)) != 0) {
		fprintf(stderr, "npm_delayline: bind %s: %s\n", ifname, strerror(errno));
		exit(1);
	}
	return fd;
}

/* receive everything pending on 'from' into q */
static void pull(int from, struct queue *q, long long delay)
{
	for (;;) {
		unsigned char *b;
		ssize_t n;
		struct sockaddr_ll sll;
		socklen_t sl = sizeof(sll);

		if (q->tail - q->head >= QCAP) {
			static unsigned char sink[FRAME_MAX];
			if (recv(from, sink, sizeof(sink), MSG_DONTWAIT) <= 0)
				return;
			q->dropped++;
			continue;
		}
		b = malloc(FRAME_MAX);
		if (!b)
			return;
		n = recvfrom(from, b, FRAME_MAX, MSG_DONTWAIT, (struct sockaddr *)&sll, &sl);
		if (n <= 0) {
			free(b);
			return;
		}
		if (sll.sll_pkttype == PACKET_OUTGOING) {
			free(b);
			continue;
		}
		struct pkt *p = &q->q[q->tail % QCAP];
		p->due = now_ns() + delay;
		p->len = (size_t)n;
		p->data = b;
		q->tail++;
		q->in++;
	}
}

/* send everything due from q to 'to' */
static void push(int to, struct queue *q, long long t)
{
	while (q->head != q->tail) {
		struct pkt *p = &q->q[q->head % QCAP];
		if (p->due > t)
			return;
		if (send(to, p->data, p->len, 0) < 0) {
			if (errno == EAGAIN || errno == ENOBUFS)
				return;  /* retry on the next round */
			q->dropped++;
		} else {
			q->out++;
		}
		free(p->data);
		q->head++;
	}
}

int main(int argc, char **argv)
{
	static struct queue qab, qba;
	long long delay;
	int fa, fb;

	if (argc != 4) {
		fprintf(stderr, "usage: npm_delayline IF_A IF_B DELAY_MS\n");
		return 2;
	}
	delay = (long long)(atof(argv[3]) * 1e6);
	fa = open_if(argv[1]);
	fb = open_if(argv[2]);
	signal(SIGTERM, on_sig);
	signal(SIGINT, on_sig);
	printf("ready\n");
	fflush(stdout);
	while (!stop) {
		struct pollfd pfd[2] = { { fa, POLLIN, 0 }, { fb, POLLIN, 0 } };
		long long t = now_ns(), next = t + 100000000LL;
		struct timespec ts;

		if (qab.head != qab.tail && qab.q[qab.head % QCAP].due < next)
			next = qab.q[qab.head % QCAP].due;
		if (qba.head != qba.tail && qba.q[qba.head % QCAP].due < next)
			next = qba.q[qba.head % QCAP].due;
		if (next < t)
			next = t;
		ts.tv_sec = (next - t) / 1000000000LL;
		ts.tv_nsec = (next - t) % 1000000000LL;
		if (ppoll(pfd, 2, &ts, NULL) > 0) {
			if (pfd[0].revents & POLLIN)
				pull(fa, &qab, delay);
			if (pfd[1].revents & POLLIN)
				pull(fb, &qba, delay);
		}
		t = now_ns();
		push(fb, &qab, t);
		push(fa, &qba, t);
	}
	fprintf(stderr, "npm_delayline %s->%s in=%llu out=%llu dropped=%llu; %s->%s in=%llu "
		"out=%llu dropped=%llu\n", argv[1], argv[2], qab.in, qab.out, qab.dropped,
		argv[2], argv[1], qba.in, qba.out, qba.dropped);
	return 0;
}
