# The trace figures' data: every sample as recorded, in the panel's unit (the real run's
# figure is checked against its file in tests/rplot/e2e-traces.sh).

trace_rows <- function() {
  # two TCP-like paths (Unacked, Ssthresh) sampled at 0.1 and 0.2 s, path 2 also at 0.25 s
  # (an instant without path 1: no sum there), and an association row
  data.table(AbsTime = c(1e5, 1e5, 2e5, 2e5, 2.5e5, 1e5, 2e5), RelTime = c(0.1, 0.1, 0.2, 0.2, 0.25, 0.1, 0.2),
             Path = c(1L, 2L, 1L, 2L, 2L, -1L, -1L), Local = "-", Remote = "x", State = "s",
             Cwnd = c(10000, 4000, 12000, 5000, 6000, NA, NA), Ssthresh = c(NA, 3000, 8000, 3000, 3000, NA, NA),
             RTT = c(4, 56, 4.5, 60, 61, NA, NA), BytesSent = c(100, 50, 300, 80, 90, NA, NA),
             BytesAcked = c(90, 40, 250, 80, 90, NA, NA), Unacked = c(7, 3, 8, 4, 4, 20, 25),
             Rwnd = c(NA, NA, NA, NA, NA, 100000, 64000), Pending = c(NA, NA, NA, NA, NA, 2, 0),
             FlowID = 0L, Flow = "f", Node = c("Active", "Active", "Active", "Active", "Active", "Active", "Passive"),
             NodeLabel = "n", PathLabel = c("p1", "p2", "p1", "p2", "p2", "Whole connection", "Whole connection"))
}

test_that("trace data: each sample once, in the panel's unit, the sum only where every path was sampled", {
  d <- npm_trace_data(trace_rows())
  cw <- d[Quantity == "cwnd" & Line == "cwnd" & !is.na(Path)]
  expect_equal(cw[order(Path, RelTime), Value], c(10, 12, 4, 5, 6))
  ss <- d[Line == "ssthresh"]
  expect_equal(ss[order(Path, RelTime), Value], c(8, 3, 3, 3))          # NA is not drawn
  s <- d[Series == "Sum of paths"]
  expect_equal(s$RelTime, c(0.1, 0.2))                                  # not at 0.25 s
  expect_equal(s$Value, c(14, 17))
  # TCP-like paths tell Unacked: that panel, not sent - acked
  expect_equal(d[Quantity == "unacked"][order(Path, RelTime), Value], c(7, 8, 3, 4, 4))
  expect_equal(nrow(d[Quantity == "sent_acked"]), 0L)
  expect_equal(d[Quantity == "rwnd"][order(Node), Value], c(100, 64))
  expect_equal(d[Quantity == "sendbuf"][order(Node), Value], c(20, 25))
  # the receive queue: the passive's only, unless asked for by name
  expect_equal(d[Quantity == "recvqueue", Node], "Passive")
  expect_equal(sort(npm_trace_data(trace_rows(), "recvqueue")$Node), c("Active", "Passive"))
  expect_equal(levels(d$Panel)[1], "Congestion window [kB]")
})

test_that("trace data: sent - acked where the stack tells no Unacked per path (SCTP)", {
  r <- trace_rows()[, Unacked := ifelse(Path >= 0, NA, Unacked)]
  d <- npm_trace_data(r, c("sent_acked", "unacked"))
  expect_equal(d[Quantity == "sent_acked"][order(Path, RelTime), Value], c(0.01, 0.05, 0.01, 0, 0))
  expect_equal(nrow(d[Quantity == "unacked"]), 0L)
  expect_error(npm_trace_data(r, "flight"), "unknown trace quantity flight", class = "npm_error")
})

test_that("trace plots: a page per flow and node, drawn as steps", {
  p <- npm_trace_plots(trace_rows())
  expect_length(p, 2L)
  expect_s3_class(p[[1]]$plot$layers[[1]]$geom, "GeomStep")
  expect_equal(p[[1]]$plot$layers[[1]]$geom_params$direction, "hv")
})
