/*
 * netperfmeter-delayline [OPTIONS] IF_A IF_B DELAY_AB_MS [DELAY_BA_MS]
 * netperfmeter-delayline --trace [OPTIONS] [DELAY_MS]
 *
 * A userspace link for kernels without netem: every frame received on IF_A is sent out of IF_B
 * (and IF_B -> IF_A), in order, after
 *
 *   random loss (-l, per direction), bit errors in UDP-encapsulated SCTP (-b),
 *   a bottleneck (-r: serialisation at a rate in bit/s, a queue of -q packets, and its queue
 *   discipline, -a: drop-tail, RED, CoDel or PIE),
 *   the propagation delay (DELAY_AB_MS, DELAY_BA_MS; default the same).
 *
 * Every random decision comes from generators of each direction of their own (loss, bit errors,
 * the AQM), seeded by -s (or the "seed" command), so that a run can be repeated exactly: the same
 * seed gives the same sequence of decisions, packet by packet, whatever the other direction does.
 * AF_PACKET sockets with PACKET_VNET_HDR keep GSO/checksum offload metadata, so TSO-sized frames
 * pass unchanged (a lossy or shaped path should send one packet per frame: gso_max_segs 1 on its
 * end points, as netperfmeter-lab sets). With -b (--ber): the SCTP part of each UDP-encapsulated
 * SCTP packet (UDP port PORT or range PORT-LAST, -p, default 9899, as source or destination) gets
 * a flipped bit with the probability that BER gives for its length, and a UDP checksum that is
 * valid again (the kernel completes a partial one; a complete one is recomputed), so that the
 * packet arrives and SCTP's CRC32c finds the error.
 *
 * Each frame's arrival time is the kernel's receive time stamp; it is due at the end of its
 * serialisation plus the delay, and the time it is sent too late ("lateness") is counted per
 * direction (a histogram, the maximum). The bottleneck runs in virtual time from the arrival time
 * stamps (each packet's dequeue and departure are computed, not observed), so the AQMs see an ideal
 * link whatever the host's scheduling; --trace drives the same code from a synthetic arrival
 * sequence on standard input. Runs until SIGTERM/SIGINT; prints "ready" once both interfaces are
 * open, its counters on standard output on each SIGUSR1 or "counters" command (one "counters ..."
 * line) and on standard error on exit. See netperfmeter-delayline(1).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <math.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef NPM_VERSION
#error "NPM_VERSION (the project's version) must be defined: -DNPM_VERSION=\"x.y.z\" (CMake defines it)"
#endif
#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

#define QCAP 16384u            /* frames per direction: queued, in propagation, or both */
#define FRAME_MAX (65536 + 64) /* the largest frame, its virtio_net_hdr included */
#define ARENA (64u << 20)      /* bytes of frame storage per direction (a ring) */
#define MAXPACKET 1514         /* CoDel's "one MTU" of backlog, bytes of a frame */
#define LATE_NS 1000000LL      /* "late": sent 1 ms or more after its time */
#define NSEC 1000000000LL

/* lateness histogram: upper edges in microseconds (the last bucket is everything above) */
static const long long late_edges_us[] = { 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000 };
#define NBUCKETS (sizeof(late_edges_us) / sizeof(late_edges_us[0]) + 1)

enum aqm_kind { AQM_DROPTAIL, AQM_RED, AQM_CODEL, AQM_PIE };
static const char *const aqm_names[] = { "droptail", "red", "codel", "pie" };

struct aqm_cfg {
	enum aqm_kind kind;
	/* RED (Floyd & Jacobson 1993; thresholds in packets) */
	double wq, min_th, max_th, max_p, mean_bytes;
	int gentle;
	/* CoDel (RFC 8289) */
	long long target, interval;
	/* PIE (RFC 8033) */
	long long pie_target, tupdate, max_burst;
	double alpha, beta;
	int ecn; /* mark ECN-capable packets (CE) instead of an early drop */
};

enum slot_state { QUEUED, SENDING, DROPPED };

struct slot {
	long long arrive, due; /* ns */
	unsigned off, len;     /* in the arena; len with the virtio_net_hdr */
	unsigned state;
	unsigned number; /* of its arrival in its direction (from 0; --trace names frames so) */
};

struct dir {
	/* configuration */
	long long delay;         /* ns */
	unsigned long long loss; /* drop when the next random number is below this (0: never) */
	double rate;             /* bit/s of the bottleneck, 0: none */
	unsigned limit;          /* its queue in packets */
	struct aqm_cfg aqm;
	unsigned long long seed, rng_loss, rng_ber, rng_aqm;
	/* frames: [head, mid) serialised (due at their time), [mid, tail) waiting at the bottleneck */
	struct slot *s;
	unsigned head, mid, tail;
	unsigned char *arena;
	unsigned wr; /* next free byte of the arena */
	long long last_arrive, link_free, idle_since;
	unsigned long long backlog; /* bytes waiting (frames without their virtio_net_hdr) */
	/* RED */
	double avg;
	long long red_count;
	/* CoDel */
	long long first_above, drop_next;
	unsigned long long codel_count, codel_lastcount;
	int dropping;
	/* PIE */
	double p;
	long long qdelay, qdelay_old, burst_allow, next_update, last_sojourn;
	/* counters */
	unsigned long long in, out, lost, dropped, corrupted, aqm_drops, tail_drops, marks, late;
	unsigned long long hist[NBUCKETS];
	long long late_max, late_max_report; /* ns: since the start, since the previous counters line */
};

static double ber;                                /* bit error rate of the SCTP part (-b) */
static unsigned ber_port = 9899, ber_last = 9899; /* the UDP encapsulation ports (-p) */
static FILE *trace;                               /* --trace: each packet's fate, here */

/* splitmix64: small, fast, and good enough for independent Bernoulli trials */
static unsigned long long next_random(unsigned long long *state)
{
	unsigned long long z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* a uniform number in [0, 1) */
static double uniform(unsigned long long *state)
{
	return (double)(next_random(state) >> 11) * (1.0 / 9007199254740992.0);
}

/* the generators of a direction: one stream each for loss, bit errors and the AQM, from one seed */
static void seed_dir(struct dir *d, unsigned long long seed)
{
	unsigned long long s = seed;

	d->seed = seed;
	d->rng_loss = next_random(&s);
	d->rng_ber = next_random(&s);
	d->rng_aqm = next_random(&s);
}

static volatile sig_atomic_t stop, report;
static void on_sig(int s)
{
	(void)s;
	stop = 1;
}
static void on_report(int s)
{
	(void)s;
	report = 1;
}

static void print_dir(FILE *f, const char *from, const char *to, struct dir *d)
{
	unsigned i;

	fprintf(f,
		"%s->%s in=%llu out=%llu lost=%llu dropped=%llu corrupted=%llu aqm_drops=%llu tail_drops=%llu "
		"marks=%llu late=%llu late_max_us=%lld late_max_report_us=%lld lateness_us=",
		from, to, d->in, d->out, d->lost, d->dropped, d->corrupted, d->aqm_drops, d->tail_drops, d->marks,
		d->late, d->late_max / 1000, d->late_max_report / 1000);
	for (i = 0; i < NBUCKETS; i++)
		fprintf(f, "%s%llu", i ? "," : "", d->hist[i]);
	fprintf(f, " seed=%llu", d->seed);
	d->late_max_report = 0;
}

/* One line; the fields of the first five counters of each direction come first, in their old order. */
static void print_counters(FILE *f, const char *what, const char *ifa, const char *ifb, struct dir *ab, struct dir *ba)
{
	fprintf(f, "%s ", what);
	print_dir(f, ifa, ifb, ab);
	fprintf(f, "; ");
	print_dir(f, ifb, ifa, ba);
	fprintf(f, "\n");
	fflush(f);
}

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * NSEC + ts.tv_nsec;
}

static long long realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * NSEC + ts.tv_nsec;
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
	setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)); /* the kernel's receive time */
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
static int corrupt(unsigned char *frame, size_t len, unsigned long long *rng)
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
	if ((double)next_random(rng) >= p * 18446744073709551616.0)
		return 0;
	unsigned long long bit = next_random(rng) % (sctplen * 8);
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

/* ------------------------------------------------------------------ the bottleneck */

/* the IP header of a frame (after its virtio_net_hdr and Ethernet header), its version (4, 6; 0: none) */
static unsigned char *ip_header(unsigned char *frame, size_t len, int *version)
{
	const unsigned char *eth = frame + sizeof(struct virtio_net_hdr);
	unsigned char *ip = frame + sizeof(struct virtio_net_hdr) + 14;
	unsigned type;

	*version = 0;
	if (len < sizeof(struct virtio_net_hdr) + 14 + 40)
		return NULL;
	type = (unsigned)eth[12] << 8 | eth[13];
	if (type == ETH_P_IP && (ip[0] >> 4) == 4)
		*version = 4;
	else if (type == ETH_P_IPV6 && (ip[0] >> 4) == 6)
		*version = 6;
	return *version ? ip : NULL;
}

/* ECN (RFC 3168): if the frame is ECN-capable (ECT(0), ECT(1), or CE already), marks it CE
 * (IPv4: the header checksum updated, RFC 1624); 1 if it is marked now */
static int mark_ce(unsigned char *frame, size_t len)
{
	int v;
	unsigned char *ip = ip_header(frame, len, &v);

	if (v == 4 && (ip[1] & 3)) {
		unsigned old = (unsigned)ip[0] << 8 | ip[1], new = old | 3;
		unsigned long sum = (unsigned long)(~((unsigned)ip[10] << 8 | ip[11]) & 0xffff) + (~old & 0xffff) + new;
		unsigned short c;

		while (sum >> 16)
			sum = (sum & 0xffff) + (sum >> 16);
		c = (unsigned short)~sum;
		ip[1] |= 3;
		ip[10] = (unsigned char)(c >> 8);
		ip[11] = (unsigned char)c;
		return 1;
	}
	if (v == 6 && (ip[1] & 0x30)) {
		ip[1] |= 0x30;
		return 1;
	}
	return 0;
}

#define SLOT(d, i) (&(d)->s[(i) % QCAP])

static unsigned waiting(const struct dir *d)
{
	return d->tail - d->mid;
}

/* bytes on the wire of a frame (as tbf counts it: the Ethernet frame, without its virtio_net_hdr) */
static unsigned wire_bytes(const struct slot *s)
{
	return s->len - (unsigned)sizeof(struct virtio_net_hdr);
}

static long long serialisation(const struct dir *d, unsigned bytes)
{
	return d->rate > 0 ? (long long)llround(bytes * 8.0 * 1e9 / d->rate) : 0;
}

/* Takes the frame at mid off the queue at time t (the bottleneck's dequeue). */
static struct slot *take(struct dir *d, long long t)
{
	struct slot *s;

	if (d->mid == d->tail || SLOT(d, d->mid)->arrive > t)
		return NULL;
	s = SLOT(d, d->mid++);
	d->backlog -= wire_bytes(s);
	return s;
}

/* a CoDel drop of the frame just taken off the queue */
static void drop_at_dequeue(struct dir *d, struct slot *s, long long t)
{
	s->state = DROPPED;
	s->due = 0;
	d->aqm_drops++;
	if (trace)
		fprintf(trace, "dequeue %u %.3f sojourn_us=%.3f fate=codel count=%llu\n", s->number, t / 1e3,
			(t - s->arrive) / 1e3, d->codel_count);
}

/* with ecn: marks the frame just taken off the queue instead of a CoDel drop, if it is ECN-capable */
static int codel_mark(struct dir *d, struct slot *s, long long t)
{
	if (!d->aqm.ecn || !mark_ce(d->arena + s->off, s->len))
		return 0;
	d->marks++;
	if (trace)
		fprintf(trace, "mark %u %.3f count=%llu\n", s->number, t / 1e3, d->codel_count);
	return 1;
}

/* RFC 8289's dodequeue(): the next frame, and whether its sojourn time allows a drop */
static struct slot *codel_dodequeue(struct dir *d, long long t, int *ok_to_drop)
{
	struct slot *s = take(d, t);

	*ok_to_drop = 0;
	if (!s) {
		d->first_above = 0;
		return NULL;
	}
	long long sojourn = t - s->arrive;
	if (sojourn < d->aqm.target || d->backlog <= MAXPACKET) {
		d->first_above = 0;
	} else if (d->first_above == 0) {
		d->first_above = t + d->aqm.interval;
	} else if (t >= d->first_above) {
		*ok_to_drop = 1;
	}
	return s;
}

static long long control_law(const struct dir *d, long long t)
{
	return t + (long long)llround((double)d->aqm.interval / sqrt((double)d->codel_count));
}

/* RFC 8289's dequeue(): the frame to send (NULL: none left by time t), after the drops it decides */
static struct slot *codel_dequeue(struct dir *d, long long t)
{
	int ok;
	struct slot *s = codel_dodequeue(d, t, &ok);

	if (d->dropping) {
		if (!ok) {
			d->dropping = 0;
		} else {
			while (s && t >= d->drop_next && d->dropping) {
				d->codel_count++;
				if (codel_mark(d, s, t)) { /* marked: it goes out, the next drop as scheduled */
					d->drop_next = control_law(d, d->drop_next);
					break;
				}
				drop_at_dequeue(d, s, t);
				s = codel_dodequeue(d, t, &ok);
				if (!ok)
					d->dropping = 0;
				else
					d->drop_next = control_law(d, d->drop_next);
			}
		}
	} else if (s && ok) {
		unsigned long long delta = d->codel_count - d->codel_lastcount;

		d->dropping = 1;
		d->codel_count = 1;
		if (delta > 1 && t - d->drop_next < 16 * d->aqm.interval)
			d->codel_count = delta;
		if (!codel_mark(d, s, t)) {
			drop_at_dequeue(d, s, t);
			s = codel_dodequeue(d, t, &ok);
		}
		d->drop_next = control_law(d, t);
		d->codel_lastcount = d->codel_count;
	}
	return s;
}

/* PIE's drop probability, every tupdate (RFC 8033, 4.2 to 4.4) */
static void pie_update(struct dir *d, long long t)
{
	const struct aqm_cfg *a = &d->aqm;
	double qdelay = (double)d->qdelay / 1e9, old = (double)d->qdelay_old / 1e9;
	double p = a->alpha * (qdelay - (double)a->pie_target / 1e9) + a->beta * (qdelay - old);

	/* auto-tuning: smaller steps while the probability is small */
	if (d->p < 0.000001)
		p /= 2048;
	else if (d->p < 0.00001)
		p /= 512;
	else if (d->p < 0.0001)
		p /= 128;
	else if (d->p < 0.001)
		p /= 32;
	else if (d->p < 0.01)
		p /= 8;
	else if (d->p < 0.1)
		p /= 2;
	if (d->p >= 0.1 && p > 0.02)
		p = 0.02; /* no big steps at a high probability */
	d->p += p;
	if (qdelay > 0.25)
		d->p += 0.02; /* a queue above 250 ms: unresponsive traffic */
	if (d->qdelay == 0 && d->qdelay_old == 0)
		d->p *= 0.98; /* decay while idle */
	if (d->p < 0)
		d->p = 0;
	if (d->p > 1)
		d->p = 1;
	d->qdelay_old = d->qdelay;
	d->burst_allow = d->burst_allow > a->tupdate ? d->burst_allow - a->tupdate : 0;
	if (d->p == 0 && d->qdelay < a->pie_target / 2 && d->qdelay_old < a->pie_target / 2)
		d->burst_allow = a->max_burst;
	if (trace)
		fprintf(trace, "pie %.3f p=%.6f qdelay_us=%.3f burst_us=%.3f\n", t / 1e3, d->p, d->qdelay / 1e3,
			d->burst_allow / 1e3);
}

/* Runs the bottleneck up to time t: dequeues, serialisation, PIE's updates, in time order. */
static void service(struct dir *d, long long t)
{
	for (;;) {
		long long next = LLONG_MAX;
		struct slot *s;

		if (d->mid != d->tail) {
			next = SLOT(d, d->mid)->arrive;
			if (d->link_free > next)
				next = d->link_free;
		}
		if (d->aqm.kind == AQM_PIE && d->next_update <= t && d->next_update <= next) {
			/* the queue's delay now: the sojourn of the last frame dequeued, 0 if none waits */
			d->qdelay = d->mid == d->tail ? 0 : d->last_sojourn;
			pie_update(d, d->next_update);
			d->next_update += d->aqm.tupdate;
			if (d->mid == d->tail && d->p == 0 && d->qdelay_old == 0 &&
			    d->burst_allow == d->aqm.max_burst &&
			    d->next_update < t) /* idle: nothing changes until the next arrival */
				d->next_update += (t - d->next_update) / d->aqm.tupdate * d->aqm.tupdate;
			continue;
		}
		if (next > t)
			return;
		s = d->aqm.kind == AQM_CODEL ? codel_dequeue(d, next) : take(d, next);
		if (!s)
			continue; /* CoDel dropped what had arrived by then */
		d->last_sojourn = next - s->arrive;
		d->link_free = next + serialisation(d, wire_bytes(s));
		d->idle_since = d->link_free;
		s->state = SENDING;
		s->due = d->link_free + d->delay;
		if (trace)
			fprintf(trace, "dequeue %u %.3f sojourn_us=%.3f fate=sent done_us=%.3f\n", s->number,
				next / 1e3, (next - s->arrive) / 1e3, d->link_free / 1e3);
	}
}

/* RED's decision for a frame arriving at time t (Floyd & Jacobson 1993, with "gentle"): 0 none,
 * 1 drop (the average above the thresholds), 2 an early drop (ECN marks instead) */
static int red_drop(struct dir *d, long long t, unsigned q)
{
	const struct aqm_cfg *a = &d->aqm;
	double pb = 0, pa = 0;
	int drop = 0;

	if (q > 0 || d->link_free > t) {
		d->avg = (1 - a->wq) * d->avg + a->wq * q;
	} else {
		/* idle since idle_since: as if m typical packets had arrived to an empty queue meanwhile */
		long long s = serialisation(d, (unsigned)a->mean_bytes);
		double m = (double)(t - d->idle_since) / (double)(s > 0 ? s : 1);
		d->avg *= pow(1 - a->wq, m);
	}
	if (d->avg < a->min_th) {
		d->red_count = -1;
	} else if (d->avg < a->max_th || (a->gentle && d->avg < 2 * a->max_th)) {
		d->red_count++;
		pb = d->avg < a->max_th ? a->max_p * (d->avg - a->min_th) / (a->max_th - a->min_th)
					: a->max_p + (1 - a->max_p) * (d->avg - a->max_th) / a->max_th;
		pa = d->red_count * pb >= 1 ? 1 : fmin(1, pb / (1 - d->red_count * pb));
		drop = uniform(&d->rng_aqm) < pa ? 2 : 0;
	} else {
		pb = pa = 1;
		drop = 1;
	}
	if (trace) /* count: of the packets since the last drop, as pa used it */
		fprintf(trace, " avg=%.9f pb=%.9f pa=%.9f count=%lld", d->avg, pb, pa, d->red_count);
	if (drop)
		d->red_count = 0;
	return drop;
}

/* PIE's decision for a frame arriving (RFC 8033, 4.1): 0 none, 1 drop, 2 a drop that ECN marks
 * instead (p at most 10 %, RFC 8033 5.1) */
static int pie_drop(struct dir *d)
{
	const struct aqm_cfg *a = &d->aqm;
	int drop = 0;

	if (d->burst_allow > 0)
		drop = 0;
	else if (d->qdelay_old < a->pie_target / 2 && d->p < 0.2)
		drop = 0;
	else if (d->backlog <= 2 * MAXPACKET)
		drop = 0;
	else
		drop = uniform(&d->rng_aqm) < d->p ? (d->p <= 0.1 ? 2 : 1) : 0;
	if (trace)
		fprintf(trace, " p=%.6f", d->p);
	return drop;
}

/* The fate of a frame that arrived at time t (its bytes at the arena's wr): 0 queued, 1 not. */
static int arrive(struct dir *d, long long t, unsigned len)
{
	unsigned id = (unsigned)d->in;
	unsigned char *frame = d->arena + d->wr;

	if (t < d->last_arrive)
		t = d->last_arrive; /* time stamps of one socket do not go back; a clock step might */
	d->last_arrive = t;
	if (d->rate > 0)
		service(d, t); /* the bottleneck as it is when the frame arrives */
	d->in++;
	if (trace)
		fprintf(trace, "arrive %u %.3f %u", id, t / 1e3, len - (unsigned)sizeof(struct virtio_net_hdr));
	if (d->loss && next_random(&d->rng_loss) < d->loss) {
		d->lost++;
		if (trace)
			fprintf(trace, " fate=lost\n");
		return 1;
	}
	if (ber > 0 && !trace && corrupt(frame, len, &d->rng_ber))
		d->corrupted++;
	int aqm = 0;
	if (d->rate > 0) {
		if (trace)
			fprintf(trace, " q=%u", waiting(d));
		if (d->aqm.kind == AQM_RED)
			aqm = red_drop(d, t, waiting(d));
		else if (d->aqm.kind == AQM_PIE)
			aqm = pie_drop(d);
	}
	const char *fate = "queued";
	int rc = 1;
	if (aqm == 2 && d->aqm.ecn && waiting(d) < d->limit && d->tail - d->head < QCAP && mark_ce(frame, len)) {
		d->marks++;
		fate = "marked";
		aqm = 0;
	}
	if (aqm) {
		d->aqm_drops++;
		fate = "aqm";
	} else if (d->rate > 0 && waiting(d) >= d->limit) {
		d->tail_drops++;
		fate = "tail";
	} else if (d->tail - d->head >= QCAP) {
		d->dropped++;
		fate = "full";
	} else {
		struct slot *s = SLOT(d, d->tail++);
		s->arrive = t;
		s->number = id;
		s->off = d->wr;
		s->len = len;
		if (d->rate > 0) {
			s->state = QUEUED;
			d->backlog += wire_bytes(s);
		} else {
			s->state = SENDING;
			s->due = t + d->delay;
			d->mid = d->tail;
		}
		d->wr += (len + 63) & ~63u;
		rc = 0;
	}
	if (trace)
		fprintf(trace, " fate=%s\n", fate);
	return rc;
}

/* Room for the next frame at the arena's wr (FRAME_MAX contiguous bytes); 0 if there is none. */
static int room(struct dir *d)
{
	if (d->head == d->tail) {
		d->wr = 0;
		return 1;
	}
	unsigned rd = SLOT(d, d->head)->off;
	if (d->wr >= rd) {
		if (ARENA - d->wr >= FRAME_MAX)
			return 1;
		if (rd > FRAME_MAX) {
			d->wr = 0;
			return 1;
		}
		return 0;
	}
	return rd - d->wr > FRAME_MAX;
}

/* receive what is pending on 'from' into d, up to a batch of 64 (then what is due goes out
 * first: a whole backlog at once measured ten times more frames 1 ms late at 2 x 100 Mbit/s) */
static void pull(int from, struct dir *d)
{
	long long offset = realtime_ns() - now_ns(); /* the time stamps' clock against ours */
	int batch;

	for (batch = 0; batch < 64; batch++) {
		static unsigned char sink[FRAME_MAX];
		struct sockaddr_ll sll;
		char control[CMSG_SPACE(sizeof(struct timespec))];
		int full = !room(d);
		struct iovec iov = { full ? sink : d->arena + d->wr, FRAME_MAX };
		struct msghdr msg = { &sll, sizeof(sll), &iov, 1, control, sizeof(control), 0 };
		struct cmsghdr *c;
		long long t = 0;

		ssize_t n = recvmsg(from, &msg, MSG_DONTWAIT);
		if (n <= 0)
			return;
		if (sll.sll_pkttype == PACKET_OUTGOING)
			continue;
		if (full) {
			d->in++;
			d->dropped++;
			continue;
		}
		for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
				struct timespec ts;
				memcpy(&ts, CMSG_DATA(c), sizeof(ts));
				t = (long long)ts.tv_sec * NSEC + ts.tv_nsec - offset;
			}
		long long now = now_ns();
		if (t == 0 || t > now)
			t = now;
		arrive(d, t, (unsigned)n);
	}
}

static void count_lateness(struct dir *d, long long late)
{
	unsigned b = 0;

	if (late < 0)
		late = 0;
	while (b < NBUCKETS - 1 && late > late_edges_us[b] * 1000)
		b++;
	d->hist[b]++;
	if (late >= LATE_NS)
		d->late++;
	if (late > d->late_max)
		d->late_max = late;
	if (late > d->late_max_report)
		d->late_max_report = late;
}

/* send everything due by t from d to 'to' */
static void push(int to, struct dir *d, long long t)
{
	while (d->head != d->mid) {
		struct slot *s = SLOT(d, d->head);
		if (s->state == SENDING) {
			if (s->due > t)
				return;
			long long now = now_ns();
			if (send(to, d->arena + s->off, s->len, 0) < 0) {
				if (errno == EAGAIN || errno == ENOBUFS)
					return; /* retry on the next round */
				d->dropped++;
			} else {
				d->out++;
				count_lateness(d, now - s->due);
			}
		}
		d->head++;
	}
}

/* the next time something of d needs doing (a dequeue, a frame due), or LLONG_MAX */
static long long next_event(const struct dir *d)
{
	long long next = LLONG_MAX;

	if (d->head != d->mid) /* (push() takes dropped frames off at once) */
		next = SLOT(d, d->head)->state == SENDING ? SLOT(d, d->head)->due : 0;
	if (d->mid != d->tail) {
		long long dq = SLOT(d, d->mid)->arrive > d->link_free ? SLOT(d, d->mid)->arrive : d->link_free;
		if (dq < next)
			next = dq;
	}
	return next;
}

/* ------------------------------------------------------------------ options */

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

/* "A[,B]" -> a, b (b = a without a comma); -1 on a bad number */
static int parse_pair(char *text, double max, double *a, double *b)
{
	char *comma = strchr(text, ',');
	if (comma)
		*comma = '\0';
	return parse_number(text, max, a) || parse_number(comma ? comma + 1 : text, max, b) ? -1 : 0;
}

static int parse_seed(const char *text, unsigned long long *out)
{
	char *end;

	errno = 0;
	if (*text == '-')
		return -1;
	*out = strtoull(text, &end, 0);
	return errno || end == text || *end ? -1 : 0;
}

/* -a droptail | red[:wq=W,min=N,max=N,maxp=P,gentle=0|1,mean=BYTES] | codel[:target=MS,interval=MS]
 * | pie[:target=MS,tupdate=MS,alpha=A,beta=B,burst=MS]; a one-line error on bad input */
static int parse_aqm(char *text, struct aqm_cfg *a)
{
	char *params = strchr(text, ':'), *item, *save = NULL;

	*a = (struct aqm_cfg){ .kind = AQM_DROPTAIL,
			       .wq = 0.002,
			       .min_th = 20,
			       .max_th = 80,
			       .max_p = 0.02,
			       .mean_bytes = 1514,
			       .gentle = 1,
			       .target = 5000000,
			       .interval = 100000000,
			       .pie_target = 15000000,
			       .tupdate = 15000000,
			       .max_burst = 150000000,
			       .alpha = 0.125,
			       .beta = 1.25 };
	if (params)
		*params++ = '\0';
	unsigned k;
	for (k = 0; k < sizeof(aqm_names) / sizeof(aqm_names[0]) && strcmp(text, aqm_names[k]); k++)
		;
	if (k == sizeof(aqm_names) / sizeof(aqm_names[0])) {
		fprintf(stderr, "netperfmeter-delayline: -a wants droptail, red, codel or pie (not \"%s\")\n", text);
		return -1;
	}
	a->kind = (enum aqm_kind)k;
	for (item = params ? strtok_r(params, ",", &save) : NULL; item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		double v;
		struct {
			enum aqm_kind kind;
			const char *name;
			double max;
			double *d;
			long long *ns;
			int *flag;
		} keys[] = {
			{ AQM_RED, "wq", 1, &a->wq, NULL, NULL },
			{ AQM_RED, "min", 1e6, &a->min_th, NULL, NULL },
			{ AQM_RED, "max", 1e6, &a->max_th, NULL, NULL },
			{ AQM_RED, "maxp", 1, &a->max_p, NULL, NULL },
			{ AQM_RED, "mean", 65536, &a->mean_bytes, NULL, NULL },
			{ AQM_RED, "gentle", 1, NULL, NULL, &a->gentle },
			{ AQM_RED, "ecn", 1, NULL, NULL, &a->ecn },
			{ AQM_CODEL, "ecn", 1, NULL, NULL, &a->ecn },
			{ AQM_PIE, "ecn", 1, NULL, NULL, &a->ecn },
			{ AQM_CODEL, "target", 1e5, NULL, &a->target, NULL },
			{ AQM_CODEL, "interval", 1e5, NULL, &a->interval, NULL },
			{ AQM_PIE, "target", 1e5, NULL, &a->pie_target, NULL },
			{ AQM_PIE, "tupdate", 1e5, NULL, &a->tupdate, NULL },
			{ AQM_PIE, "alpha", 100, &a->alpha, NULL, NULL },
			{ AQM_PIE, "beta", 100, &a->beta, NULL, NULL },
			{ AQM_PIE, "burst", 1e5, NULL, &a->max_burst, NULL },
		};
		unsigned i, n = sizeof(keys) / sizeof(keys[0]);

		if (eq)
			*eq = '\0';
		for (i = 0; i < n && (keys[i].kind != a->kind || strcmp(keys[i].name, item)); i++)
			;
		if (i == n || !eq || parse_number(eq + 1, keys[i].max, &v)) {
			fprintf(stderr,
				"netperfmeter-delayline: -a %s: \"%s%s%s\" is not one of its parameters with a "
				"number in range (see netperfmeter-delayline(1))\n",
				text, item, eq ? "=" : "", eq ? eq + 1 : "");
			return -1;
		}
		if (keys[i].d)
			*keys[i].d = v;
		else if (keys[i].ns)
			*keys[i].ns = (long long)llround(v * 1e6); /* milliseconds */
		else
			*keys[i].flag = v != 0;
	}
	if (a->kind == AQM_RED && !(a->min_th < a->max_th && a->wq > 0 && a->max_p > 0 && a->mean_bytes >= 1)) {
		fprintf(stderr, "netperfmeter-delayline: -a red: wants 0 < wq, min < max, 0 < maxp and mean >= 1\n");
		return -1;
	}
	if ((a->kind == AQM_CODEL && (a->target <= 0 || a->interval <= 0)) ||
	    (a->kind == AQM_PIE && (a->pie_target <= 0 || a->tupdate <= 0))) {
		fprintf(stderr, "netperfmeter-delayline: -a %s: its times must be above 0\n", text);
		return -1;
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: netperfmeter-delayline [OPTIONS] IF_A IF_B DELAY_AB_MS [DELAY_BA_MS]\n"
		"       netperfmeter-delayline --trace [OPTIONS] [DELAY_MS]   (arrivals \"TIME_US BYTES\" on stdin)\n"
		"  -l, --loss=PERCENT[,PERCENT]  drop frames at random (each direction)\n"
		"  -b, --ber=BER                 bit errors in the SCTP part of UDP-encapsulated SCTP packets\n"
		"  -p, --ber-port=PORT[-LAST]    their UDP port or ports (default 9899)\n"
		"  -r, --rate=BITS[,BITS]        a bottleneck: serialisation at this rate in bit/s (0: none)\n"
		"  -q, --limit=PACKETS[,PACKETS] its queue (default 1000 packets)\n"
		"  -a, --aqm=AQM[:PARAMS]        its queue discipline: droptail (default), red, codel, pie\n"
		"  -s, --seed=SEED[,SEED_BA]     seed of the random decisions (each direction)\n"
		"  -c, --commands                read commands on stdin: \"seed AB BA\", \"counters\"\n"
		"  -t, --trace                   drive one direction from arrivals on stdin, print each fate\n"
		"  -R, --realtime[=PRIORITY]     run as a real-time process (SCHED_FIFO, default priority 10)\n"
		"  -h, --help                    this help\n"
		"  -V, --version                 the version\n");
}

static unsigned long long loss_threshold(double percent)
{
	/* P(next_random() < t) = t / 2^64 = percent / 100 */
	return percent >= 100.0 ? ~0ULL : (unsigned long long)(percent / 100.0 * 18446744073709551616.0);
}

static void *arena_alloc(void)
{
	void *p = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		perror("netperfmeter-delayline: mmap");
		exit(1);
	}
	return p;
}

static void init_dir(struct dir *d)
{
	d->s = calloc(QCAP, sizeof(struct slot));
	if (!d->s) {
		perror("netperfmeter-delayline: calloc");
		exit(1);
	}
	d->arena = arena_alloc();
	d->red_count = -1;
	d->burst_allow = d->aqm.max_burst;
	d->next_update = d->aqm.tupdate;
}

/* --trace: frames due by t leave (counted as sent, at their time) */
static void leave(struct dir *d, long long t)
{
	while (d->head != d->mid && SLOT(d, d->head)->due <= t) {
		if (SLOT(d, d->head)->state == SENDING)
			d->out++;
		d->head++;
	}
}

/* --trace: one direction (the A->B settings) from arrivals on stdin; every fate on stdout */
static int run_trace(struct dir *d)
{
	char line[256];
	unsigned long lineno = 0;

	trace = stdout;
	d->next_update = d->aqm.tupdate;
	while (fgets(line, sizeof(line), stdin)) {
		double us, bytes;
		unsigned ecn = 0;
		char extra;

		lineno++;
		if (line[0] == '#' || strspn(line, " \t\r\n") == strlen(line))
			continue;
		int fields = sscanf(line, "%lf %lf %u %c", &us, &bytes, &ecn, &extra);
		if ((fields != 2 && fields != 3) || !(us >= 0) || bytes < 54 ||
		    bytes > FRAME_MAX - sizeof(struct virtio_net_hdr) || ecn > 3) {
			fprintf(stderr,
				"netperfmeter-delayline: --trace line %lu: wants \"TIME_US BYTES [ECN]\" (54 to "
				"65536 bytes, ECN 0 to 3): %s",
				lineno, line);
			return 2;
		}
		long long t = (long long)llround(us * 1e3);
		if (t < d->last_arrive) {
			fprintf(stderr, "netperfmeter-delayline: --trace line %lu: arrival times must not decrease\n",
				lineno);
			return 2;
		}
		service(d, t);
		leave(d, t);
		if (room(d)) {
			/* an IPv4 frame with the given ECN field (all else zero) */
			unsigned char *f = d->arena + d->wr;
			memset(f, 0, sizeof(struct virtio_net_hdr) + 14 + 20);
			f[sizeof(struct virtio_net_hdr) + 12] = 0x08;
			f[sizeof(struct virtio_net_hdr) + 14] = 0x45;
			f[sizeof(struct virtio_net_hdr) + 15] = (unsigned char)ecn;
			arrive(d, t, (unsigned)bytes + (unsigned)sizeof(struct virtio_net_hdr));
		} else {
			d->in++;
			d->dropped++;
			fprintf(trace, "arrive %llu %.3f %.0f fate=full\n", d->in - 1, t / 1e3, bytes);
		}
	}
	while (d->mid != d->tail) { /* the rest of the queue */
		long long t = SLOT(d, d->mid)->arrive > d->link_free ? SLOT(d, d->mid)->arrive : d->link_free;
		service(d, t);
	}
	leave(d, LLONG_MAX);
	printf("counters ");
	print_dir(stdout, "a", "b", d);
	printf("\n");
	return 0;
}

static void command(struct dir *ab, struct dir *ba, const char *ifa, const char *ifb, char *line)
{
	unsigned long long sa, sb;
	char *tok = strtok(line, " \t\r\n"), *x = strtok(NULL, " \t\r\n"), *y = strtok(NULL, " \t\r\n");

	if (tok && !strcmp(tok, "counters") && !x) {
		print_counters(stdout, "counters", ifa, ifb, ab, ba);
	} else if (tok && !strcmp(tok, "seed") && x && y && !strtok(NULL, " \t\r\n") && !parse_seed(x, &sa) &&
		   !parse_seed(y, &sb)) {
		seed_dir(ab, sa);
		seed_dir(ba, sb);
		printf("seeded %llu %llu\n", sa, sb);
		fflush(stdout);
	} else {
		printf("error: commands are \"seed SEED_AB SEED_BA\" and \"counters\"\n");
		fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	static struct dir ab, ba;
	double delay_ab, delay_ba, loss_ab = 0, loss_ba = 0, rate_ab = 0, rate_ba = 0, limit_ab = 1000, limit_ba = 1000;
	unsigned long long seed_ab = 0x9e3779b97f4a7c15ULL, seed_ba;
	int seed_ba_given = 0, fa, fb, opt, commands = 0, tracing = 0, realtime = 0;
	struct aqm_cfg aqm;

	parse_aqm((char[]){ "droptail" }, &aqm);
	static const struct option longopts[] = { { "loss", required_argument, NULL, 'l' },
						  { "ber", required_argument, NULL, 'b' },
						  { "ber-port", required_argument, NULL, 'p' },
						  { "seed", required_argument, NULL, 's' },
						  { "rate", required_argument, NULL, 'r' },
						  { "limit", required_argument, NULL, 'q' },
						  { "aqm", required_argument, NULL, 'a' },
						  { "commands", no_argument, NULL, 'c' },
						  { "trace", no_argument, NULL, 't' },
						  { "realtime", optional_argument, NULL, 'R' },
						  { "help", no_argument, NULL, 'h' },
						  { "version", no_argument, NULL, 'V' },
						  { NULL, 0, NULL, 0 } };
	while ((opt = getopt_long(argc, argv, "l:b:p:s:r:q:a:ctR::hVv", longopts, NULL)) != -1) {
		switch (opt) {
		case 'l':
			if (parse_pair(optarg, 100, &loss_ab, &loss_ba)) {
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
			if (parse_number(optarg, 65535, &first) ||
			    parse_number(dash ? dash + 1 : optarg, 65535, &last) || first < 1 ||
			    first != (double)(unsigned)first || last != (double)(unsigned)last || last < first) {
				fprintf(stderr, "netperfmeter-delayline: -p wants a UDP port or a range FIRST-LAST "
						"(1 to 65535)\n");
				return 2;
			}
			ber_port = (unsigned)first;
			ber_last = (unsigned)last;
			break;
		}
		case 's': {
			char *comma = strchr(optarg, ',');
			if (comma)
				*comma = '\0';
			if (parse_seed(optarg, &seed_ab) || (comma && parse_seed(comma + 1, &seed_ba))) {
				fprintf(stderr,
					"netperfmeter-delayline: -s wants an unsigned number, or two separated by "
					"a comma\n");
				return 2;
			}
			seed_ba_given = comma != NULL;
			break;
		}
		case 'r':
			if (parse_pair(optarg, 1e12, &rate_ab, &rate_ba) || (rate_ab > 0 && rate_ab < 1000) ||
			    (rate_ba > 0 && rate_ba < 1000)) {
				fprintf(stderr,
					"netperfmeter-delayline: -r wants a rate in bit/s (1000 to 1e12, 0: none), "
					"or two separated by a comma\n");
				return 2;
			}
			break;
		case 'q':
			if (parse_pair(optarg, QCAP / 2, &limit_ab, &limit_ba) || limit_ab < 1 || limit_ba < 1 ||
			    limit_ab != floor(limit_ab) || limit_ba != floor(limit_ba)) {
				fprintf(stderr,
					"netperfmeter-delayline: -q wants a queue limit in packets (1 to %u), or two "
					"separated by a comma\n",
					QCAP / 2);
				return 2;
			}
			break;
		case 'a':
			if (parse_aqm(optarg, &aqm))
				return 2;
			break;
		case 'c':
			commands = 1;
			break;
		case 't':
			tracing = 1;
			break;
		case 'R': {
			double prio = 10;
			if (optarg && (parse_number(optarg, 99, &prio) || prio < 1 || prio != floor(prio))) {
				fprintf(stderr,
					"netperfmeter-delayline: -R wants a SCHED_FIFO priority from 1 to 99\n");
				return 2;
			}
			realtime = (int)prio;
			break;
		}
		case 'V':
		case 'v':
			printf("netperfmeter-delayline %s\n", NPM_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (aqm.kind != AQM_DROPTAIL && rate_ab == 0 && rate_ba == 0) {
		fprintf(stderr,
			"netperfmeter-delayline: -a %s needs a bottleneck (-r RATE): the queue builds up there\n",
			aqm_names[aqm.kind]);
		return 2;
	}
	int positional = argc - optind, want_min = tracing ? 0 : 3, want_max = tracing ? 1 : 4;
	if (positional < want_min || positional > want_max) {
		usage(stderr);
		return 2;
	}
	const char *d1 = tracing ? (positional ? argv[optind] : "0") : argv[optind + 2];
	const char *d2 = !tracing && positional == 4 ? argv[optind + 3] : d1;
	if (parse_number(d1, 1e6, &delay_ab) || parse_number(d2, 1e6, &delay_ba)) {
		fprintf(stderr, "netperfmeter-delayline: a delay is a number of milliseconds (0 to 1000000)\n");
		return 2;
	}
	if (!seed_ba_given) {
		unsigned long long s = seed_ab ^ 0x5eed5eedULL;
		seed_ba = next_random(&s);
	}
	ab.delay = (long long)(delay_ab * 1e6);
	ba.delay = (long long)(delay_ba * 1e6);
	ab.loss = loss_threshold(loss_ab);
	ba.loss = loss_threshold(loss_ba);
	ab.rate = rate_ab;
	ba.rate = rate_ba;
	ab.limit = (unsigned)limit_ab;
	ba.limit = (unsigned)limit_ba;
	ab.aqm = ba.aqm = aqm;
	if (rate_ab == 0)
		ab.aqm.kind = AQM_DROPTAIL;
	if (rate_ba == 0)
		ba.aqm.kind = AQM_DROPTAIL;
	seed_dir(&ab, seed_ab);
	seed_dir(&ba, seed_ba);
	init_dir(&ab);
	init_dir(&ba);
	if (tracing)
		return run_trace(&ab);

	ab.next_update = ba.next_update = now_ns() + aqm.tupdate;
	prctl(PR_SET_TIMERSLACK, 1UL); /* wake when asked, not up to 50 us later */
	if (realtime) {                /* the link runs when a frame is due, whatever else the host does */
		struct sched_param sp = { .sched_priority = realtime };
		if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) {
			fprintf(stderr, "netperfmeter-delayline: -R: cannot run as a real-time process: %s\n",
				strerror(errno));
			return 1;
		}
	}
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
	char cmdbuf[512];
	size_t cmdlen = 0;
	while (!stop) {
		struct pollfd pfd[3] = { { fa, POLLIN, 0 }, { fb, POLLIN, 0 }, { commands ? 0 : -1, POLLIN, 0 } };
		long long t = now_ns(), next = t + 100000000LL, e;
		struct timespec ts;

		if ((e = next_event(&ab)) < next)
			next = e;
		if ((e = next_event(&ba)) < next)
			next = e;
		if (next < t)
			next = t;
		ts.tv_sec = (next - t) / NSEC;
		ts.tv_nsec = (next - t) % NSEC;
		if (ppoll(pfd, 3, &ts, NULL) > 0) {
			if (pfd[0].revents & POLLIN)
				pull(fa, &ab);
			if (pfd[1].revents & POLLIN)
				pull(fb, &ba);
			if (pfd[2].revents & (POLLIN | POLLHUP)) {
				ssize_t n = read(0, cmdbuf + cmdlen, sizeof(cmdbuf) - 1 - cmdlen);
				if (n <= 0) {
					commands = 0; /* no more commands */
				} else {
					char *nl;
					cmdlen += (size_t)n;
					cmdbuf[cmdlen] = '\0';
					while ((nl = strchr(cmdbuf, '\n'))) {
						*nl = '\0';
						command(&ab, &ba, ifa, ifb, cmdbuf);
						cmdlen -= (size_t)(nl + 1 - cmdbuf);
						memmove(cmdbuf, nl + 1, cmdlen + 1);
					}
					if (cmdlen == sizeof(cmdbuf) - 1)
						cmdlen = 0; /* a line too long: dropped */
				}
			}
		}
		t = now_ns();
		/* the bottleneck up to now (a frame still in the socket that arrived before now finds
		 * the queue as it is now: at most the socket's backlog, microseconds, too late; waiting
		 * for it would leave due frames unsent, which measured 10 to 50 times more late frames
		 * at 2 x 100 Mbit/s) */
		service(&ab, t);
		service(&ba, t);
		push(fb, &ab, t);
		push(fa, &ba, t);
		if (report) {
			report = 0;
			print_counters(stdout, "counters", ifa, ifb, &ab, &ba);
		}
	}
	print_counters(stderr, "netperfmeter-delayline", ifa, ifb, &ab, &ba);
	return 0;
}
