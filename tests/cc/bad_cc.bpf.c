// SPDX-License-Identifier: GPL-2.0
/* A congestion control the verifier must reject (it writes tp->snd_una,
 * which a BPF CC may not touch): exercises netperfmeter-cc-loader's
 * "verifier rejected" error path. Never registered. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

SEC("struct_ops/bad_ssthresh")
__u32 BPF_PROG(bad_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	tp->snd_una = 0;
	return 2;
}

SEC("struct_ops/bad_cong_avoid")
void BPF_PROG(bad_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
}

SEC("struct_ops/bad_undo_cwnd")
__u32 BPF_PROG(bad_undo_cwnd, struct sock *sk)
{
	return 2;
}

SEC(".struct_ops")
struct tcp_congestion_ops npm_lia = {
	.ssthresh = (void *)bad_ssthresh,
	.cong_avoid = (void *)bad_cong_avoid,
	.undo_cwnd = (void *)bad_undo_cwnd,
	.name = "npm_lia",
};
