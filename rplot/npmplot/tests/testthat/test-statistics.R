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

test_that("one repetition has no interval, constant values a zero-width one", {
  r <- npm_mean_ci(42)
  expect_equal(r$Mean, 42)
  expect_true(is.na(r$Lower) && is.na(r$Upper))
  r <- npm_mean_ci(c(5, 5, 5))
  expect_equal(c(r$Lower, r$Mean, r$Upper), c(5, 5, 5))
  r <- npm_mean_ci(c(1, NA, 3))
  expect_equal(r$N, 2)
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
