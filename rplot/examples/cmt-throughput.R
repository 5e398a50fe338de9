#!/usr/bin/env Rscript
# The classic figure of the CMT research this tool-chain accompanies: application
# payload throughput of a CMT-SCTP flow and of a concurrent single-path reference
# flow versus the bandwidth rho_DFN of path 1 (path 2: an 800 kbit/s ADSL uplink),
# one curve per congestion control Gamma (cmt, cmtrpv1, cmtrpv2, like-mptcp),
# mean and 95 % confidence interval over 5 runs.
#
#   Rscript cmt-throughput.R [OUTDIR]
#
# writes OUTDIR/active.flow-ReceivedBitRate.data.bz2, a SYNTHETIC createsummary table
# shaped like the one a real parameter study produces (the numbers follow the
# published trends, they are not measurements), and draws it as
# OUTDIR/cmt-throughput.pdf and .png with the R package npmplot. The same figure
# from the command line:
#
#   plot-netperfmeter-summary OUTDIR/active.flow-ReceivedBitRate.data.bz2 \
#     -x rhoDFN -c Gamma -k active.flow --x-unit=bit/s:Mbit/s --y-unit=bit/s:Mbit/s \
#     --xlab='Bandwidth \rho_{DFN} of path 1 [Mbit/s]' \
#     --ylab='Application payload throughput [Mbit/s]' --colour-title='\Gamma' \
#     --value-label='active.flow:0=CMT-SCTP flow' \
#     --value-label='active.flow:1=Reference flow (SCTP)' -o cmt-throughput.pdf

args <- commandArgs(TRUE)
outdir <- if (length(args)) args[1] else "."

# The R package npmplot: installed in one of R's library paths (/usr/lib/R/site-library,
# /usr/local/lib/R/site-library), or in a library directory named by $NPM_RPLOT_LIBRARY
# (e.g. the build tree's rplot/library) or R_LIBS.
lib <- strsplit(Sys.getenv("NPM_RPLOT_LIBRARY"), ":", fixed = TRUE)[[1]]
suppressPackageStartupMessages(library(npmplot, lib.loc = c(lib[nzchar(lib)], .libPaths())))

# ---- a synthetic createsummary table ----------------------------------------
set.seed(2011)
rho <- c(0.8, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20) * 1e6   # rates in bit/s
adsl <- 0.8e6
model <- list(   # throughput [bit/s] of (CMT flow, reference flow) at rho
  "cmt"        = function(r) c(0.485 * r + 0.94 * adsl, 0.48 * r),
  "cmtrpv1"    = function(r) c(0.19 * r + 0.80 * adsl, 0.76 * r),
  "cmtrpv2"    = function(r) c(0.465 * r + 0.70 * adsl, 0.49 * r),
  "like-mptcp" = function(r) c(0.455 * r + 0.72 * adsl, 0.495 * r))
rows <- list()
value_no <- 0L
for (g in names(model)) for (r in rho) for (run in 1:5) {
  value_no <- value_no + 1L          # one scalar file per run
  m <- model[[g]](r)
  v <- m * rnorm(2, 1, 0.025) + rnorm(2, 0, 0.04e6)
  rows[[length(rows) + 1L]] <- sprintf("0\t%d\t\"\"\t%d\t%s %.0f %d\t%f", value_no, 0:1, g, r,
                                       run, pmax(v, 0))
}
table <- file.path(outdir, "active.flow-ReceivedBitRate.data.bz2")
con <- bzfile(table, "w")
writeLines(c("RunNo\tValueNo\tSplit\tactive.flow\tGamma rhoDFN Repetition\tactive.flow-ReceivedBitRate",
             unlist(rows)), con)
close(con)

# ---- the figure: a few lines with the library --------------------------------
d <- npm_read_summary(table)
p <- npm_plot_summary(d, x = "rhoDFN", y = "active.flow-ReceivedBitRate",
                      colour = "Gamma", facet_cols = "active.flow",
                      x_scale = npm_unit_factor("bit/s", "Mbit/s"),
                      y_scale = npm_unit_factor("bit/s", "Mbit/s"),
                      xlab = "Bandwidth \\rho_{DFN} of path 1 [Mbit/s]",
                      ylab = "Application payload throughput [Mbit/s]",
                      colour_title = "Congestion control \\Gamma",
                      value_labels = list(
                        active.flow = c("0" = "CMT-SCTP flow", "1" = "Reference flow (SCTP)"),
                        Gamma = c("cmt" = "CMT", "cmtrpv1" = "CMT/RP_{v1}",
                                  "cmtrpv2" = "CMT/RP_{v2}", "like-mptcp" = "MPTCP-like")))
files <- c(npm_save_plots(p, file.path(outdir, "cmt-throughput.pdf"), width = 9, height = 4.8),
           npm_save_plots(p, file.path(outdir, "cmt-throughput.png"), width = 9, height = 4.8,
                          dpi = 150))
cat(c(table, files), sep = "\n")
