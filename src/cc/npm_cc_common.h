/*
 * NetPerfMeter bundled congestion controls: shared fixed-point arithmetic.
 *
 * Pure functions only (no kernel access). This header is compiled into the
 * BPF struct_ops programs (clang -target bpf, after vmlinux.h) and into the
 * host unit tests (C++), so it must stay valid C and C++ and loop-free.
 *
 * Units: congestion windows and slow-start thresholds in segments (as in
 * struct tcp_sock), RTTs in microseconds, per-ACK window increases in
 * fixed point with NPM_CC_FP_SHIFT fractional bits ("segments per ACKed
 * segment"). The MTU of the SCTP formulas is one segment here.
 */
#ifndef NPM_CC_COMMON_H
#define NPM_CC_COMMON_H

#if defined(__bpf__) || defined(__BPF__)
typedef __u32 npm_u32;
typedef __u64 npm_u64;
typedef __s64 npm_s64;
#else
#include <stdint.h>
typedef uint32_t npm_u32;
typedef uint64_t npm_u64;
typedef int64_t npm_s64;
#endif

#ifndef NPM_CC_INLINE
#define NPM_CC_INLINE static inline __attribute__((always_inline))
#endif

#define NPM_CC_FP_SHIFT 20
#define NPM_CC_FP_ONE ((npm_s64)1 << NPM_CC_FP_SHIFT)
#define NPM_CC_MAX_SUBFLOWS 8           /* bound of every sibling walk   */
#define NPM_CC_CWND_CAP (1u << 20)      /* windows are clamped to this   */
#define NPM_CC_RTT_CAP_US (1u << 21)    /* RTTs are clamped to [1, cap]  */
#define NPM_CC_ELL_CAP (1u << 20)       /* OLIA loss interval clamp      */
#define NPM_CC_INF_SSTHRESH 0x7fffffffu /* TCP_INFINITE_SSTHRESH         */
#define NPM_CC_MIN_SSTHRESH 2u          /* Linux never goes below 2      */
/* CMT/RP floor: 4 segments, the smallest window that still gets three
 * duplicate ACKs for a fast retransmit. With SCTP's 1-MTU floor a subflow
 * sits at 1-2 segments, recovers losses only by RTO and stalls the MPTCP
 * connection behind it (head-of-line blocking at the data level). */
#define NPM_RP_MIN_SSTHRESH 4u
#define NPM_CC_X_SHIFT 24 /* x_i = cwnd_i * 2^24 / rtt_i   */
#define NPM_CC_T_SHIFT 8  /* T values carry 8 fraction bits */

/* One subflow (path) as seen by the algorithms. */
struct npm_cc_path {
	npm_u32 cwnd;     /* congestion window, segments                  */
	npm_u32 ssthresh; /* slow-start threshold, segments               */
	npm_u32 rtt_us;   /* smoothed RTT, microseconds                   */
	npm_u32 ell;      /* OLIA: segments between/since losses          */
	npm_u32 ca_state; /* TCP_CA_Open 0 .. CWR 2, Recovery 3, Loss 4   */
};

/* Accumulator filled by one pass over all usable subflows (own included). */
struct npm_cc_acc {
	npm_u64 sum_x;    /* sum of cwnd_i * 2^24 / rtt_i                   */
	npm_u64 sum_cwnd; /* C = sum of cwnd_i                              */
	npm_u64 sum_ss;   /* S = sum of effective ssthresh_i                */
	npm_u32 n;        /* number of usable subflows                      */
	npm_u32 b_cwnd;   /* LIA: path maximising cwnd/rtt^2               */
	npm_u32 b_rtt;
	npm_u32 max_w; /* OLIA: largest window, and how many have it     */
	npm_u32 cnt_m;
	npm_u32 best_ell; /* OLIA: path maximising ell/rtt^2                */
	npm_u32 best_rtt;
	npm_u32 cnt_b;      /* |B|                                            */
	npm_u32 cnt_bm;     /* |B intersect M|                                */
	npm_u32 n_reducing; /* subflows in CWR/Recovery/Loss                  */
};

/* What an accumulation pass must compute (constant-folded in BPF). */
#define NPM_ACC_SUMS 1u /* sum_x, sum_cwnd, sum_ss                    */
#define NPM_ACC_LIA 2u  /* b_cwnd/b_rtt                               */
#define NPM_ACC_OLIA 4u /* M and B sets                               */

/*
 * Branch-free helpers: BPF has no conditional move, and every branch in
 * the sibling walk multiplies the verifier's work. NPM_CC_OPAQUE stops the
 * compiler from turning the arithmetic back into a branch.
 */
#if defined(__bpf__) || defined(__BPF__)
#define NPM_CC_OPAQUE(x) asm volatile("" : "+r"(x))
#else
#define NPM_CC_OPAQUE(x) \
	do {             \
	} while (0)
#endif

/* 1 if a > b else 0; a, b < 2^63. */
NPM_CC_INLINE npm_u64 npm_cc_gt(npm_u64 a, npm_u64 b)
{
	npm_u64 m = (b - a) >> 63;
	NPM_CC_OPAQUE(m);
	return m;
}

/* m (0 or 1) ? x : y */
NPM_CC_INLINE npm_u64 npm_cc_sel(npm_u64 m, npm_u64 x, npm_u64 y)
{
	return y ^ ((x ^ y) & ((npm_u64)0 - m));
}

NPM_CC_INLINE npm_u32 npm_cc_min_u32(npm_u32 a, npm_u32 b)
{
	return (npm_u32)npm_cc_sel(npm_cc_gt(a, b), b, a);
}
NPM_CC_INLINE npm_u32 npm_cc_max_u32(npm_u32 a, npm_u32 b)
{
	return (npm_u32)npm_cc_sel(npm_cc_gt(a, b), a, b);
}
/* 64-bit variants: a, b < 2^63 */
NPM_CC_INLINE npm_u64 npm_cc_min_u64(npm_u64 a, npm_u64 b)
{
	return npm_cc_sel(npm_cc_gt(a, b), b, a);
}
NPM_CC_INLINE npm_u64 npm_cc_max_u64(npm_u64 a, npm_u64 b)
{
	return npm_cc_sel(npm_cc_gt(a, b), a, b);
}

NPM_CC_INLINE npm_u32 npm_cc_clamp_cwnd(npm_u32 c)
{
	return npm_cc_min_u32(npm_cc_max_u32(c, 1), NPM_CC_CWND_CAP);
}

NPM_CC_INLINE npm_u32 npm_cc_clamp_rtt(npm_u32 r)
{
	return npm_cc_min_u32(npm_cc_max_u32(r, 1), NPM_CC_RTT_CAP_US);
}

/* ssthresh used in S: an unset (infinite) threshold counts as the window. */
NPM_CC_INLINE npm_u32 npm_cc_eff_ssthresh(npm_u32 ssthresh, npm_u32 cwnd)
{
	npm_u32 s = (npm_u32)npm_cc_sel(npm_cc_gt(ssthresh, NPM_CC_INF_SSTHRESH - 1), cwnd, ssthresh);
	return npm_cc_clamp_cwnd(s);
}

/* Saturating a*r for r <= NPM_CC_RTT_CAP_US (no 128-bit arithmetic in BPF). */
NPM_CC_INLINE npm_u64 npm_cc_mul_rtt_sat(npm_u64 a, npm_u32 r)
{
	if (a >> (63 - 21))
		return ~(npm_u64)0;
	return a * r;
}

/*
 * Window of a sibling as the CMT/RP formulas see it. In SCTP a fast
 * retransmit sets c_P = s_P at once (eq. 6); Linux instead lowers snd_cwnd
 * gradually (PRR) while a subflow is in CWR/Recovery/Loss (ca_state >= 2).
 * Such a subflow therefore counts with min(cwnd, ssthresh), its window
 * after the reduction already decided.
 */
#define NPM_CC_CA_CWR 2u
NPM_CC_INLINE npm_u32 npm_cc_rp_cwnd(npm_u32 cwnd, npm_u32 ssthresh, npm_u32 ca_state)
{
	npm_u64 reducing = npm_cc_gt(ca_state, NPM_CC_CA_CWR - 1);
	return (npm_u32)npm_cc_sel(reducing, npm_cc_min_u32(cwnd, ssthresh), cwnd);
}

/*
 * CMT/RP decrease, once per congestion event of the flow. When a sibling is
 * already reducing (CWR/Recovery/Loss) after a loss within the last round
 * trip, the flow-level reduction (C/2, resp. half the bandwidth) has been
 * taken for this event; a further loss on path P in the same event leaves
 * s_P = c_P instead of halving the flow again, just as TCP reduces once per
 * window of losses. (SCTP sets c_P = s_P at once; Linux's PRR spreads it.)
 */
NPM_CC_INLINE npm_u32 npm_cc_rp_same_event(const struct npm_cc_acc *a, const struct npm_cc_path *self)
{
	npm_u32 self_reducing = (npm_u32)npm_cc_gt(self->ca_state, NPM_CC_CA_CWR - 1);
	return a->n_reducing > self_reducing;
}

NPM_CC_INLINE void npm_cc_acc_init(struct npm_cc_acc *a)
{
	a->sum_x = 0;
	a->sum_cwnd = 0;
	a->sum_ss = 0;
	a->n = 0;
	a->b_cwnd = 0;
	a->b_rtt = 1;
	a->max_w = 0;
	a->cnt_m = 0;
	a->best_ell = 0;
	a->best_rtt = 1;
	a->cnt_b = 0;
	a->cnt_bm = 0;
	a->n_reducing = 0;
}

/* Add one usable subflow. 'what' is a constant mask of NPM_ACC_*. */
NPM_CC_INLINE void npm_cc_acc_add(struct npm_cc_acc *a, const struct npm_cc_path *p, npm_u32 what)
{
	npm_u32 c = npm_cc_clamp_cwnd(p->cwnd);
	npm_u32 r = npm_cc_clamp_rtt(p->rtt_us);

	a->n++;
	if (what & NPM_ACC_SUMS) {
		a->sum_x += (((npm_u64)c << NPM_CC_X_SHIFT) + r / 2) / r; /* rounded */
		a->sum_cwnd += c;
		a->sum_ss += npm_cc_eff_ssthresh(p->ssthresh, c);
		a->n_reducing += (npm_u32)npm_cc_gt(p->ca_state, NPM_CC_CA_CWR - 1);
	}
	if (what & NPM_ACC_LIA) {
		/* c/r^2 > b_cwnd/b_rtt^2, cross-multiplied (fits: 2^20 * 2^42);
		 * the initial b_cwnd = 0 makes the first path win. */
		npm_u64 gt = npm_cc_gt((npm_u64)c * a->b_rtt * a->b_rtt, (npm_u64)a->b_cwnd * r * r);
		a->b_cwnd = (npm_u32)npm_cc_sel(gt, c, a->b_cwnd);
		a->b_rtt = (npm_u32)npm_cc_sel(gt, r, a->b_rtt);
	}
	if (what & NPM_ACC_OLIA) {
		/* B: largest ell/rtt^2; M: largest window. Initial values
		 * (best_ell 0, max_w 0, counts 0) make the first path join both. */
		npm_u32 l = npm_cc_min_u32(p->ell, NPM_CC_ELL_CAP);
		npm_u64 lhs = (npm_u64)l * a->best_rtt * a->best_rtt;
		npm_u64 rhs = (npm_u64)a->best_ell * r * r;
		npm_u64 gt_b = npm_cc_gt(lhs, rhs);
		npm_u64 eq_b = 1 - gt_b - npm_cc_gt(rhs, lhs);
		npm_u64 in_b = gt_b | eq_b;
		npm_u64 gt_m = npm_cc_gt(c, a->max_w);
		npm_u64 eq_m = 1 - gt_m - npm_cc_gt(a->max_w, c);
		npm_u64 bm;

		a->best_ell = (npm_u32)npm_cc_sel(gt_b, l, a->best_ell);
		a->best_rtt = (npm_u32)npm_cc_sel(gt_b, r, a->best_rtt);
		a->cnt_b = (npm_u32)npm_cc_sel(gt_b, 1, a->cnt_b + eq_b);
		bm = npm_cc_sel(gt_b, 0, a->cnt_bm);
		a->max_w = (npm_u32)npm_cc_sel(gt_m, c, a->max_w);
		a->cnt_m = (npm_u32)npm_cc_sel(gt_m, 1, a->cnt_m + eq_m);
		a->cnt_bm = (npm_u32)npm_cc_sel(gt_m, in_b, bm + eq_m * in_b);
	}
}

/* T_p = rtt_p * sum_i cwnd_i/rtt_i, in segments with NPM_CC_T_SHIFT bits. */
NPM_CC_INLINE npm_u64 npm_cc_t8(const struct npm_cc_acc *a, npm_u32 rtt_us)
{
	npm_u64 t = npm_cc_mul_rtt_sat(a->sum_x, npm_cc_clamp_rtt(rtt_us));
	return t >> (NPM_CC_X_SHIFT - NPM_CC_T_SHIFT);
}

/* cwnd_scale / T^2 in fixed point; 0 when T is out of range (tiny result). */
NPM_CC_INLINE npm_u64 npm_cc_c_over_t2_fp(npm_u32 cwnd, npm_u64 t8)
{
	if (t8 == 0)
		return NPM_CC_FP_ONE;
	if (t8 >= ((npm_u64)1 << 31))
		return 0;
	return ((npm_u64)npm_cc_clamp_cwnd(cwnd) << (2 * NPM_CC_T_SHIFT + NPM_CC_FP_SHIFT)) / (t8 * t8);
}

/* Reno congestion avoidance: 1/cwnd per ACKed segment. */
NPM_CC_INLINE npm_u64 npm_reno_inc_fp(npm_u32 cwnd)
{
	return (npm_u64)NPM_CC_FP_ONE / npm_cc_clamp_cwnd(cwnd);
}

/* Reno/RFC 5681 multiplicative decrease (tcp_reno_ssthresh). */
NPM_CC_INLINE npm_u32 npm_reno_ssthresh(npm_u32 cwnd)
{
	return npm_cc_max_u32(cwnd >> 1, NPM_CC_MIN_SSTHRESH);
}

/*
 * Apply a (possibly negative) fixed-point increase per ACKed segment:
 * acc += inc * acked; whole segments move into cwnd, the fraction stays.
 * The result is kept within [floor, clamp] (floor >= 2); a window already
 * below the floor is not raised, only not lowered further.
 */
NPM_CC_INLINE npm_u32 npm_cc_apply_floor(npm_u32 cwnd, npm_s64 *acc, npm_s64 inc_fp, npm_u32 acked, npm_u32 clamp,
					 npm_u32 floor)
{
	npm_s64 a = *acc + inc_fp * (npm_s64)acked;
	npm_s64 d = a >> NPM_CC_FP_SHIFT; /* floor, also if negative */
	npm_s64 lo = floor < cwnd ? floor : cwnd;
	npm_s64 c;

	if (lo < 2)
		lo = 2;
	a -= d * NPM_CC_FP_ONE;
	c = (npm_s64)cwnd + d;
	if (c < lo) {
		c = lo;
		a = 0;
	}
	if (c > (npm_s64)clamp)
		c = clamp;
	*acc = a;
	return (npm_u32)c;
}

NPM_CC_INLINE npm_u32 npm_cc_apply(npm_u32 cwnd, npm_s64 *acc, npm_s64 inc_fp, npm_u32 acked, npm_u32 clamp)
{
	return npm_cc_apply_floor(cwnd, acc, inc_fp, acked, clamp, 2);
}

#endif
