# Checks the data the trace figure of npmplot draws against the per-path vector it comes from
# (see e2e-traces.sh):   Rscript check-traces.R CONFIG PATHS_VECTOR
# The vector is read here with read.delim() (not the package's reader). Every sample of every
# path (and of the association row) must be one point of its panel, at its recorded RelTime,
# with the vector's value in the panel's unit; no point the vector does not hold; the sum of
# the paths' windows is the sum of the paths' samples at each instant; the lines are steps.
# Prints a line per check; exits 1 on a failure.
args <- commandArgs(TRUE)
lib <- strsplit(Sys.getenv("NPM_RPLOT_LIBRARY"), ":", fixed = TRUE)[[1]]
.libPaths(c(lib[nzchar(lib)], .libPaths()))       # the package of the build tree
suppressPackageStartupMessages({
  library(npmplot)
  library(data.table)
})
config <- args[1]
raw <- read.delim(bzfile(args[2]), na.strings = "NA", colClasses = c(Local = "character",
                  Remote = "character", State = "character"))
raw <- as.data.table(raw)

plots <- npm_trace_plots(npm_read_traces(config, nodes = "Active"))
failures <- 0L
report <- function(ok, fmt, ...) {
  cat(if (ok) "ok   " else "FAIL ", sprintf(fmt, ...), "\n", sep = "")
  if (!ok) failures <<- failures + 1L
}
report(length(plots) == 1L, "one page (flow 0, active node): %d", length(plots))
p <- plots[[1]]$plot
d <- as.data.table(p$data)
report(inherits(p$layers[[1]]$geom, "GeomStep") && identical(p$layers[[1]]$geom_params$direction, "hv"),
       "drawn as steps (hv): a sample holds until the next")

# The points of one panel and series, against the vector's column (in the panel's unit).
expect_series <- function(quantity, line, path, want, what) {
  got <- d[Quantity == quantity & Line == line & (if (is.na(path)) is.na(Path) else Path == path)]
  setorder(got, RelTime)
  w <- want[is.finite(Value)][order(RelTime)]
  # The times as recorded (microseconds), not bit for bit: the package reads the vector with
  # data.table's fread() and this check with read.delim(), whose decimal conversions differ in the
  # last bit for some values ("3.116452": 3.1164520000000002 against 3.1164519999999998). A
  # point drawn a microsecond off still fails: 1e-12 is far below 1e-6 s at a run's times.
  ok <- nrow(got) == nrow(w) && nrow(w) > 0L && isTRUE(all.equal(got$RelTime, w$RelTime, tolerance = 1e-12)) &&
    isTRUE(all.equal(got$Value, w$Value, tolerance = 1e-12))
  bad <- if (nrow(got) == nrow(w)) which(abs(got$Value - w$Value) > 1e-9 * pmax(1, abs(w$Value)) |
                                           abs(got$RelTime - w$RelTime) > 1e-9)[1] else NA
  report(ok, "%-34s %d samples in the vector, %d points drawn%s", what, nrow(w), nrow(got),
         if (!ok && !is.na(bad)) sprintf("; first difference at t = %.6f s: drawn %g, recorded %g",
                                         w$RelTime[bad], got$Value[bad], w$Value[bad]) else "")
}
paths <- sort(unique(raw$Path[raw$Path >= 0]))
report(length(paths) == 2L, "two paths in the vector: %s", paste(paths, collapse = ", "))
for (k in paths) {
  r <- raw[Path == k]
  expect_series("cwnd", "cwnd", k, r[, .(RelTime, Value = Cwnd / 1000)], sprintf("path %d cwnd [kB]", k))
  expect_series("sent_acked", "value", k, r[, .(RelTime, Value = (BytesSent - BytesAcked) / 1000)],
                sprintf("path %d sent - acked [kB]", k))
  expect_series("rtt", "value", k, r[, .(RelTime, Value = RTT)], sprintf("path %d SRTT [ms]", k))
}
a <- raw[Path == -1]
expect_series("rwnd", "value", -1, a[, .(RelTime, Value = Rwnd / 1000)], "association peer rwnd [kB]")
expect_series("sendbuf", "value", -1, a[, .(RelTime, Value = Unacked)], "association send buffer [chunks]")
s <- raw[Path >= 0, .(Value = sum(Cwnd) / 1000, RelTime = RelTime[1], n = .N), by = AbsTime][n == length(paths)]
expect_series("cwnd", "cwnd", NA, s[, .(RelTime, Value)], "sum of the paths' cwnd [kB]")
# Nothing else: every point drawn is one of the above.
checked <- c("cwnd", "sent_acked", "rtt", "rwnd", "sendbuf")
report(all(d$Quantity %in% checked), "no other panel drawn for the active node: %s",
       paste(unique(d$Quantity), collapse = ", "))
report(!any(is.finite(raw$Ssthresh)) && nrow(d[Line == "ssthresh"]) == 0L,
       "no ssthresh (SCTP tells none) and none drawn")
quit(save = "no", status = if (failures) 1 else 0)
