/*
 * CMT/RPv1 (Dreibholz, Becke, Pulinthanath, Rathgeb, AINA 2010, eq. 5-10)
 * transferred to MPTCP subflows; windows in segments (MTU_P = 1 segment).
 * C = sum of windows, S = sum of slow-start thresholds of the flow.
 *   loss on P:  s_P = max(c_P - C/2, 4 * s_P/S, 1)  (then c_P = s_P, or
 *               1 after a timeout; the kernel does that part), never < NPM_RP_MIN_SSTHRESH (4);
 *               once per congestion event of the flow (npm_cc_rp_same_event)
 *   a sibling in CWR/Recovery/Loss counts with min(cwnd, ssthresh).
 *   slow start: c_P += min(1, acked) * s_P/S per ACKed segment
 *   cong. avoidance: c_P += s_P/S per window, i.e. s_P/(S c_P) per ACK.
 * An ssthresh not yet set (TCP_INFINITE_SSTHRESH) counts as the window.
 */
#ifndef NPM_CC_RPV1_H
#define NPM_CC_RPV1_H
#include "npm_cc_common.h"

#define NPM_RPV1_ACC (NPM_ACC_SUMS)

/* s_P/S, fixed point. */
NPM_CC_INLINE npm_u64 npm_rpv1_share_fp(const struct npm_cc_acc *a, const struct npm_cc_path *self)
{
	npm_u64 s = npm_cc_eff_ssthresh(self->ssthresh, npm_cc_clamp_cwnd(self->cwnd));
	npm_u64 S = npm_cc_max_u64(a->sum_ss, s);
	return (s << NPM_CC_FP_SHIFT) / S;
}

/* Slow start: increase per ACKed segment. */
NPM_CC_INLINE npm_u64 npm_rpv1_ss_inc_fp(const struct npm_cc_acc *a, const struct npm_cc_path *self)
{
	return npm_rpv1_share_fp(a, self);
}

/* Congestion avoidance: increase per ACKed segment. */
NPM_CC_INLINE npm_u64 npm_rpv1_inc_fp(const struct npm_cc_acc *a, const struct npm_cc_path *self)
{
	return npm_rpv1_share_fp(a, self) / npm_cc_clamp_cwnd(self->cwnd);
}

/* The paper's decrease (eq. 5/7 resp. its RPv2 analogue), in segments, >= 1. */
NPM_CC_INLINE npm_u32 npm_rpv1_decrease(const struct npm_cc_acc *a, const struct npm_cc_path *self)
{
	npm_u64 c = npm_cc_clamp_cwnd(self->cwnd);
	npm_u64 half = npm_cc_max_u64(a->sum_cwnd, c) / 2;
	npm_u64 s = npm_cc_eff_ssthresh(self->ssthresh, (npm_u32)c);
	npm_u64 S = npm_cc_max_u64(a->sum_ss, s);
	npm_u64 v1 = c > half ? c - half : 0;
	npm_u64 v2 = (4 * s) / S;
	npm_u64 v = npm_cc_max_u64(npm_cc_max_u64(v1, v2), 1);
	return (npm_u32)v;
}
/* ssthresh handed to Linux: once per congestion event, at least NPM_RP_MIN_SSTHRESH. */
NPM_CC_INLINE npm_u32 npm_rpv1_ssthresh(const struct npm_cc_acc *a, const struct npm_cc_path *self)
{
	if (npm_cc_rp_same_event(a, self))
		return npm_cc_max_u32(npm_cc_clamp_cwnd(self->cwnd), NPM_RP_MIN_SSTHRESH);
	return npm_cc_max_u32(npm_rpv1_decrease(a, self), NPM_RP_MIN_SSTHRESH);
}

#endif
