# The rates of the run figures: bytes of an interval over its true length, nothing merged.

# A measurement vector of one node: blocks at 0, 1, 2 s and a last one at `stop` s; the flow
# sends `rate` frames/s of 1000 bytes until `end` s (frames at k / rate, k = 1, 2, ...).
vector_rows <- function(node, stop, end, rate = 200, t0 = 1.7e15) {
  blocks <- c(0, 1, 2, stop)
  sent <- floor(pmin(blocks, end) * rate)
  d <- rbindlist(lapply(c("Sent", "Received", "Lost"), function(a) {
    data.table(
      AbsTime = t0 + blocks * 1e6, RelTime = blocks, Interval = c(0, diff(blocks)), FlowID = 0,
      Description = "Flow 0", Jitter = 0, Action = a,
      AbsBytes = if (a == "Lost") 0 else sent * 1000, AbsPackets = if (a == "Lost") 0 else sent,
      AbsFrames = if (a == "Lost") 0 else sent,
      RelBytes = if (a == "Lost") 0 else c(0, diff(sent)) * 1000,
      RelPackets = if (a == "Lost") 0 else c(0, diff(sent)), RelFrames = if (a == "Lost") 0 else c(0, diff(sent)))
  }))
  d[, Node := node][]
}
scalars_of <- function(node, last, t0 = 1.7e15) {
  obj <- sprintf("netPerfMeter.%s.flow[0]", tolower(node))
  data.table(Object = obj, Name = c("Last Transmission", "Last Reception"), Value = t0 + last * 1e6,
             Node = node)
}

test_that("a flow's last interval ends at its last message, not at the stop after the runtime", {
  mv <- vector_rows("Active", stop = 2.563, end = 2.5)
  npm_interval_lengths(mv, scalars_of("Active", 2.5))
  d <- npm_interval_rates(mv)
  sent <- d[Action == "Sent"]
  expect_equal(sent$Start, c(0, 1, 2))
  expect_equal(sent$End, c(1, 2, 2.5))
  expect_equal(sent$FrameRate, c(200, 200, 200))
  expect_equal(sent$BitRate, rep(1.6e6, 3))
  expect_equal(d[Action == "Received"]$End, c(1, 2, 2.5))
  expect_equal(d[Action == "Lost"]$End, c(1, 2, 2.5))
  expect_match(gsub("\n", " ", npm_interval_caption(d)), "ends at its last message")
  # Before: merged into the interval before it or drawn over the stop, 1.33 ... 1.42 Mbit/s.
})

test_that("without scalars the last interval runs to the stop, and the caption says so", {
  mv <- vector_rows("Passive", stop = 2.563, end = 2.5)
  npm_interval_lengths(mv, NULL)
  d <- npm_interval_rates(mv)
  expect_equal(d[Action == "Sent"]$End, c(1, 2, 2.563))
  expect_equal(d[Action == "Sent"]$FrameRate[3], 100 / 0.563)
  expect_equal(unique(d[End == 2.563]$Ends), "stop")
  expect_match(gsub("\n", " ", npm_interval_caption(d)), "runs to the end of the measurement")
  # a last message before the last interval (the flow was silent in it): the interval as recorded
  mv <- vector_rows("Active", stop = 2.563, end = 1.9)
  npm_interval_lengths(mv, scalars_of("Active", 1.9))
  d <- npm_interval_rates(mv)
  expect_equal(d[Action == "Sent"]$End, c(1, 2, 2.563))
  expect_equal(d[Action == "Sent"]$FrameRate[3], 0)
})

test_that("a last interval of a few ms is left out and the caption names it", {
  mv <- rbind(vector_rows("Active", stop = 2.06, end = 2.004), vector_rows("Passive", stop = 2.5, end = 2.5))
  npm_interval_lengths(mv, rbind(scalars_of("Active", 2.004), scalars_of("Passive", 2.5)))
  mv[, Flow := "Flow 0"]
  d <- npm_interval_rates(mv)
  expect_equal(d[Node == "Active" & Action == "Sent"]$End, c(1, 2))
  expect_equal(d[Node == "Passive" & Action == "Sent"]$End, c(1, 2, 2.5))
  expect_equal(nrow(attr(d, "left_out")), 2L)                      # Sent and Received
  expect_match(gsub("\n", " ", npm_interval_caption(d)), "Not drawn: the last 4 ms of Flow 0 at the active node")
})
