/*
 * Minimal bulk sender/receiver for the congestion-control tests.
 *   npm_cc_traffic recv -p PORT [-m] [-c CC] -w WARMUP -e END
 *       accept one connection, count the bytes received between WARMUP and
 *       END seconds after accept, print "bytes=N window=S cc=NAME", exit.
 *   npm_cc_traffic send -a ADDR -p PORT [-m] [-c CC] -e END
 *       connect, send for END seconds, print "cc=NAME".
 *   npm_cc_traffic rtt -a ADDR [-b SRC] [-p CLOSED_PORT]
 *       time three TCP connects to a closed port (SYN -> RST = one RTT),
 *       print "rtt_ms=MIN" (also warms up ARP; there is no ping here).
 * -m uses MPTCP (IPPROTO_MPTCP). -c sets TCP_CONGESTION before connect() /
 * on the listener. Every blocking call has a timeout and a watchdog alarm
 * ends the process, so no test can hang on a stalled connection.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "npm_cc_traffic: watchdog expired\n";
	if (write(2, msg, sizeof(msg) - 1) < 0) {
	}
	_exit(3);
}

static int mksock(int mptcp, const char *cc)
{
	int fd = socket(AF_INET, SOCK_STREAM, mptcp ? IPPROTO_MPTCP : IPPROTO_TCP);
	int one = 1;

	if (fd < 0) {
		fprintf(stderr, "npm_cc_traffic: socket(%s): %s\n", mptcp ? "MPTCP" : "TCP", strerror(errno));
		exit(mptcp && errno == EPROTONOSUPPORT ? 77 : 1);
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (cc && *cc && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, strlen(cc)) != 0) {
		fprintf(stderr, "npm_cc_traffic: TCP_CONGESTION=%s: %s\n", cc, strerror(errno));
		exit(1);
	}
	return fd;
}

/* Abortive close (RST): the socket, and the congestion control it holds,
 * is freed at once instead of lingering in FIN_WAIT/TIME_WAIT inside a
 * namespace that is about to be deleted. */
static void close_now(int fd)
{
	struct linger lg = { 1, 0 };
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

static void getcc(int fd, char *buf, size_t len)
{
	socklen_t l = (socklen_t)len - 1;
	memset(buf, 0, len);
	if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, buf, &l) != 0)
		snprintf(buf, len, "?");
}

int main(int argc, char **argv)
{
	const char *mode, *addr = "127.0.0.1", *cc = NULL, *src = NULL;
	int port = 5001, mptcp = 0, opt;
	double warmup = 0, end = 10;
	char ccbuf[32];

	if (argc < 2) {
		fprintf(stderr, "usage: npm_cc_traffic recv|send [-a addr] [-p port] [-m] "
				"[-c cc] [-w warmup] [-e end]\n");
		return 2;
	}
	mode = argv[1];
	optind = 2;
	while ((opt = getopt(argc, argv, "a:b:p:mc:w:e:")) != -1) {
		switch (opt) {
		case 'a':
			addr = optarg;
			break;
		case 'b':
			src = optarg;
			break;
		case 'p':
			port = atoi(optarg);
			break;
		case 'm':
			mptcp = 1;
			break;
		case 'c':
			cc = optarg;
			break;
		case 'w':
			warmup = atof(optarg);
			break;
		case 'e':
			end = atof(optarg);
			break;
		default:
			return 2;
		}
	}
	signal(SIGALRM, on_alarm);
	signal(SIGPIPE, SIG_IGN);
	alarm((unsigned)end + 20);

	struct sockaddr_in sa;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)port);

	if (strcmp(mode, "recv") == 0) {
		int ls = mksock(mptcp, cc), fd;
		static char buf[1 << 16];
		unsigned long long total = 0, window = 0;
		struct pollfd pfd;
		double t0, t;

		sa.sin_addr.s_addr = htonl(INADDR_ANY);
		if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(ls, 4) != 0) {
			fprintf(stderr, "npm_cc_traffic: bind/listen %d: %s\n", port, strerror(errno));
			return 1;
		}
		printf("listening\n");
		fflush(stdout);
		pfd.fd = ls;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, 15000) != 1) {
			fprintf(stderr, "npm_cc_traffic: no connection within 15 s\n");
			return 1;
		}
		fd = accept(ls, NULL, NULL);
		if (fd < 0) {
			fprintf(stderr, "npm_cc_traffic: accept: %s\n", strerror(errno));
			return 1;
		}
		getcc(fd, ccbuf, sizeof(ccbuf));
		t0 = now();
		pfd.fd = fd;
		while ((t = now() - t0) < end) {
			int ms = (int)((end - t) * 1000) + 1;
			ssize_t n;
			if (poll(&pfd, 1, ms > 500 ? 500 : ms) <= 0)
				continue;
			n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (n == 0)
				break;
			if (n < 0) {
				if (errno == EAGAIN || errno == EINTR)
					continue;
				break;
			}
			total += (unsigned long long)n;
			t = now() - t0;
			if (t >= warmup && t < end)
				window += (unsigned long long)n;
		}
		printf("bytes=%llu window=%.3f total=%llu cc=%s\n", window, end - warmup, total, ccbuf);
		fflush(stdout);
		close_now(fd);
		close(ls);
		return 0;
	}
	if (strcmp(mode, "send") == 0) {
		int fd = mksock(mptcp, cc);
		static char buf[1 << 16];
		struct timeval tv = { 2, 0 };
		double t0;

		if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
			fprintf(stderr, "npm_cc_traffic: bad address %s\n", addr);
			return 2;
		}
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			fprintf(stderr, "npm_cc_traffic: connect %s:%d: %s\n", addr, port, strerror(errno));
			return 1;
		}
		getcc(fd, ccbuf, sizeof(ccbuf));
		printf("cc=%s\n", ccbuf);
		fflush(stdout);
		memset(buf, 'x', sizeof(buf));
		t0 = now();
		while (now() - t0 < end) {
			ssize_t n = send(fd, buf, sizeof(buf), 0);
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				break;
		}
		close_now(fd);
		return 0;
	}
	if (strcmp(mode, "rtt") == 0) {
		double best = -1;
		if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
			return 2;
		for (int i = 0; i < 4; i++) {
			int fd = socket(AF_INET, SOCK_STREAM, 0);
			struct timeval tv = { 3, 0 };
			double t0;
			setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
			if (src) {
				struct sockaddr_in b;
				memset(&b, 0, sizeof(b));
				b.sin_family = AF_INET;
				inet_pton(AF_INET, src, &b.sin_addr);
				if (bind(fd, (struct sockaddr *)&b, sizeof(b)) != 0)
					return 1;
			}
			t0 = now();
			if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno == ECONNREFUSED &&
			    i > 0) { /* first one may include ARP */
				double ms = (now() - t0) * 1000;
				if (best < 0 || ms < best)
					best = ms;
			}
			close(fd);
		}
		printf("rtt_ms=%.3f\n", best);
		return best < 0 ? 1 : 0;
	}
	fprintf(stderr, "npm_cc_traffic: unknown mode %s\n", mode);
	return 2;
}
