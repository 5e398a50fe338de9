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
  png(f); plot(1, main = l); dev.off()
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
