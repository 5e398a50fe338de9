# Label markup becomes plotmath; text is never evaluated. Unit conversions.

test_that("markup becomes plotmath", {
  expect_equal(npm_markup_to_plotmath("\\rho_{DFN}"), "rho[\"DFN\"]")
  expect_equal(npm_markup_to_plotmath("\\Gamma"), "Gamma")
  expect_equal(npm_markup_to_plotmath("Bandwidth \\rho_{DFN} [Mbit/s]"),
               "paste(\"Bandwidth \", rho[\"DFN\"], \" [Mbit/s]\")")
  expect_equal(npm_markup_to_plotmath("CMT/RP_{v1}"), "paste(\"CMT/\", \"RP\"[\"v1\"])")
  expect_equal(npm_markup_to_plotmath("x^2"), "\"x\"^{\"2\"}")
  expect_equal(npm_markup_to_plotmath("a\\_b"), "\"a_b\"")
  expect_equal(npm_markup_to_plotmath("s_{\\alpha}"), "\"s\"[alpha]")
  expect_identical(npm_label("Throughput [Mbit/s]"), "Throughput [Mbit/s]")
  expect_true(is.call(npm_label("\\rho_{DFN}")))
  expect_true(is.expression(npm_labels(c("cmt", "CMT/RP_{v1}"))))
  expect_identical(npm_labels(c("a", "b")), c("a", "b"))
})

test_that("labels are rendered, not evaluated", {
  marker <- tempfile("npm-pwned-")
  l <- npm_label(sprintf("\\rho_{x\"); file.create(\"%s\"); (\"}", marker))
  expect_true(is.call(l))
  f <- tempfile(fileext = ".png")
  png(f)
  plot(1, main = l)
  dev.off()
  expect_false(file.exists(marker))
})

test_that("unit conversions", {
  expect_equal(npm_unit_factor("bit/s", "Mbit/s"), 1e-6)
  expect_equal(npm_unit_factor("B/s", "kbit/s"), 8e-3)
  expect_equal(npm_unit_factor("KiB", "B"), 1024)
  expect_equal(npm_unit_factor("s", "ms"), 1000)
  expect_equal(npm_parse_unit_conversion("bit/s:Gbit/s"), 1e-9)
  expect_equal(npm_parse_unit_conversion("byte/s->Mbit/s"), 8e-6)
  expect_error(npm_unit_factor("furlong", "m"), "unknown unit", class = "npm_error")
  expect_equal(npm_auto_unit(c(1, 2.5e6), "bit/s")$unit, "Mbit/s")
  expect_equal(npm_auto_unit(c(0, 999), "B")$unit, "B")
})

test_that("command-line parsing", {
  spec <- list(list(long = "output", short = "o", value = TRUE), list(long = "grey"),
               list(long = "value-label", value = TRUE, `repeat` = TRUE))
  a <- npm_parse_args(c("in.data", "-o", "x.pdf", "--grey", "--value-label=a:1=b",
                        "--value-label", "a:2=c", "--", "-weird"), spec)
  expect_equal(a$positional, c("in.data", "-weird"))
  expect_equal(a$options$output, "x.pdf")
  expect_true(a$options$grey)
  expect_equal(a$options$`value-label`, c("a:1=b", "a:2=c"))
  expect_equal(npm_parse_args("--out=y", spec)$options$output, "y")   # unique prefix
  expect_error(npm_parse_args("--bogus", spec), "unknown option --bogus", class = "npm_error")
  expect_error(npm_parse_args("-o", spec), "needs a value", class = "npm_error")
  expect_equal(npm_parse_range("2:10", "r"), c(2, 10))
  expect_equal(npm_parse_range("5:", "r"), c(5, NA))
  expect_equal(npm_parse_range(":5", "r"), c(NA, 5))
  expect_error(npm_parse_range("5:2", "r"), "empty", class = "npm_error")
})

test_that("summary axes are titled by the metric and its unit; --xlab/--ylab win", {
  d <- data.table(rhoDFN = rep(c(1e6, 2e6), each = 3), Gamma = "cmt", active.flow = 0,
                  `active.flow-ReceivedBitRate` = c(1, 1.1, 0.9, 2, 2.1, 1.9) * 1e6)
  y <- "active.flow-ReceivedBitRate"
  p <- npm_plot_summary(d, x = "rhoDFN", y = y)
  expect_identical(p$labels$y, "Received bit rate (active.flow) [bit/s]")
  expect_identical(p$labels$x, "rhoDFN")
  # after a unit conversion the axis shows the unit converted to, and the values are in it
  p <- npm_plot_summary(d, x = "rhoDFN", y = y, x_unit = "bit/s:Mbit/s", y_unit = "bit/s:kbit/s")
  expect_identical(p$labels$y, "Received bit rate (active.flow) [kbit/s]")
  expect_identical(p$labels$x, "rhoDFN [Mbit/s]")
  expect_equal(sort(attr(p, "summary")$Mean), c(1000, 2000))
  # a bare scale factor: the unit it leaves
  p <- npm_plot_summary(d, x = "rhoDFN", y = y, y_scale = 1e-6)
  expect_identical(p$labels$y, "Received bit rate (active.flow) [1e+06 bit/s]")
  # a conversion from another unit than the column's is said
  expect_warning(npm_plot_summary(d, x = "rhoDFN", y = y, y_unit = "B/s:kB/s"),
                 "is in bit/s, but the unit conversion B/s:kB/s starts from B/s", class = "npm_warning")
  p <- npm_plot_summary(d, x = "rhoDFN", y = y, y_unit = "bit/s:Mbit/s",
                        xlab = "Bandwidth \\rho_{DFN} [Mbit/s]", ylab = "Throughput [Mbit/s]")
  expect_identical(p$labels$y, "Throughput [Mbit/s]")
  expect_true(is.call(p$labels$x))                       # markup: plotmath
  expect_match(paste(deparse(p$labels$x), collapse = ""), "rho\\[\"DFN\"\\]")
  # other metrics of createsummary tables
  expect_identical(npm_axis_label("passive.totalCPU-User"), "User (passive.totalCPU) [%]")
  expect_identical(npm_axis_label("active.flow.path-MeanRTT"), "Mean RTT (active.flow.path) [ms]")
  expect_identical(npm_axis_label("active.flow-TransmittedBytes", conversion = "B:MiB"),
                   "Transmitted bytes (active.flow) [MiB]")
  expect_identical(npm_axis_label("active.flow-LostPackets"), "Lost packets (active.flow)")
  expect_identical(npm_axis_label("passive.flow-ReceivedFrameRate"),
                   "Received frame rate (passive.flow) [frames/s]")
})

test_that("command-line parsing as getopt_long_only: one dash or two, abbreviations, bundles", {
  spec <- list(list(long = "output", short = "o", value = TRUE), list(long = "quiet", short = "q"),
               list(long = "version", short = "v"), list(long = "no-points", short = "n"),
               list(long = "grey"), list(long = "gray", same = "grey"),
               list(long = "x", short = "x", value = TRUE), list(long = "x-unit", value = TRUE),
               list(long = "x-limits", value = TRUE))
  for (v in c("--version", "-version", "-v", "-vers", "--vers"))
    expect_identical(npm_parse_args(v, spec)$options, list(version = TRUE), info = v)
  for (o in list(c("-o", "f"), "-of", c("-output", "f"), "-output=f", "--output=f", c("--out", "f"), "-out=f"))
    expect_identical(npm_parse_args(o, spec)$options, list(output = "f"), info = paste(o, collapse = " "))
  expect_identical(npm_parse_args("-qn", spec)$options, list(quiet = TRUE, `no-points` = TRUE))
  expect_identical(npm_parse_args("-gray", spec)$options, list(grey = TRUE))
  expect_identical(npm_parse_args("-gr", spec)$options, list(grey = TRUE))   # one option, two names
  expect_identical(npm_parse_args(c("-x", "rho", "-x-unit=s:ms"), spec)$options, list(x = "rho", `x-unit` = "s:ms"))
  expect_identical(npm_parse_args("-xrho", spec)$options, list(x = "rho"))
  expect_error(npm_parse_args("-version=1", spec), "option -version=1 takes no value", class = "npm_error")
  expect_error(npm_parse_args("-frobnicate", spec), "unknown option -frobnicate", class = "npm_error")
  expect_error(npm_parse_args("-qz", spec), "unknown option -qz", class = "npm_error")
  expect_error(npm_parse_args("-x-=1", spec), "option -x-=1 is ambiguous \\(--x-unit, --x-limits\\)",
               class = "npm_error")
  expect_error(npm_parse_args(c("-output"), spec), "option -output needs a value", class = "npm_error")
  expect_identical(npm_parse_args(c("-1.5", "-"), spec)$positional, c("-1.5", "-"))
})
