// SPDX-License-Identifier: GPL-2.0
/*
 * The SCTP INIT rate limit (init_filter.h): a socket filter on the userland SCTP stack's UDP
 * sockets. It lets through at most one INIT per interval_ns, bursts of up to
 * tolerance_ns / interval_ns (GCRA, the virtual-scheduling form of a token bucket, on the
 * kernel's monotonic clock), and every other datagram untouched. One bucket for all the
 * sockets it is attached to and all CPUs: the theoretical arrival time is advanced with
 * compare-and-exchange (Linux 5.12 or later).
 *
 * Built with clang -target bpf into a libbpf skeleton (src/sctp/CMakeLists.txt); only UAPI
 * types are used, so it needs no kernel BTF.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

/* A socket filter of a UDP socket sees the datagram from its UDP header on (offset 0), and
 * skb->len counts that header too. The SCTP packet follows: its common header, then the first
 * chunk, whose first byte is its type. */
#define UDP_HEADER 8
#define SCTP_COMMON_HEADER 12
#define FIRST_CHUNK_TYPE (UDP_HEADER + SCTP_COMMON_HEADER)
#define CHUNK_INIT 1
/* Compare-and-exchange attempts on the bucket before an INIT is dropped (INITs racing on
 * other CPUs each take a slot first). */
#define MAX_TRIES 4
/* The verdicts: the number of bytes to keep. */
#define KEEP_ALL -1
#define DROP 0

/* Set by user space before the program is loaded. 0: no limit configured, everything passes. */
const volatile __u64 interval_ns = 0;  /* 1e9 / INITs per second */
const volatile __u64 tolerance_ns = 0; /* burst * interval_ns */

/* Read by user space (InitRateFilter::state). Anonymous: the skeleton spells out its fields. */
struct {
	__u64 tat;     /* theoretical arrival time of the next INIT (ktime ns) */
	__u64 passed;  /* INITs let through */
	__u64 dropped; /* INITs dropped */
} bucket;

SEC("socket")
int npm_init_rate(struct __sk_buff *skb)
{
	__u8 type;

	if (skb->len < FIRST_CHUNK_TYPE + 1)
		return KEEP_ALL; /* too short for a chunk */
	if (bpf_skb_load_bytes(skb, FIRST_CHUNK_TYPE, &type, sizeof(type)) != 0 || type != CHUNK_INIT)
		return KEEP_ALL;
	if (interval_ns == 0)
		return KEEP_ALL;

	/* tat' = max(tat, now) + interval; the INIT conforms if tat' - now <= tolerance. The new
	 * tat is stored only if nobody changed it since it was read, so that INITs on several
	 * CPUs at once cannot both take the same slot. */
	const __u64 now = bpf_ktime_get_ns();
	__u64 tat = bucket.tat;
	for (int i = 0; i < MAX_TRIES; i++) {
		const __u64 next = (tat >= now ? tat : now) + interval_ns;
		if (next - now > tolerance_ns)
			break;
		const __u64 seen = __sync_val_compare_and_swap(&bucket.tat, tat, next);
		if (seen == tat) {
			__sync_fetch_and_add(&bucket.passed, 1);
			return KEEP_ALL;
		}
		tat = seen;
	}
	__sync_fetch_and_add(&bucket.dropped, 1);
	return DROP;
}
