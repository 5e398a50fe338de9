/*
 * netperfmeter-delayline [-l LOSS_AB[,LOSS_BA]] [-b BER] [-p PORT[-LAST]] [-s SEED] IF_A IF_B DELAY_AB_MS
 *                        [DELAY_BA_MS]
 *
 * A userspace propagation-delay line for kernels without netem: every frame
 * received on IF_A is sent out of IF_B DELAY_AB_MS later (and IF_B -> IF_A
 * after DELAY_BA_MS, default the same), in order; with -l, each frame is
 * dropped with the given probability in percent (independently, from a
 * seeded generator, so a run can be repeated exactly). AF_PACKET sockets with
 * PACKET_VNET_HDR keep GSO/checksum offload metadata, so TSO-sized frames pass
 * unchanged (a lossy path should send one packet per frame: gso_max_segs 1 on
 * its end points, as netperfmeter-lab sets). With -b (--ber), bit errors: the SCTP
 * part of each UDP-encapsulated SCTP packet (UDP port PORT or range PORT-LAST, -p,
 * default 9899, as source or destination) gets a flipped bit with the probability that BER gives
 * for its length, and a UDP checksum that is valid again (the kernel completes a
 * partial one; a complete one is recomputed), so that the packet arrives and
 * SCTP's CRC32c finds the error. Runs until SIGTERM/SIGINT; prints
 * "ready" once both interfaces are open, its counters on standard output on each
 * SIGUSR1 (one "counters ..." line) and on standard error on exit.
 * See netperfmeter-delayline(1).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <math.h>
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
	unsigned long long in, out, dropped, lost, corrupted;
	long long delay;         /* ns */
	unsigned long long loss; /* drop when the next random number is below this (0: never) */
};

static double ber;                                 /* bit error rate of the SCTP part (-b) */
static unsigned ber_port = 9899, ber_last = 9899;  /* the UDP encapsulation ports (-p) */

static unsigned long long rng_state = 0x9e3779b97f4a7c15ULL;

/* splitmix64: small, fast, and good enough for independent Bernoulli trials */
static unsigned long long next_random(void)
{
	unsigned long long z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static volatile sig_atomic_t stop, report;
static void on_sig(int s) { (void)s; stop = 1; }
static void on_report(int s) { (void)s; report = 1; }

static void print_counters(FILE *f, const char *what, const char *ifa, const char *ifb, const struct queue *ab,
			   const struct queue *ba)
{
	fprintf(f, "%s %s->%s in=%llu out=%llu lost=%llu dropped=%llu corrupted=%llu; "
		"%s->%s in=%llu out=%llu lost=%llu dropped=%llu corrupted=%llu\n",
		what, ifa, ifb, ab->in, ab->out, ab->lost, ab->dropped, ab->corrupted, ifb, ifa, ba->in, ba->out,
		ba->lost, ba->dropped, ba->corrupted);
	fflush(f);
}

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
		perror("netperfmeter-delayline: socket(AF_PACKET)");
		exit(1);
	}
	if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) != 0) {
		perror("netperfmeter-delayline: PACKET_VNET_HDR");
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
		fprintf(stderr, "netperfmeter-delayline: cannot open interface %s: %s\n", ifname,
			sll.sll_ifindex ? strerror(errno) : "no such interface");
		exit(1);
	}
	return fd;
}

/* The ones' complement sum of 16-bit words (RFC 1071), added to sum. */
static unsigned long csum_add(unsigned long sum, const unsigned char *data, size_t len)
{
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (unsigned long)data[i] << 8 | data[i + 1];
	if (len & 1)
		sum += (unsigned long)data[len - 1] << 8;
	return sum;
}

static unsigned short csum_fold(unsigned long sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (unsigned short)~sum;
}

/*
 * -b: if the frame (after its virtio_net_hdr) is an IPv4 or IPv6 UDP packet to or from
 * ber_port, flip one bit of its SCTP part with the probability 1 - (1 - ber)^bits, and make
 * its UDP checksum valid again. Returns 1 if a bit was flipped.
 */
static int corrupt(unsigned char *frame, size_t len)
{
	const struct virtio_net_hdr *vnet = (const struct virtio_net_hdr *)frame;
	unsigned char *eth = frame + sizeof(*vnet), *ip, *udp, *sctp;
	size_t off = sizeof(*vnet) + 14, iplen, sctplen;
	unsigned type;
	int v6;

	if (len < off + 20)
		return 0;
	type = (unsigned)eth[12] << 8 | eth[13];
	ip = frame + off;
	if (type == ETH_P_IP && (ip[0] >> 4) == 4 && ip[9] == IPPROTO_UDP) {
		v6 = 0;
		iplen = (size_t)(ip[0] & 0x0f) * 4;
	} else if (type == ETH_P_IPV6 && len >= off + 40 && (ip[0] >> 4) == 6 && ip[6] == IPPROTO_UDP) {
		v6 = 1;
		iplen = 40;
	} else {
		return 0;
	}
	udp = ip + iplen;
	if ((size_t)(udp - frame) + 8 > len)
		return 0;
	unsigned sport = (unsigned)udp[0] << 8 | udp[1], dport = (unsigned)udp[2] << 8 | udp[3];
	if ((sport < ber_port || sport > ber_last) && (dport < ber_port || dport > ber_last))
		return 0;
	sctp = udp + 8;
	sctplen = ((unsigned)udp[4] << 8 | udp[5]);
	if (sctplen < 8 + 12 || (size_t)(udp - frame) + sctplen > len)
		return 0;
	sctplen -= 8;
	/* P(at least one bit error) = 1 - (1 - ber)^bits */
	double p = -expm1((double)sctplen * 8.0 * log1p(-ber));
	if ((double)next_random() >= p * 18446744073709551616.0)
		return 0;
	unsigned long long bit = next_random() % (sctplen * 8);
	sctp[bit / 8] ^= (unsigned char)(1u << (bit % 8));
	if (!(vnet->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) && !(udp[6] == 0 && udp[7] == 0 && !v6)) {
		/* a complete checksum: recompute it over the pseudo-header, the UDP header and data */
		unsigned long sum = 0;
		unsigned short udplen = (unsigned short)(sctplen + 8), c;
		unsigned char pseudo[4] = { 0, IPPROTO_UDP, (unsigned char)(udplen >> 8), (unsigned char)udplen };

		sum = v6 ? csum_add(sum, ip + 8, 32) : csum_add(sum, ip + 12, 8);
		sum = csum_add(sum, pseudo, sizeof(pseudo));
		udp[6] = udp[7] = 0;
		sum = csum_add(sum, udp, udplen);
		c = csum_fold(sum);
		if (c == 0)
			c = 0xffff;
		udp[6] = (unsigned char)(c >> 8);
		udp[7] = (unsigned char)c;
	}
	/* a partial one (NEEDS_CSUM) the kernel completes over the data as it is now */
	return 1;
}

/* receive everything pending on 'from' into q */
static void pull(int from, struct queue *q)
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
		if (q->loss && next_random() < q->loss) {
			free(b);
			q->in++;
			q->lost++;
			continue;
		}
		if (ber > 0 && corrupt(b, (size_t)n))
			q->corrupted++;
		struct pkt *p = &q->q[q->tail % QCAP];
		p->due = now_ns() + q->delay;
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

static int parse_number(const char *text, double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(text, &end);
	if (errno || end == text || *end || !(v >= 0) || v > max)
		return -1;
	*out = v;
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: netperfmeter-delayline [-l LOSS_AB[,LOSS_BA]] [-b BER] [-p PORT[-LAST]] [-s SEED] IF_A IF_B "
		"DELAY_AB_MS [DELAY_BA_MS]\n"
		"  -l, --loss=PERCENT[,PERCENT]  drop frames at random (each direction)\n"
		"  -b, --ber=BER                 bit errors in the SCTP part of UDP-encapsulated SCTP packets\n"
		"  -p, --ber-port=PORT[-LAST]    their UDP port or ports (default 9899)\n"
		"  -s, --seed=SEED               seed of the loss and bit-error decisions\n"
		"  -h, --help                    this help\n");
}

static unsigned long long loss_threshold(double percent)
{
	/* P(next_random() < t) = t / 2^64 = percent / 100 */
	return percent >= 100.0 ? ~0ULL : (unsigned long long)(percent / 100.0 * 18446744073709551616.0);
}

int main(int argc, char **argv)
{
	static struct queue qab, qba;
	double delay_ab, delay_ba, loss_ab = 0, loss_ba = 0;
	int fa, fb, opt;

	static const struct option longopts[] = {
		{ "loss", required_argument, NULL, 'l' }, { "ber", required_argument, NULL, 'b' },
		{ "ber-port", required_argument, NULL, 'p' }, { "seed", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 }
	};
	while ((opt = getopt_long(argc, argv, "l:b:p:s:h", longopts, NULL)) != -1) {
		char *comma;
		switch (opt) {
		case 'l':
			comma = strchr(optarg, ',');
			if (comma)
				*comma = '\0';
			if (parse_number(optarg, 100, &loss_ab) || parse_number(comma ? comma + 1 : optarg, 100, &loss_ba)) {
				fprintf(stderr, "netperfmeter-delayline: -l wants a loss rate in percent (0 to 100), "
					"or two separated by a comma\n");
				return 2;
			}
			break;
		case 'b':
			if (parse_number(optarg, 1, &ber) || ber >= 1) {
				fprintf(stderr, "netperfmeter-delayline: -b wants a bit error rate from 0 to below 1 "
					"(e.g. 5e-6)\n");
				return 2;
			}
			break;
		case 'p': {
			double first, last;
			char *dash = strchr(optarg, '-');
			if (dash)
				*dash = '\0';
			if (parse_number(optarg, 65535, &first) || parse_number(dash ? dash + 1 : optarg, 65535, &last) ||
			    first < 1 || first != (double)(unsigned)first || last != (double)(unsigned)last ||
			    last < first) {
				fprintf(stderr, "netperfmeter-delayline: -p wants a UDP port or a range FIRST-LAST "
					"(1 to 65535)\n");
				return 2;
			}
			ber_port = (unsigned)first;
			ber_last = (unsigned)last;
			break;
		}
		case 's': {
			char *end;
			errno = 0;
			rng_state = strtoull(optarg, &end, 0);
			if (errno || end == optarg || *end) {
				fprintf(stderr, "netperfmeter-delayline: -s wants an unsigned number\n");
				return 2;
			}
			break;
		}
		default:
			usage();
			return opt == 'h' ? 0 : 2;
		}
	}
	if (argc - optind != 3 && argc - optind != 4) {
		usage();
		return 2;
	}
	if (parse_number(argv[optind + 2], 1e6, &delay_ab) ||
	    parse_number(argv[optind + (argc - optind == 4 ? 3 : 2)], 1e6, &delay_ba)) {
		fprintf(stderr, "netperfmeter-delayline: a delay is a number of milliseconds (0 to 1000000)\n");
		return 2;
	}
	qab.delay = (long long)(delay_ab * 1e6);
	qba.delay = (long long)(delay_ba * 1e6);
	qab.loss = loss_threshold(loss_ab);
	qba.loss = loss_threshold(loss_ba);
	const char *ifa = argv[optind], *ifb = argv[optind + 1];
	fa = open_if(ifa);
	fb = open_if(ifb);
	signal(SIGTERM, on_sig);
	signal(SIGINT, on_sig);
	{
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_report; /* no SA_RESTART: ppoll() returns at once */
		sigaction(SIGUSR1, &sa, NULL);
	}
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
				pull(fa, &qab);
			if (pfd[1].revents & POLLIN)
				pull(fb, &qba);
		}
		t = now_ns();
		push(fb, &qab, t);
		push(fa, &qba, t);
		if (report) {
			report = 0;
			print_counters(stdout, "counters", ifa, ifb, &qab, &qba);
		}
	}
	print_counters(stderr, "netperfmeter-delayline", ifa, ifb, &qab, &qba);
	return 0;
}
