/*
 * LIA, the MPTCP Linked Increases Algorithm (RFC 6356, section 3).
 *
 * For each ACK on subflow i acknowledging one segment, cwnd_i grows by
 *     min( alpha / cwnd_total, 1 / cwnd_i )
 * with alpha = cwnd_total * max_k(cwnd_k/rtt_k^2) / (sum_k cwnd_k/rtt_k)^2,
 * so alpha/cwnd_total = cwnd_b / T_b^2 where b maximises cwnd/rtt^2 and
 * T_b = rtt_b * sum_k cwnd_k/rtt_k. Losses halve only the own subflow.
 * Slow start is unchanged (RFC 6356 only couples congestion avoidance).
 */
#ifndef NPM_CC_LIA_H
#define NPM_CC_LIA_H
#include "npm_cc_common.h"

#define NPM_LIA_ACC (NPM_ACC_SUMS | NPM_ACC_LIA)

/* alpha/cwnd_total (the coupled per-ACK increase), fixed point. */
NPM_CC_INLINE npm_u64 npm_lia_coupled_fp(const struct npm_cc_acc *a)
{
	return npm_cc_c_over_t2_fp(a->b_cwnd, npm_cc_t8(a, a->b_rtt));
}

/* alpha itself, fixed point (diagnostics and tests). */
NPM_CC_INLINE npm_u64 npm_lia_alpha_fp(const struct npm_cc_acc *a)
{
	return npm_lia_coupled_fp(a) * a->sum_cwnd;
}

/* Per-ACKed-segment increase of subflow 'self' in congestion avoidance. */
NPM_CC_INLINE npm_u64 npm_lia_inc_fp(const struct npm_cc_acc *a, const struct npm_cc_path *self)
{
	return npm_cc_min_u64(npm_lia_coupled_fp(a), npm_reno_inc_fp(self->cwnd));
}

/* Multiplicative decrease: the own subflow only, as Reno. */
NPM_CC_INLINE npm_u32 npm_lia_ssthresh(const struct npm_cc_path *self)
{
	return npm_reno_ssthresh(self->cwnd);
}
#endif
