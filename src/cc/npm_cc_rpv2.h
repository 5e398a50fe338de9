/*
 * CMT/RPv2 (Dreibholz, Becke, Adhari, Rathgeb, ConTEL 2011) transferred to
 * MPTCP subflows; windows in segments. The increase is scaled by the path's
 * bandwidth share  i_P = (c_P/RTT_P) / sum_i (c_i/RTT_i) = c_P / T_P  with
 * T_P = RTT_P * sum_i c_i/RTT_i; a loss tries to halve the flow's
 * *bandwidth* B = sum_i c_i/RTT_i (not its total window) by taking
 * RTT_P * B/2 = T_P/2 off path P:
 *   loss on P:  s_P = max(c_P - T_P/2, 4 * i_P, 1), never < NPM_RP_MIN_SSTHRESH (4), once per
 *               congestion event of the flow (npm_cc_rp_same_event)
 *   a sibling in CWR/Recovery/Loss counts with min(cwnd, ssthresh).
 *   slow start: c_P += i_P per ACKed segment
 *   cong. avoidance: c_P += i_P per window = 1/T_P per ACKed segment.
 */
#ifndef NPM_CC_RPV2_H
#define NPM_CC_RPV2_H
#include "npm_cc_common.h"

#define NPM_RPV2_ACC (NPM_ACC_SUMS)

/* Bandwidth share i_P, fixed point (<= 1). */
NPM_CC_INLINE npm_u64 npm_rpv2_share_fp(const struct npm_cc_acc *a, const struct npm_cc_path *self)
{
	npm_u64 c = npm_cc_clamp_cwnd(self->cwnd);
	npm_u64 t8 = npm_cc_t8(a, self->rtt_us);
	npm_u64 v;
	if (t8 == 0)
		return NPM_CC_FP_ONE;
	v = (c << (NPM_CC_FP_SHIFT + NPM_CC_T_SHIFT)) / t8;
	return npm_cc_min_u64(v, NPM_CC_FP_ONE);
}

NPM_CC_INLINE npm_u64 npm_rpv2_ss_inc_fp(const struct npm_cc_acc *a, const struct npm_cc_path *self)
{
	return npm_rpv2_share_fp(a, self);
}

NPM_CC_INLINE npm_u64 npm_rpv2_inc_fp(const struct npm_cc_acc *a, const struct npm_cc_path *self)
{
	npm_u64 t8 = npm_cc_t8(a, self->rtt_us);
	npm_u64 reno = npm_reno_inc_fp(self->cwnd);
	if (t8 == 0)
		return reno;
	/* 1/T_P can not exceed 1/c_P since T_P >= c_P; clamp rounding */
	return npm_cc_min_u64(((npm_u64)1 << (NPM_CC_FP_SHIFT + NPM_CC_T_SHIFT)) / t8, reno);
}

/* The paper's decrease (eq. 5/7 resp. its RPv2 analogue), in segments, >= 1. */
NPM_CC_INLINE npm_u32 npm_rpv2_decrease(const struct npm_cc_acc *a, const struct npm_cc_path *self)
{
	npm_u64 c = npm_cc_clamp_cwnd(self->cwnd);
	npm_u64 half_t = npm_cc_t8(a, self->rtt_us) >> (NPM_CC_T_SHIFT + 1);
	npm_u64 v1 = c > half_t ? c - half_t : 0;
	npm_u64 v2 = (4 * npm_rpv2_share_fp(a, self)) >> NPM_CC_FP_SHIFT;
	npm_u64 v = npm_cc_max_u64(npm_cc_max_u64(v1, v2), 1);
	return (npm_u32)v;
}
/* ssthresh handed to Linux: once per congestion event, at least NPM_RP_MIN_SSTHRESH. */
NPM_CC_INLINE npm_u32 npm_rpv2_ssthresh(const struct npm_cc_acc *a, const struct npm_cc_path *self)
{
	if (npm_cc_rp_same_event(a, self))
		return npm_cc_max_u32(npm_cc_clamp_cwnd(self->cwnd), NPM_RP_MIN_SSTHRESH);
	return npm_cc_max_u32(npm_rpv2_decrease(a, self), NPM_RP_MIN_SSTHRESH);
}

#endif
