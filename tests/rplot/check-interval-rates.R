# Checks the rates the run figures of npmplot draw against the configured rates of
# constant-rate flows (see e2e-interval-rates.sh):
#   Rscript check-interval-rates.R CONFIG RUNTIME {FLOW OUT_RATE OUT_BYTES IN_RATE IN_BYTES}...
# FLOW is the flow's label in the figures; rates in frames/s, sizes in bytes per frame.
# Prints every interval; exits 1 when one is off by more than 1 %.
args <- commandArgs(TRUE)
lib <- strsplit(Sys.getenv("NPM_RPLOT_LIBRARY"), ":", fixed = TRUE)[[1]]
.libPaths(c(lib[nzchar(lib)], .libPaths()))       # the package of the build tree
suppressPackageStartupMessages({
  library(npmplot)
  library(data.table)
})
config <- args[1]
runtime <- as.numeric(args[2])
spec <- matrix(args[-(1:2)], ncol = 5L, byrow = TRUE)
tolerance <- 0.01

run <- npm_read_run(config)
plots <- npm_run_plots(run, per_flow = FALSE)
titles <- vapply(plots, `[[`, "", "title")
# The data frames the figures draw: two points per interval (its start and its end).
drawn <- function(title, column) {
  p <- plots[[match(title, titles)]]$plot
  d <- as.data.table(p$data)
  if (!(column %in% names(d))) stop(sprintf("the %s figure draws no column %s", title, column))
  d
}
bits <- drawn("Bit rate", "BitRateS")
unit <- sub("^Bit rate \\[(.*)\\]$", "\\1", plots[[match("Bit rate", titles)]]$plot$labels$y)
bits[, Value := BitRateS / npm_unit_factor("bit/s", unit)]          # back to bit/s
frames <- drawn("Frame rate", "FrameRate")[, Value := FrameRate]

failures <- 0L
check <- function(d, what, flow, node, action, expected) {
  s <- d[as.character(Flow) == flow & Node == node & Action == action]   # in drawing order
  if (nrow(s) == 0L || nrow(s) %% 2L) {
    cat(sprintf("FAIL %s, %s, %s at the %s node: %d points drawn\n", what, flow, action, node, nrow(s)))
    failures <<- failures + 1L
    return(invisible())
  }
  iv <- data.table(Start = s$RelTime[c(TRUE, FALSE)], End = s$RelTime[c(FALSE, TRUE)],
                   From = s$Value[c(TRUE, FALSE)], To = s$Value[c(FALSE, TRUE)])
  # Three full seconds and the half one after them: all of them drawn, the last one too.
  n_ok <- nrow(iv) == 4L && abs(iv$End[4] - iv$Start[4] - (runtime - 3)) < 0.05
  for (i in seq_len(nrow(iv))) {
    off <- iv$From[i] / expected - 1
    ok <- iv$From[i] == iv$To[i] && abs(off) <= tolerance
    cat(sprintf("%s %-10s %-16s %-8s %-7s (%.3f, %.3f] s: %12.1f, configured %10.1f (%+.2f %%)\n",
                if (ok) "ok  " else "FAIL", what, flow, action, node, iv$Start[i], iv$End[i],
                iv$From[i], expected, 100 * off))
    if (!ok) failures <<- failures + 1L
  }
  if (!n_ok) {
    cat(sprintf(paste0("FAIL %s, %s, %s at the %s node: %d intervals drawn, the last (%.3f, %.3f] s; ",
                       "expected 4, the last %.1f s long\n"),
                what, flow, action, node, nrow(iv), iv$Start[nrow(iv)], iv$End[nrow(iv)], runtime - 3))
    failures <<- failures + 1L
  }
}
for (k in seq_len(nrow(spec))) {
  flow <- spec[k, 1]
  r <- as.numeric(spec[k, 2:5])
  for (x in list(list("Active", "Sent", r[1], r[2]), list("Passive", "Received", r[1], r[2]),
                 list("Passive", "Sent", r[3], r[4]), list("Active", "Received", r[3], r[4]))) {
    check(bits, "bit rate", flow, x[[1]], x[[2]], x[[3]] * x[[4]] * 8)
    check(frames, "frame rate", flow, x[[1]], x[[2]], x[[3]])
  }
}
quit(save = "no", status = if (failures) 1 else 0)
