/*
 * OLIA, Opportunistic Linked Increases (Khalili, Gast, Popovic, Le Boudec,
 * "MPTCP is not Pareto-optimal", IEEE/ACM ToN 2013; draft-khalili-mptcp-
 * congestion-control). For each ACKed segment on path r:
 *     w_r += (w_r/rtt_r^2) / (sum_p w_p/rtt_p)^2  +  alpha_r / w_r
 *          =  w_r / T_r^2                         +  alpha_r / w_r
 * with T_r = rtt_r * sum_p w_p/rtt_p, and, with P the set of paths,
 * M the paths with the largest window, B the presumably best paths
 * (largest ell_r/rtt_r^2, ell_r = max(segments between the last two
 * losses, segments since the last loss)):
 *     alpha_r =  1/(|P| |B\M|)   if r in B\M (B\M not empty)
 *     alpha_r = -1/(|P| |M|)     if r in M and B\M not empty
 *     alpha_r =  0               otherwise.
 * On loss w_r is halved (Reno).
 */
#ifndef NPM_CC_OLIA_H
#define NPM_CC_OLIA_H
#include "npm_cc_common.h"

#define NPM_OLIA_ACC (NPM_ACC_SUMS | NPM_ACC_OLIA)

/* The negative alpha term does not shrink a window below 4 segments (the
 * smallest that still gets a fast retransmit); only losses go lower. */
#define NPM_OLIA_MIN_CWND 4u

/*
 * alpha_r as sign (-1, 0, +1) and magnitude 1/(|P| k) (unsigned fixed
 * point): BPF has no signed division.
 */
NPM_CC_INLINE int npm_olia_alpha_sign(const struct npm_cc_acc *a, const struct npm_cc_path *self, npm_u64 *mag_fp)
{
	npm_u32 c = npm_cc_clamp_cwnd(self->cwnd);
	npm_u32 r = npm_cc_clamp_rtt(self->rtt_us);
	npm_u32 l = npm_cc_min_u32(self->ell, NPM_CC_ELL_CAP);
	npm_u32 collected = a->cnt_b > a->cnt_bm ? a->cnt_b - a->cnt_bm : 0;
	npm_u32 in_m = c == a->max_w;
	npm_u32 in_b = (npm_u64)l * a->best_rtt * a->best_rtt == (npm_u64)a->best_ell * r * r;

	*mag_fp = 0;
	if (collected == 0 || a->n == 0)
		return 0;
	if (in_b && !in_m) {
		*mag_fp = (npm_u64)NPM_CC_FP_ONE / ((npm_u64)a->n * collected);
		return 1;
	}
	if (in_m && a->cnt_m) {
		*mag_fp = (npm_u64)NPM_CC_FP_ONE / ((npm_u64)a->n * a->cnt_m);
		return -1;
	}
	return 0;
}

/* alpha_r, fixed point (signed). */
NPM_CC_INLINE npm_s64 npm_olia_alpha_fp(const struct npm_cc_acc *a, const struct npm_cc_path *self)
{
	npm_u64 mag;
	int sign = npm_olia_alpha_sign(a, self, &mag);
	return sign < 0 ? -(npm_s64)mag : (npm_s64)mag;
}

/* Per-ACKed-segment increase of path 'self' in congestion avoidance. */
NPM_CC_INLINE npm_s64 npm_olia_inc_fp(const struct npm_cc_acc *a, const struct npm_cc_path *self)
{
	npm_s64 t1 = (npm_s64)npm_cc_c_over_t2_fp(self->cwnd, npm_cc_t8(a, self->rtt_us));
	npm_u64 mag;
	int sign = npm_olia_alpha_sign(a, self, &mag);
	npm_s64 t2 = (npm_s64)(mag / npm_cc_clamp_cwnd(self->cwnd));
	return sign < 0 ? t1 - t2 : (sign > 0 ? t1 + t2 : t1);
}

/* Loss: halve the own window (Reno), but not below NPM_OLIA_MIN_CWND: a
 * path squeezed to 2 segments by alpha would recover losses only by RTO. */
NPM_CC_INLINE npm_u32 npm_olia_ssthresh(const struct npm_cc_path *self)
{
	return npm_cc_max_u32(npm_reno_ssthresh(self->cwnd), npm_cc_min_u32(NPM_OLIA_MIN_CWND, self->cwnd));
}

/* ell_r = max(l1, l2) from the loss-interval counters. */
NPM_CC_INLINE npm_u32 npm_olia_ell(npm_u32 between_last_losses, npm_u32 since_last_loss)
{
	return npm_cc_max_u32(between_last_losses, since_last_loss);
}
#endif
