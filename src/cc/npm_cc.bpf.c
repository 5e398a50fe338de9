// SPDX-License-Identifier: GPL-2.0
/*
 * NetPerfMeter bundled congestion controls as BPF struct_ops:
 * npm_lia, npm_olia, npm_rpv1, npm_rpv2.
 *
 * On plain TCP (or an MPTCP subflow with fewer than two usable subflows)
 * every one of them behaves like Reno. On MPTCP subflows the callbacks
 * walk the sibling subflows (read only, at most NPM_CC_MAX_SUBFLOWS) via
 * icsk_ulp_data -> mptcp_subflow_context->conn -> mptcp_sock->conn_list
 * and apply the coupled arithmetic of npm_cc_{lia,olia,rpv1,rpv2}.h.
 * Writes go only to the own subflow (snd_cwnd, icsk_ca_priv).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "npm_cc_common.h"
#include "npm_cc_lia.h"
#include "npm_cc_olia.h"
#include "npm_cc_rpv1.h"
#include "npm_cc_rpv2.h"

char _license[] SEC("license") = "GPL";

#define NPM_TCP_CONG_NON_RESTRICTED 0x1
#define NPM_TCP_ESTABLISHED 1
#define NPM_TCP_CLOSE_WAIT 8
#define NPM_CA_MAGIC 0x4e504d43u /* "NPMC": sibling runs one of ours */

/* libbpf 1.1 has no bpf_core_cast(): the kfunc exists since Linux 6.2. */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;
#define npm_cast(ptr, type) ((type *)bpf_rdonly_cast((const void *)(ptr), bpf_core_type_id_kernel(type)))

/* TCP congestion-control kfuncs (Linux >= 5.13). */
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;
extern void tcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

/* Private per-subflow state in icsk_ca_priv (<= ICSK_CA_PRIV_SIZE). */
struct npm_ca {
	__u32 magic;
	__u32 l1;    /* OLIA: segments between the last two losses */
	__u32 since; /* OLIA: segments ACKed since the last loss   */
	__u32 rsv;
	__s64 acc; /* fixed-point fraction of a segment          */
};

enum { NPM_LIA = 0, NPM_OLIA = 1, NPM_RPV1 = 2, NPM_RPV2 = 3 };

/* Counters: [algo][0]=coupled, [1]=Reno fallback, [2]=walk hit the bound */
__u64 npm_stats[4][3] = {};

/*
 * Always 0, but a .bss value is unknown to the verifier. Adding it to the
 * freshly initialised accumulator keeps the verifier from tracking exact
 * constants through the walk (which marks them precise and defeats state
 * pruning: without it npm_olia's walk exceeds the 1M instruction limit).
 */
__u32 npm_opaque_zero = 0;

static __always_inline void npm_launder(struct npm_cc_acc *a)
{
	__u32 z = npm_opaque_zero;

	a->sum_x += z;
	a->sum_cwnd += z;
	a->sum_ss += z;
	a->n += z;
	a->b_cwnd += z;
	a->b_rtt += z;
	a->max_w += z;
	a->cnt_m += z;
	a->best_ell += z;
	a->best_rtt += z;
	a->cnt_b += z;
	a->cnt_bm += z;
}

/*
 * The arithmetic runs in global BPF functions: the verifier checks each of
 * them once with unknown inputs instead of once per path through the walk,
 * which keeps the walk's state space small (without this, npm_olia's
 * cong_avoid exceeds the 1M instruction limit).
 */
__noinline int npm_acc_add(struct npm_cc_acc *a, const struct npm_cc_path *p, __u32 algo)
{
	if (!a || !p)
		return 0;
	switch (algo) {
	case NPM_LIA:
		npm_cc_acc_add(a, p, NPM_LIA_ACC);
		break;
	case NPM_OLIA:
		npm_cc_acc_add(a, p, NPM_OLIA_ACC);
		break;
	default:
		npm_cc_acc_add(a, p, NPM_ACC_SUMS);
		break;
	}
	return 0;
}

/* Fixed-point increase per ACKed segment (ss: in slow start, RP only). */
__noinline __s64 npm_inc_fp(const struct npm_cc_acc *a, const struct npm_cc_path *self, __u32 algo, __u32 ss)
{
	if (!a || !self)
		return 0;
	switch (algo) {
	case NPM_LIA:
		return (__s64)npm_lia_inc_fp(a, self);
	case NPM_OLIA:
		return npm_olia_inc_fp(a, self);
	case NPM_RPV1:
		return ss ? (__s64)npm_rpv1_ss_inc_fp(a, self) : (__s64)npm_rpv1_inc_fp(a, self);
	default:
		return ss ? (__s64)npm_rpv2_ss_inc_fp(a, self) : (__s64)npm_rpv2_inc_fp(a, self);
	}
}

__noinline __u32 npm_rp_ssthresh(const struct npm_cc_acc *a, const struct npm_cc_path *self, __u32 algo)
{
	if (!a || !self)
		return 2;
	return algo == NPM_RPV1 ? npm_rpv1_ssthresh(a, self) : npm_rpv2_ssthresh(a, self);
}

static __always_inline struct tcp_sock *npm_tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *npm_csk(const struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

static __always_inline struct npm_ca *npm_ca(const struct sock *sk)
{
	return (struct npm_ca *)npm_csk(sk)->icsk_ca_priv;
}

static __always_inline int npm_in_slow_start(const struct tcp_sock *tp)
{
	return tp->snd_cwnd < tp->snd_ssthresh;
}

static __always_inline int npm_cwnd_limited(const struct sock *sk)
{
	const struct tcp_sock *tp = npm_tcp_sk(sk);

	if (npm_in_slow_start(tp))
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited);
}

/*
 * One bounded pass over the subflows of the own MPTCP connection.
 * Returns the number of usable subflows (0 on plain TCP).
 */
static __always_inline __u32 npm_collect(struct sock *sk, struct npm_cc_acc *acc, __u32 what, int algo)
{
	struct tcp_sock *tp = npm_tcp_sk(sk);
	struct mptcp_subflow_context *sf;
	struct mptcp_sock *msk;
	struct list_head *head, *pos;
	int i;

	npm_cc_acc_init(acc);
	npm_launder(acc);
	if (!BPF_CORE_READ_BITFIELD(tp, is_mptcp))
		return 0;
	sf = npm_cast(npm_csk(sk)->icsk_ulp_data, struct mptcp_subflow_context);
	if (!sf)
		return 0;
	msk = npm_cast(sf->conn, struct mptcp_sock);
	if (!msk)
		return 0;
	head = &msk->conn_list;
	pos = msk->conn_list.next;
	for (i = 0; i < NPM_CC_MAX_SUBFLOWS; i++) {
		struct mptcp_subflow_context *ctx;
		struct tcp_sock *t;
		struct npm_cc_path p;
		__u8 state;

		if (!pos || pos == head)
			break;
		/* 'node' is the first member of mptcp_subflow_context */
		ctx = npm_cast(pos, struct mptcp_subflow_context);
		pos = pos->next;
		t = npm_cast(ctx->tcp_sock, struct tcp_sock);
		if (!t)
			continue;
		state = t->inet_conn.icsk_inet.sk.__sk_common.skc_state;
		if (state != NPM_TCP_ESTABLISHED && state != NPM_TCP_CLOSE_WAIT)
			continue;
		p.cwnd = t->snd_cwnd;
		p.ssthresh = t->snd_ssthresh;
		p.ca_state = 0;
		if (algo == NPM_RPV1 || algo == NPM_RPV2) {
			struct inet_connection_sock *ic = &t->inet_conn;
			p.ca_state = BPF_CORE_READ_BITFIELD(ic, icsk_ca_state);
			p.cwnd = npm_cc_rp_cwnd(p.cwnd, p.ssthresh, p.ca_state);
		}
		p.rtt_us = t->srtt_us >> 3;
		p.ell = 0;
		if (what & NPM_ACC_OLIA) {
			__u64 w0 = t->inet_conn.icsk_ca_priv[0];
			__u64 w1 = t->inet_conn.icsk_ca_priv[1];
			__u64 ours = ((__u32)w0 == NPM_CA_MAGIC);
			p.ell = (__u32)npm_cc_sel(ours, npm_olia_ell((__u32)(w0 >> 32), (__u32)w1), 0);
		}
		if (p.rtt_us == 0)
			continue; /* no RTT sample yet */
		npm_acc_add(acc, &p, algo);
	}
	if (i == NPM_CC_MAX_SUBFLOWS && pos && pos != head)
		__sync_fetch_and_add(&npm_stats[algo][2], 1);
	return acc->n;
}

static __always_inline void npm_self(const struct sock *sk, struct npm_cc_path *p)
{
	const struct tcp_sock *tp = npm_tcp_sk(sk);
	const struct npm_ca *ca = npm_ca(sk);

	p->cwnd = tp->snd_cwnd;
	p->ssthresh = tp->snd_ssthresh;
	p->rtt_us = tp->srtt_us >> 3;
	p->ell = npm_olia_ell(ca->l1, ca->since);
	p->ca_state = BPF_CORE_READ_BITFIELD(npm_csk(sk), icsk_ca_state);
}

static __always_inline void npm_init_common(struct sock *sk)
{
	struct npm_ca *ca = npm_ca(sk);

	ca->magic = NPM_CA_MAGIC;
	ca->l1 = 0;
	ca->since = 0;
	ca->rsv = 0;
	ca->acc = 0;
}

static __always_inline __u32 npm_acc_mask(int algo)
{
	switch (algo) {
	case NPM_LIA:
		return NPM_LIA_ACC;
	case NPM_OLIA:
		return NPM_OLIA_ACC;
	case NPM_RPV1:
		return NPM_RPV1_ACC;
	default:
		return NPM_RPV2_ACC;
	}
}

static __always_inline void npm_cong_avoid(struct sock *sk, __u32 acked, int algo)
{
	struct tcp_sock *tp = npm_tcp_sk(sk);
	struct npm_ca *ca = npm_ca(sk);
	struct npm_cc_acc acc;
	struct npm_cc_path self;
	__s64 inc;
	__u32 cwnd;

	if (algo == NPM_OLIA) {
		__u32 s = ca->since + acked;
		ca->since = s < ca->since ? 0xffffffffu : s;
	}
	if (!npm_cwnd_limited(sk))
		return;

	if (npm_collect(sk, &acc, npm_acc_mask(algo), algo) < 2) {
		/* Reno: plain TCP or not (yet) two usable subflows */
		__sync_fetch_and_add(&npm_stats[algo][1], 1);
		if (npm_in_slow_start(tp)) {
			acked = tcp_slow_start(tp, acked);
			if (!acked)
				return;
		}
		tcp_cong_avoid_ai(tp, tp->snd_cwnd, acked);
		return;
	}
	__sync_fetch_and_add(&npm_stats[algo][0], 1);
	npm_self(sk, &self);

	if (npm_in_slow_start(tp)) {
		if (algo == NPM_LIA || algo == NPM_OLIA) {
			acked = tcp_slow_start(tp, acked);
			if (!acked)
				return;
		} else {
			inc = npm_inc_fp(&acc, &self, algo, 1);
			cwnd = npm_cc_apply(tp->snd_cwnd, &ca->acc, inc, acked, tp->snd_cwnd_clamp);
			if (cwnd > tp->snd_ssthresh)
				cwnd = tp->snd_ssthresh;
			tp->snd_cwnd = cwnd;
			return;
		}
	}
	inc = npm_inc_fp(&acc, &self, algo, 0);
	tp->snd_cwnd = npm_cc_apply_floor(tp->snd_cwnd, &ca->acc, inc, acked, tp->snd_cwnd_clamp,
					  algo == NPM_OLIA ? NPM_OLIA_MIN_CWND : 2);
}

static __always_inline __u32 npm_ssthresh(struct sock *sk, int algo)
{
	struct tcp_sock *tp = npm_tcp_sk(sk);
	struct npm_ca *ca = npm_ca(sk);
	struct npm_cc_acc acc;
	struct npm_cc_path self;

	ca->acc = 0;
	if (algo == NPM_OLIA) {
		ca->l1 = ca->since;
		ca->since = 0;
	}
	if (algo == NPM_LIA)
		return npm_reno_ssthresh(tp->snd_cwnd);
	/* the walk is cheap with the OLIA mask reduced to the sums */
	if (npm_collect(sk, &acc, algo == NPM_OLIA ? NPM_ACC_SUMS : npm_acc_mask(algo), algo) < 2)
		return npm_reno_ssthresh(tp->snd_cwnd);
	npm_self(sk, &self);
	if (algo == NPM_OLIA)
		return npm_olia_ssthresh(&self);
	return npm_rp_ssthresh(&acc, &self, algo);
}

#define NPM_DEFINE_CC(NAME, ALGO)                                                     \
	SEC("struct_ops/" #NAME "_init")                                              \
	void BPF_PROG(NAME##_bpf_init, struct sock *sk)                               \
	{                                                                             \
		npm_init_common(sk);                                                  \
	}                                                                             \
	SEC("struct_ops/" #NAME "_ssthresh")                                          \
	__u32 BPF_PROG(NAME##_bpf_ssthresh, struct sock *sk)                          \
	{                                                                             \
		return npm_ssthresh(sk, ALGO);                                        \
	}                                                                             \
	SEC("struct_ops/" #NAME "_cong_avoid")                                        \
	void BPF_PROG(NAME##_bpf_cong_avoid, struct sock *sk, __u32 ack, __u32 acked) \
	{                                                                             \
		npm_cong_avoid(sk, acked, ALGO);                                      \
	}                                                                             \
	SEC("struct_ops/" #NAME "_undo_cwnd")                                         \
	__u32 BPF_PROG(NAME##_bpf_undo_cwnd, struct sock *sk)                         \
	{                                                                             \
		return tcp_reno_undo_cwnd(sk);                                        \
	}                                                                             \
	SEC(".struct_ops")                                                            \
	struct tcp_congestion_ops NAME = {                                            \
		.init = (void *)NAME##_bpf_init,                                      \
		.ssthresh = (void *)NAME##_bpf_ssthresh,                              \
		.cong_avoid = (void *)NAME##_bpf_cong_avoid,                          \
		.undo_cwnd = (void *)NAME##_bpf_undo_cwnd,                            \
		.flags = NPM_TCP_CONG_NON_RESTRICTED,                                 \
		.name = #NAME,                                                        \
	};

NPM_DEFINE_CC(npm_lia, NPM_LIA)
NPM_DEFINE_CC(npm_olia, NPM_OLIA)
NPM_DEFINE_CC(npm_rpv1, NPM_RPV1)
NPM_DEFINE_CC(npm_rpv2, NPM_RPV2)
