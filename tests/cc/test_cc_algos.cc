// Host unit tests of the congestion-control arithmetic (the same headers
// are compiled into the BPF programs). Expected values are hand-computed
// from RFC 6356 section 3 (LIA), Khalili et al. (OLIA) and the CMT/RP
// papers (RPv1: AINA 2010 eq. 5-10; RPv2: ConTEL 2011), see comments.
#include <catch2/catch.hpp>
#include <initializer_list>

#include "npm_cc_common.h"
#include "npm_cc_lia.h"
#include "npm_cc_olia.h"
#include "npm_cc_rpv1.h"
#include "npm_cc_rpv2.h"

namespace {

npm_cc_path P(npm_u32 cwnd, npm_u32 rtt_us, npm_u32 ssthresh = NPM_CC_INF_SSTHRESH, npm_u32 ell = 0) {
  npm_cc_path p;
  p.cwnd = cwnd;
  p.ssthresh = ssthresh;
  p.rtt_us = rtt_us;
  p.ell = ell;
  p.ca_state = 0;
  return p;
}

npm_cc_acc Acc(std::initializer_list<npm_cc_path> paths, npm_u32 what) {
  npm_cc_acc a;
  npm_cc_acc_init(&a);
  for (const auto& p : paths) npm_cc_acc_add(&a, &p, what);
  return a;
}

double fp(double v) { return v / double(NPM_CC_FP_ONE); }

}  // namespace

TEST_CASE("branch-free helpers", "[cc]") {
  CHECK(npm_cc_gt(5, 3) == 1);
  CHECK(npm_cc_gt(3, 5) == 0);
  CHECK(npm_cc_gt(4, 4) == 0);
  CHECK(npm_cc_sel(1, 7, 9) == 7);
  CHECK(npm_cc_sel(0, 7, 9) == 9);
  CHECK(npm_cc_min_u32(3, 8) == 3);
  CHECK(npm_cc_max_u32(3, 8) == 8);
  CHECK(npm_cc_clamp_cwnd(0) == 1);
  CHECK(npm_cc_clamp_cwnd(5u << 20) == NPM_CC_CWND_CAP);
  CHECK(npm_cc_clamp_rtt(0) == 1);
  CHECK(npm_cc_eff_ssthresh(NPM_CC_INF_SSTHRESH, 17) == 17);
  CHECK(npm_cc_eff_ssthresh(12, 17) == 12);
  // CMT/RP view of a sibling: in CWR/Recovery/Loss it counts with its target
  CHECK(npm_cc_rp_cwnd(40, 20, 0) == 40);  // Open
  CHECK(npm_cc_rp_cwnd(40, 20, 1) == 40);  // Disorder
  CHECK(npm_cc_rp_cwnd(40, 20, 3) == 20);  // Recovery
  CHECK(npm_cc_rp_cwnd(10, 20, 4) == 10);  // Loss, cwnd already below
}

TEST_CASE("fixed-point apply moves whole segments and keeps the fraction", "[cc]") {
  npm_s64 acc = 0;
  // +0.5 segment per ACKed segment, 3 ACKed: +1.5
  CHECK(npm_cc_apply(10, &acc, NPM_CC_FP_ONE / 2, 3, 1000) == 11);
  CHECK(acc == NPM_CC_FP_ONE / 2);
  // another +0.5: the fraction completes a segment
  CHECK(npm_cc_apply(11, &acc, NPM_CC_FP_ONE / 2, 1, 1000) == 12);
  CHECK(acc == 0);
  // negative increase (OLIA): -0.25 -> one segment less, 0.75 left
  acc = 0;
  CHECK(npm_cc_apply(10, &acc, -NPM_CC_FP_ONE / 4, 1, 1000) == 9);
  CHECK(acc == 3 * NPM_CC_FP_ONE / 4);
  // never below 2, never above the clamp
  acc = 0;
  CHECK(npm_cc_apply(2, &acc, -NPM_CC_FP_ONE, 5, 1000) == 2);
  acc = 0;
  CHECK(npm_cc_apply(99, &acc, NPM_CC_FP_ONE, 5, 100) == 100);
  // OLIA's floor: not below 4 by the alpha term, a smaller window stays
  acc = 0;
  CHECK(npm_cc_apply_floor(5, &acc, -NPM_CC_FP_ONE, 3, 100, NPM_OLIA_MIN_CWND) == 4);
  acc = 0;
  CHECK(npm_cc_apply_floor(3, &acc, -NPM_CC_FP_ONE, 3, 100, NPM_OLIA_MIN_CWND) == 3);
}

TEST_CASE("Reno", "[cc]") {
  CHECK(fp(npm_reno_inc_fp(10)) == Approx(0.1).epsilon(1e-5));
  CHECK(npm_reno_ssthresh(10) == 5);
  CHECK(npm_reno_ssthresh(3) == 2);
}

TEST_CASE("LIA (RFC 6356)", "[cc][lia]") {
  SECTION("two paths, the short one is b") {
    // c1=10, rtt1=10 ms; c2=20, rtt2=20 ms.
    // max c/rtt^2 = 10/1e8 (path 1); sum c/rtt = 0.002 /us
    // alpha/cwnd_total = 1e-7 / 4e-6 = 0.025; alpha = 30 * 0.025 = 0.75
    auto p1 = P(10, 10000), p2 = P(20, 20000);
    auto a = Acc({p1, p2}, NPM_LIA_ACC);
    CHECK(a.n == 2);
    CHECK(a.b_cwnd == 10);
    CHECK(a.b_rtt == 10000);
    CHECK(fp(npm_lia_alpha_fp(&a)) == Approx(0.75).epsilon(0.005));
    CHECK(fp(npm_lia_inc_fp(&a, &p1)) == Approx(0.025).epsilon(0.005));  // min(0.025, 1/10)
    CHECK(fp(npm_lia_inc_fp(&a, &p2)) == Approx(0.025).epsilon(0.005));  // min(0.025, 1/20)
    auto b = Acc({p2, p1}, NPM_LIA_ACC);                                 // order does not matter
    CHECK(npm_lia_inc_fp(&b, &p1) == npm_lia_inc_fp(&a, &p1));
  }
  SECTION("the 1/cwnd_i cap binds on the large window") {
    // c1=4, rtt1=10 ms; c2=100, rtt2=100 ms: b = path 1 (4e-8 > 1e-8)
    // sum c/rtt = 4e-4 + 1e-3 = 1.4e-3; coupled = 4e-8/1.96e-6 = 0.020408
    auto p1 = P(4, 10000), p2 = P(100, 100000);
    auto a = Acc({p1, p2}, NPM_LIA_ACC);
    CHECK(fp(npm_lia_inc_fp(&a, &p1)) == Approx(0.020408).epsilon(0.005));
    CHECK(fp(npm_lia_inc_fp(&a, &p2)) == Approx(0.01).epsilon(0.005));  // 1/100
  }
  SECTION("equal paths: alpha = 1/2, increase 1/(2 cwnd_total)") {
    auto p = P(10, 10000);
    auto a = Acc({p, p}, NPM_LIA_ACC);
    CHECK(fp(npm_lia_alpha_fp(&a)) == Approx(0.5).epsilon(0.005));
    CHECK(fp(npm_lia_inc_fp(&a, &p)) == Approx(0.025).epsilon(0.005));
  }
  SECTION("a single path is Reno") {
    auto p = P(10, 15000);
    auto a = Acc({p}, NPM_LIA_ACC);
    CHECK(fp(npm_lia_inc_fp(&a, &p)) == Approx(0.1).epsilon(0.005));
    CHECK(npm_lia_ssthresh(&p) == 5);
  }
}

TEST_CASE("OLIA (Khalili et al.)", "[cc][olia]") {
  SECTION("best path has the largest window: alpha = 0") {
    // w1=10, rtt1=10 ms, ell1=100; w2=20, rtt2=20 ms, ell2=1000
    // M={2}; ell/rtt^2: 1e-6 vs 2.5e-6 -> B={2}; B\M empty
    // T1 = 10000*0.002 = 20 -> 10/400 = 0.025; T2 = 40 -> 20/1600 = 0.0125
    auto p1 = P(10, 10000, 8, 100), p2 = P(20, 20000, 8, 1000);
    auto a = Acc({p1, p2}, NPM_OLIA_ACC);
    CHECK(a.cnt_m == 1);
    CHECK(a.cnt_b == 1);
    CHECK(a.cnt_bm == 1);
    CHECK(npm_olia_alpha_fp(&a, &p1) == 0);
    CHECK(npm_olia_alpha_fp(&a, &p2) == 0);
    CHECK(fp(npm_olia_inc_fp(&a, &p1)) == Approx(0.025).epsilon(0.005));
    CHECK(fp(npm_olia_inc_fp(&a, &p2)) == Approx(0.0125).epsilon(0.005));
  }
  SECTION("best path is not a max-window path: window moves to it") {
    // w1=10, ell1=1000 (B), w2=20, ell2=100 (M); |P|=2, |B\M|=1, |M|=1
    // alpha1 = +1/2, alpha2 = -1/2
    // inc1 = 0.025 + 0.5/10 = 0.075 ; inc2 = 0.0125 - 0.5/20 = -0.0125
    auto p1 = P(10, 10000, 8, 1000), p2 = P(20, 20000, 8, 100);
    auto a = Acc({p1, p2}, NPM_OLIA_ACC);
    CHECK(fp(npm_olia_alpha_fp(&a, &p1)) == Approx(0.5).epsilon(1e-4));
    CHECK(fp(npm_olia_alpha_fp(&a, &p2)) == Approx(-0.5).epsilon(1e-4));
    CHECK(fp(npm_olia_inc_fp(&a, &p1)) == Approx(0.075).epsilon(0.005));
    CHECK(fp(npm_olia_inc_fp(&a, &p2)) == Approx(-0.0125).epsilon(0.005));
  }
  SECTION("three paths: |B\\M| = 2, |M| = 1, in any order") {
    // all rtt 10 ms; p1, p2: w=10 ell=1000 (B); p3: w=30 ell=10 (M)
    // alpha1 = alpha2 = 1/(3*2) = 1/6, alpha3 = -1/(3*1) = -1/3
    auto p1 = P(10, 10000, 8, 1000), p2 = P(10, 10000, 8, 1000), p3 = P(30, 10000, 8, 10);
    for (auto a : {Acc({p1, p2, p3}, NPM_OLIA_ACC), Acc({p3, p1, p2}, NPM_OLIA_ACC), Acc({p1, p3, p2}, NPM_OLIA_ACC)}) {
      CHECK(a.n == 3);
      CHECK(a.cnt_b == 2);
      CHECK(a.cnt_bm == 0);
      CHECK(a.cnt_m == 1);
      CHECK(fp(npm_olia_alpha_fp(&a, &p1)) == Approx(1.0 / 6).epsilon(1e-4));
      CHECK(fp(npm_olia_alpha_fp(&a, &p3)) == Approx(-1.0 / 3).epsilon(1e-4));
      // T = 10000 * (50/10000) = 50: inc1 = 10/2500 + (1/6)/10
      CHECK(fp(npm_olia_inc_fp(&a, &p1)) == Approx(0.004 + 1.0 / 60).epsilon(0.005));
    }
  }
  SECTION("equal windows, all in M: alpha = 0") {
    auto p1 = P(10, 10000, 8, 1000), p2 = P(10, 20000, 8, 10);
    auto a = Acc({p1, p2}, NPM_OLIA_ACC);
    CHECK(a.cnt_m == 2);
    CHECK(npm_olia_alpha_fp(&a, &p1) == 0);
    CHECK(npm_olia_alpha_fp(&a, &p2) == 0);
  }
  SECTION("a single path is Reno") {
    auto p = P(10, 30000, 8, 50);
    auto a = Acc({p}, NPM_OLIA_ACC);
    CHECK(fp(npm_olia_inc_fp(&a, &p)) == Approx(0.1).epsilon(0.005));
    CHECK(npm_olia_ssthresh(&p) == 5);
    auto p6 = P(6, 1000), p3 = P(3, 1000);
    CHECK(npm_olia_ssthresh(&p6) == 4);  // 3 -> not below 4
    CHECK(npm_olia_ssthresh(&p3) == 3);  // already below 4: stays
    CHECK(npm_olia_ell(7, 9) == 9);
  }
}

TEST_CASE("CMT/RPv1", "[cc][rpv1]") {
  SECTION("increase scaled by s_P/S, decrease by C/2") {
    // c1=10 s1=8; c2=30 s2=24: S=32, C=40
    // s1/S = 0.25: slow start +0.25/seg, CA +0.25/10 = 0.025/seg
    // s2/S = 0.75: CA +0.75/30 = 0.025/seg
    // loss on 1: max(10-20, 4*8/32=1, 1) = 1 (ssthresh: floor 4)
    // loss on 2: max(30-20=10, 4*24/32=3, 1) = 10
    auto p1 = P(10, 10000, 8), p2 = P(30, 10000, 24);
    auto a = Acc({p1, p2}, NPM_RPV1_ACC);
    CHECK(a.sum_ss == 32);
    CHECK(a.sum_cwnd == 40);
    CHECK(fp(npm_rpv1_ss_inc_fp(&a, &p1)) == Approx(0.25).epsilon(1e-4));
    CHECK(fp(npm_rpv1_inc_fp(&a, &p1)) == Approx(0.025).epsilon(1e-3));
    CHECK(fp(npm_rpv1_inc_fp(&a, &p2)) == Approx(0.025).epsilon(1e-3));
    CHECK(npm_rpv1_decrease(&a, &p1) == 1);
    CHECK(npm_rpv1_decrease(&a, &p2) == 10);
    CHECK(npm_rpv1_ssthresh(&a, &p1) == NPM_RP_MIN_SSTHRESH);
    CHECK(npm_rpv1_ssthresh(&a, &p2) == 10);
  }
  SECTION("an unset ssthresh counts as the window") {
    // c1=40 s1=inf (->40), c2=40 s2=20: S=60, C=80
    // s1/S = 2/3; loss on 1: max(40-40, 4*40/60=2.67->2, 1) = 2
    auto p1 = P(40, 10000), p2 = P(40, 10000, 20);
    auto a = Acc({p1, p2}, NPM_RPV1_ACC);
    CHECK(a.sum_ss == 60);
    CHECK(fp(npm_rpv1_ss_inc_fp(&a, &p1)) == Approx(2.0 / 3).epsilon(1e-4));
    CHECK(npm_rpv1_decrease(&a, &p1) == 2);
  }
  SECTION("the 4*MTU*s_P/S floor") {
    // c1=12 s1=100, c2=100 s2=4: S=104, C=112: max(12-56, 4*100/104=3.85->3, 1) = 3
    auto p1 = P(12, 10000, 100), p2 = P(100, 10000, 4);
    auto a = Acc({p1, p2}, NPM_RPV1_ACC);
    CHECK(npm_rpv1_decrease(&a, &p1) == 3);
    CHECK(npm_rpv1_ssthresh(&a, &p1) == 4);
  }
  SECTION("one flow-level reduction per congestion event") {
    // c1=c2=20, s=inf. Loss on 1: max(20-20, 4*20/40=2, 1) = 2 -> floor 4.
    // Subflow 1 now in Recovery (cwnd 20 -> ssthresh 4, counts as 4);
    // a loss on 2 in the same event keeps s2 = c2 = 20 (C already halved).
    auto p1 = P(20, 10000), p2 = P(20, 10000);
    auto a = Acc({p1, p2}, NPM_RPV1_ACC);
    CHECK(npm_rpv1_decrease(&a, &p1) == 2);
    CHECK(npm_rpv1_ssthresh(&a, &p1) == 4);
    auto r1 = P(npm_cc_rp_cwnd(20, 4, 3), 10000, 4);
    r1.ca_state = 3;
    auto b = Acc({r1, p2}, NPM_RPV1_ACC);
    CHECK(b.n_reducing == 1);
    CHECK(b.sum_cwnd == 24);
    CHECK(npm_cc_rp_same_event(&b, &p2) == 1);
    CHECK(npm_rpv1_ssthresh(&b, &p2) == 20);
    CHECK(npm_rpv2_ssthresh(&b, &p2) == 20);
    // the reducing subflow itself (e.g. an RTO during its recovery) still reduces
    CHECK(npm_cc_rp_same_event(&b, &r1) == 0);
  }
  SECTION("a single path: Reno increase, SCTP decrease") {
    auto p = P(10, 10000, 8);
    auto a = Acc({p}, NPM_RPV1_ACC);
    CHECK(fp(npm_rpv1_inc_fp(&a, &p)) == Approx(0.1).epsilon(1e-3));
    CHECK(npm_rpv1_decrease(&a, &p) == 5);  // max(10-5, 4, 1)
    CHECK(npm_rpv1_ssthresh(&a, &p) == 5);
  }
}

TEST_CASE("CMT/RPv2", "[cc][rpv2]") {
  SECTION("bandwidth share and halving the flow's bandwidth") {
    // c1=10 rtt1=10 ms, c2=20 rtt2=40 ms: B = 0.001 + 0.0005 = 0.0015 /us
    // i1 = 0.001/0.0015 = 2/3, i2 = 1/3
    // T1 = 10000*0.0015 = 15 -> CA +1/15; T2 = 60 -> CA +1/60
    // loss on 1: max(10 - 15/2 (rounded down: 7) = 3, 4*2/3 = 2.67 -> 2, 1) = 3
    // loss on 2: max(20 - 30 -> 0, 4/3 -> 1, 1) = 1 (ssthresh: floor 4)
    auto p1 = P(10, 10000), p2 = P(20, 40000);
    auto a = Acc({p1, p2}, NPM_RPV2_ACC);
    CHECK(fp(npm_rpv2_share_fp(&a, &p1)) == Approx(2.0 / 3).epsilon(1e-3));
    CHECK(fp(npm_rpv2_share_fp(&a, &p2)) == Approx(1.0 / 3).epsilon(1e-3));
    CHECK(fp(npm_rpv2_ss_inc_fp(&a, &p1)) == Approx(2.0 / 3).epsilon(1e-3));
    CHECK(fp(npm_rpv2_inc_fp(&a, &p1)) == Approx(1.0 / 15).epsilon(1e-3));
    CHECK(fp(npm_rpv2_inc_fp(&a, &p2)) == Approx(1.0 / 60).epsilon(1e-3));
    CHECK(npm_rpv2_decrease(&a, &p1) == 3);
    CHECK(npm_rpv2_decrease(&a, &p2) == 1);
    CHECK(npm_rpv2_ssthresh(&a, &p1) == 4);
    CHECK(npm_rpv2_ssthresh(&a, &p2) == 4);
  }
  SECTION("equal paths: half of Reno's increase, loss takes the whole window") {
    // c=20, rtt 20 ms twice: T = 40, i = 1/2; CA +1/40; loss: max(20-20, 2, 1) = 2
    auto p = P(20, 20000);
    auto a = Acc({p, p}, NPM_RPV2_ACC);
    CHECK(fp(npm_rpv2_inc_fp(&a, &p)) == Approx(1.0 / 40).epsilon(1e-3));
    CHECK(npm_rpv2_decrease(&a, &p) == 2);
  }
  SECTION("a single path is Reno") {
    auto p = P(10, 25000);
    auto a = Acc({p}, NPM_RPV2_ACC);
    CHECK(fp(npm_rpv2_inc_fp(&a, &p)) == Approx(0.1).epsilon(1e-3));
    CHECK(npm_rpv2_decrease(&a, &p) == 5);
    CHECK(npm_rpv2_ssthresh(&a, &p) == 5);
  }
}

TEST_CASE("extreme inputs stay finite", "[cc]") {
  auto big = P(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
  auto tiny = P(0, 0, 0, 0);
  for (npm_u32 what : {NPM_LIA_ACC, NPM_OLIA_ACC, NPM_RPV1_ACC}) {
    auto a = Acc({big, tiny, big, tiny, big, tiny, big, tiny}, what | NPM_ACC_SUMS);
    CHECK(a.n == 8);
    CHECK(npm_lia_inc_fp(&a, &big) <= npm_u64(NPM_CC_FP_ONE));
    CHECK(npm_rpv1_inc_fp(&a, &tiny) <= npm_u64(NPM_CC_FP_ONE));
    CHECK(npm_rpv2_inc_fp(&a, &tiny) <= npm_u64(NPM_CC_FP_ONE));
    CHECK(npm_olia_inc_fp(&a, &big) <= 2 * NPM_CC_FP_ONE);
    CHECK(npm_rpv1_ssthresh(&a, &big) >= 2);
    CHECK(npm_rpv2_ssthresh(&a, &tiny) >= 2);
  }
}
