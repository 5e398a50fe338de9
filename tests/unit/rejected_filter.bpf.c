// SPDX-License-Identifier: GPL-2.0
/*
 * A socket filter the verifier must reject, for the error path of sctp::loadBpf (the INIT
 * filter's loader): it uses a map lookup's result without checking it for NULL, the commonest
 * mistake in a BPF program (the verifier: "R0 invalid mem access 'map_value_or_null'").
 * Built only for tests/unit/test_init_filter.cc.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

/* Datagrams per length. A hash map: its lookups may miss (an array's with a constant key in
 * range are known to hit since Linux 6.x, and the verifier lets them through unchecked). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, 64);
} datagrams SEC(".maps");

SEC("socket")
int npm_rejected(struct __sk_buff *skb)
{
	__u32 length = skb->len;
	__u64 *count = bpf_map_lookup_elem(&datagrams, &length);

	*count += 1; /* without checking count for NULL */
	return -1;
}
