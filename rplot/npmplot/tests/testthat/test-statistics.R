# Means and confidence intervals must be exactly t.test()'s; grouping and filtering
# must pick the right rows.

test_that("mean and interval equal t.test() at several levels", {
  set.seed(1)
  for (n in c(2, 3, 5, 10, 30)) for (level in c(0.9, 0.95, 0.99)) {
    v <- rnorm(n, mean = runif(1, -100, 1e6), sd = runif(1, 0.1, 1e4))
    tt <- t.test(v, conf.level = level)
    r <- npm_mean_ci(v, level)
    expect_equal(r$N, n)
    expect_equal(r$Mean, unname(tt$estimate), tolerance = 1e-12)
    expect_equal(c(r$Lower, r$Upper), as.numeric(tt$conf.int), tolerance = 1e-12)
  }
})

test_that("one repetition and constant values have no interval (never a zero-width one)", {
  r <- npm_mean_ci(42)
  expect_equal(r$Mean, 42)
  expect_true(is.na(r$Lower) && is.na(r$Upper))
  r <- npm_mean_ci(c(5, 5, 5))
  expect_equal(r$Mean, 5)
  expect_true(is.na(r$Lower) && is.na(r$Upper))
  r <- npm_mean_ci(c(1, NA, 3))
  expect_equal(r$N, 2)
})

test_that("BCa bounds on the exact bootstrap of three values are the ones worked out by hand", {
  # The lab's test_stats.py works this example out by hand: x = 1, 2, 6, all 27 ordered resamples;
  # z0 = qnorm(14/27), a = 0.057270; at 90 % the low bound is the 2nd/3rd order statistic
  # (both 4/3), the high one 14/3 + 0.758 * 4/3 = 5.6772.
  x <- c(1, 2, 6)
  reps <- rowMeans(as.matrix(expand.grid(x, x, x)))
  jack <- (sum(x) - x) / 2
  b <- npm_bca_bounds(3, reps, jack, 0.90)
  expect_equal(b[1], 4 / 3, tolerance = 1e-9)
  expect_equal(b[2], 14 / 3 + (25.75790586568832 - 25) * 4 / 3, tolerance = 1e-6)
  # symmetric: no bias correction, no acceleration; the percentile interval
  y <- c(-1, 0, 1)
  b <- npm_bca_bounds(0, rowMeans(as.matrix(expand.grid(y, y, y))), (sum(y) - y) / 2, 0.90)
  expect_equal(b[1], -b[2], tolerance = 1e-12)
})

test_that("the resampled BCa interval approaches the exact one, is seeded and keeps the caller's RNG", {
  x <- c(1, 2, 6, 2.5, 9)
  exact <- rowMeans(as.matrix(expand.grid(x, x, x, x, x)))        # all 3125 ordered resamples
  want <- npm_bca_bounds(mean(x), exact, (sum(x) - x) / 4, 0.95)
  # The means of resamples of these values lie on a grid of 0.1 (the exact bounds are 1.8 and
  # 7.1): 40000 resamples put a bound at most one step away (measured: seeds 1-6 give 1.8 or 1.9,
  # 7.1 to 7.14; stats.py's bootstrap_bca gives 1.8 or 1.9, 7.1 or 7.2).
  for (seed in 1:3) {
    got <- npm_bca_mean(x, 0.95, resamples = 40000, seed = seed)
    expect_lte(max(abs(got - want)), 0.1 + 1e-9)
  }
  expect_identical(npm_bca_mean(x, resamples = 500, seed = 7), npm_bca_mean(x, resamples = 500, seed = 7))
  expect_false(identical(npm_bca_mean(x, resamples = 500, seed = 7), npm_bca_mean(x, resamples = 500, seed = 8)))
  set.seed(99)
  before <- runif(1)
  set.seed(99)
  npm_bca_mean(x, seed = 3)
  expect_identical(runif(1), before)
})

test_that("no interval for one run, too few runs, no spread; the reason is said", {
  d <- data.table(g = rep(c("one", "few", "flat", "many"), c(1, 5, 12, 12)),
                  v = c(3, 1:5, rep(7, 12), c(10, 10.2, 9.8, 10.1, 4.5, 9.9, 10.3, 10, 9.7, 10.4, 4.6, 10.1)))
  for (ci in c("t", "bca")) {
    s <- npm_summarise(d, "v", "g", ci = ci)
    r <- setNames(s$Interval, s$g)
    expect_equal(unname(r["one"]), "single run")
    expect_equal(unname(r["flat"]), "no spread (all 12 runs equal)")
    expect_true(all(is.na(s[g != "many" & (ci == "bca" | g != "few"), c(Lower, Upper)])))
    expect_true(s[g == "many", Lower < Mean & Mean < Upper])
  }
  s <- npm_summarise(d, "v", "g", ci = "bca")
  expect_equal(s[g == "few", Interval], "too few runs (n = 5 < 10)")
  expect_equal(s[g == "many", Interval], "bca(4000)")
  expect_equal(npm_summarise(d, "v", "g", ci = "t")[g == "few", Interval], "t")
  expect_equal(npm_summarise(d, "v", "g", ci = "t", min_runs = 6)[g == "few", Interval],
               "too few runs (n = 5 < 6)")
  expect_true(all(is.na(npm_summarise(d, "v", "g", ci = "none")$Lower)))
  # a point's resamples depend on the seed and its own values, not on the other points
  expect_equal(npm_summarise(d, "v", "g", ci = "bca", seed = 4)[g == "many", Lower],
               npm_summarise(d[g == "many"], "v", "g", ci = "bca", seed = 4)$Lower)
  expect_false(npm_summarise(d, "v", "g", ci = "bca", seed = 4)[g == "many", Lower] ==
               npm_summarise(d, "v", "g", ci = "bca", seed = 5)[g == "many", Lower])
  expect_error(npm_summarise(d, "v", "g", ci = "z"), "unknown interval z", class = "npm_error")
  expect_error(npm_summarise(d, "v", "g", min_runs = 1), "at least 2", class = "npm_error")
})

test_that("given intervals are drawn as given, none where NA, of no width, or for one run", {
  d <- data.table(rho = rep(1:4, c(3, 3, 1, 3)), v = c(1, 2, 3, 4, 5, 6, 7, 8, 8.5, 9),
                  ci_low = rep(c(0.5, NA, 6, 8), c(3, 3, 1, 3)), ci_high = rep(c(3.5, NA, 8, 8), c(3, 3, 1, 3)),
                  procedure = rep(c("bca(4000)", "too few runs (n = 3 < 10)", "x", "y"), c(3, 3, 1, 3)))
  p <- npm_plot_summary(d, x = "rho", y = "v", ci = "given", y_scale = 2)
  s <- attr(p, "summary")
  expect_equal(s$Lower, c(1, NA, NA, NA))         # scaled as y
  expect_equal(s$Upper, c(7, NA, NA, NA))
  expect_equal(s$Interval, c("bca(4000)", "too few runs (n = 3 < 10)", "single run", "zero-width interval given"))
  # the drawn error bars are exactly these: one bar, at x = 1
  b <- ggplot_build(p)
  bars <- Filter(function(l) all(c("ymin", "ymax") %in% names(l)) && !("shape" %in% names(l)), b$data)
  expect_length(bars, 1L)
  expect_equal(bars[[1]]$x, 1)
  expect_equal(c(bars[[1]]$ymin, bars[[1]]$ymax), c(1, 7))
  cap <- gsub("\n", " ", p$labels$caption)
  expect_match(cap, "the table's intervals (ci_low, ci_high: bca(4000)); none at 3 of 4 points", fixed = TRUE)
  expect_match(cap, "too few runs (n = 3 < 10); single run; zero-width interval given.", fixed = TRUE)
  # Lower/Upper (a --dump) with its N: a point of one row with an interval of 5 runs
  dump <- data.table(rho = 1:2, N = c(5, 1), Mean = c(2, 3), Lower = c(1, NA), Upper = c(3, NA))
  s <- attr(npm_plot_summary(dump, x = "rho", y = "Mean", ci = "given"), "summary")
  expect_equal(s$N, c(5, 1))
  expect_equal(s$Lower, c(1, NA))
  expect_equal(s$Interval, c("given", "none given"))
  expect_error(npm_plot_summary(d[, !c("ci_low")], x = "rho", y = "v", ci = "given"), "needs the columns ci_low",
               class = "npm_error")
  expect_error(npm_plot_summary(d, y = "v", x = "procedure", ci = "given"), NA)
  bad <- copy(d)[1, ci_low := 0]
  expect_error(npm_plot_summary(bad, x = "rho", y = "v", ci = "given"), "ci_low holds 2 different values at rho=1",
               class = "npm_error")
  bad <- copy(d)[rho == 1, ci_low := 5]
  expect_error(npm_plot_summary(bad, x = "rho", y = "v", ci = "given"), "low bound is above its high one",
               class = "npm_error")
})

test_that("the caption says what the bars are and where there are none", {
  d <- data.table(rho = rep(1:3, c(12, 12, 1)), v = c(seq(1, 12), seq(2, 13), 5))
  cap <- function(...) gsub("\n", " ", npm_plot_summary(d, x = "rho", y = "v", ...)$labels$caption)
  expect_equal(cap(ci = "bca"), paste("Error bars: 95 % bootstrap BCa intervals of the mean (4000 resamples);",
                                      "none at 1 of 3 points: single run."))
  expect_equal(cap(ci = "t", caption = "2 runs left out"),
               "2 runs left out Error bars: 95 % t intervals of the mean; none at 1 of 3 points: single run.")
  expect_null(npm_plot_summary(d[rho < 3], x = "rho", y = "v")$labels$caption)  # t everywhere: as before
  expect_equal(gsub("\n", " ",
                    npm_plot_summary(d[rho < 3], x = "rho", y = "v", ci = "bca", level = 0.9)$labels$caption),
               "Error bars: 90 % bootstrap BCa intervals of the mean (4000 resamples).")
  expect_equal(cap(ci = "bca", min_runs = 13),
               "No error bars: no interval at any of the 3 points: too few runs (n = 12 < 13) (2 points); single run.")
  expect_null(npm_plot_summary(d, x = "rho", y = "v", ci = "none")$labels$caption)
})

make_table <- function() {
  set.seed(7)
  g <- CJ(Gamma = c("cmt", "cmtrpv1", "like-mptcp"), rho = c(1, 5, 10), Flow = 0:1,
          Run = 1:5)
  g[, Value := rho * ifelse(Gamma == "cmtrpv1", 0.3, 0.5) + Flow + rnorm(.N, 0, 0.2)]
  g[]
}

test_that("summarise groups by the chosen columns and matches t.test per group", {
  d <- make_table()
  s <- npm_summarise(d, "Value", c("rho", "Gamma", "Flow"), level = 0.9)
  expect_equal(nrow(s), 3 * 3 * 2)
  expect_true(all(s$N == 5))
  for (i in seq_len(nrow(s))) {
    v <- d[rho == s$rho[i] & Gamma == s$Gamma[i] & Flow == s$Flow[i], Value]
    tt <- t.test(v, conf.level = 0.9)
    expect_equal(s$Mean[i], unname(tt$estimate), tolerance = 1e-12)
    expect_equal(c(s$Lower[i], s$Upper[i]), as.numeric(tt$conf.int), tolerance = 1e-12)
  }
  # Fewer group columns pool the rest: 10 values per (rho, Gamma).
  s2 <- npm_summarise(d, "Value", c("rho", "Gamma"))
  expect_true(all(s2$N == 10))
  expect_error(npm_summarise(d, "Nope", "rho"), "no column Nope", class = "npm_error")
  expect_error(npm_summarise(d, "Value", "rho", level = 1), "confidence level",
               class = "npm_error")
})

test_that("filter keeps exactly the matching rows", {
  d <- make_table()
  f <- npm_filter(d, "Gamma != \"cmtrpv1\" & Flow == 0 & rho >= 5")
  expect_equal(nrow(f), 2 * 2 * 5)
  expect_true(all(f$Gamma %in% c("cmt", "like-mptcp") & f$Flow == 0 & f$rho >= 5))
  expect_equal(nrow(npm_filter(d, "")), nrow(d))
  expect_equal(nrow(npm_filter(d, NULL)), nrow(d))
  expect_error(npm_filter(d, "Gamma ==="), "cannot parse filter", class = "npm_error")
  expect_error(npm_filter(d, "Nope == 1"), "filter Nope == 1 failed", class = "npm_error")
  expect_error(npm_filter(d, "rho"), "TRUE/FALSE", class = "npm_error")
})

test_that("the plotted points are the group means and intervals after filtering and scaling", {
  d <- make_table()
  p <- npm_plot_summary(d, x = "rho", y = "Value", colour = "Gamma", facet_cols = "Flow",
                        filter = "Gamma != \"cmtrpv1\"", y_scale = 1000, level = 0.95)
  s <- attr(p, "summary")
  expect_equal(sort(unique(s$Gamma)), c("cmt", "like-mptcp"))
  v <- d[Gamma == "cmt" & rho == 5 & Flow == 1, Value] * 1000
  row <- s[Gamma == "cmt" & rho == 5 & Flow == 1]
  expect_equal(row$Mean, mean(v))
  expect_equal(c(row$Lower, row$Upper), as.numeric(t.test(v)$conf.int))
  b <- ggplot_build(p)          # draws without error
  expect_equal(length(b$data), 3L)   # lines, points, error bars
  expect_error(npm_plot_summary(d, x = "rho", y = "Value", filter = "rho > 100"),
               "no rows left", class = "npm_error")
  expect_error(npm_plot_summary(d, x = "rho", y = "Gamma"), "not numeric", class = "npm_error")
  expect_error(npm_plot_summary(d, x = "rho", y = "Value", colour = "Nope"), "no column Nope",
               class = "npm_error")
})

test_that("reference values are drawn where they belong: values as diamonds, bounds as triangles", {
  d <- make_table()
  ref <- data.table(rho = c(5, 10, 10), Gamma = c("cmt", "cmt", "like-mptcp"), Value = c(1, 2, 3),
                    bound = c("value", "upper", "value"))
  p <- npm_plot_summary(d, x = "rho", y = "Value", colour = "Gamma", y_scale = 1000, reference = ref)
  b <- ggplot_build(p)
  drawn <- Filter(function(l) all(c("x", "y", "shape") %in% names(l)) && all(l$shape %in% c(5, 6)), b$data)
  got <- do.call(rbind, lapply(drawn, function(l) data.frame(x = l$x, y = l$y, shape = l$shape)))
  got <- got[order(got$x, got$y), ]
  expect_equal(got$x, c(5, 10, 10))
  expect_equal(got$y, c(1000, 2000, 3000))     # scaled as the curves
  expect_equal(got$shape, c(5, 6, 5))
  expect_error(npm_plot_summary(d, x = "rho", y = "Value", reference = ref[, .(rho)]), "Value",
               class = "npm_error")
  bad <- copy(ref)[, bound := "about"]
  expect_error(npm_plot_summary(d, x = "rho", y = "Value", colour = "Gamma", reference = bad), "about",
               class = "npm_error")
})

test_that("a caption is plain text under the plot, wrapped, and absent when empty", {
  d <- make_table()
  long <- paste("2 of 125 runs invalid, left out (runs.csv: problems);",
                "3 of 125 runs repeated after 4 failed attempts (runs.csv: failed_attempts)")
  p <- npm_plot_summary(d, x = "rho", y = "Value", caption = long)
  expect_equal(gsub("\n", " ", p$labels$caption), long)       # no markup: failed_attempts stays
  expect_true(all(nchar(strsplit(p$labels$caption, "\n")[[1]]) <= 100))
  expect_gt(length(strsplit(p$labels$caption, "\n")[[1]]), 1L)
  expect_silent(ggplot_build(p))
  expect_null(npm_plot_summary(d, x = "rho", y = "Value", caption = "")$labels$caption)
  expect_null(npm_plot_summary(d, x = "rho", y = "Value")$labels$caption)
})

test_that("a single repetition is drawn without an interval", {
  d <- make_table()[Run == 1]
  p <- npm_plot_summary(d, x = "rho", y = "Value", colour = "Gamma", linetype = "Flow")
  expect_true(all(is.na(attr(p, "summary")$Lower)))
  layers <- vapply(p$layers, function(l) class(l$geom)[1], "")
  expect_false("GeomErrorbar" %in% layers)
  expect_silent(ggplot_build(p))
})

test_that("averaging over several flows is reported", {
  d <- make_table()
  setnames(d, c("Flow", "Value"), c("active.flow", "active.flow-ReceivedBitRate"))
  expect_warning(npm_plot_summary(d, x = "rho", y = "active.flow-ReceivedBitRate", colour = "Gamma"),
                 "several values of active.flow", class = "npm_warning")
  expect_silent(npm_plot_summary(d, x = "rho", y = "active.flow-ReceivedBitRate", colour = "Gamma",
                                 filter = "`active.flow` == 1"))
  expect_silent(npm_plot_summary(d, x = "rho", y = "active.flow-ReceivedBitRate", colour = "Gamma",
                                 facet_cols = "active.flow"))
})

test_that("categorical x values keep the table's order, numeric ones their value", {
  d <- data.table(cross = rep(c("none", "50", "100"), each = 3), rep = rep(1:3, 3),
                  jitter = c(5, 6, 7, 30, 35, 40, 100, 110, 120))
  p <- npm_plot_summary(d, x = "cross", y = "jitter")
  expect_equal(levels(p$data$.x), c("none", "50", "100"))
  expect_equal(as.character(p$data$.x[which.max(p$data$Mean)]), "100")
  d2 <- d[c(7:9, 1:6)]
  expect_equal(levels(npm_plot_summary(d2, x = "cross", y = "jitter")$data$.x), c("100", "none", "50"))
  n <- data.table(rho = rep(c(10, 2, 1), each = 2), goodput = 1:6)
  expect_equal(npm_plot_summary(n, x = "rho", y = "goodput")$data$.x, c(1, 2, 10))
})

test_that("a legend under the plot fits a 7-inch page with five long variant names", {
  variants <- c("nrsack", "nrsack+smartfr", "nrsack+split", "nrsack+split+smartfr", "fast-only")
  d <- data.table(delta = rep(c(1, 10, 100), each = 10), variant = rep(variants, 6), goodput = seq_len(30))
  p <- npm_plot_summary(d, x = "delta", y = "goodput", colour = "variant")
  grDevices::pdf(NULL, width = 7, height = 5)
  on.exit(grDevices::dev.off())
  g <- ggplot2::ggplotGrob(p)
  box <- g$grobs[[which(g$layout$name == "guide-box")]]
  expect_lt(grid::convertWidth(gtable::gtable_width(box), "in", valueOnly = TRUE), 7)
})
