# The BCa intervals of npmplot against netperfmeter-lab's (src/lab/npmlab/stats.py), fed the same
# numbers (see e2e-intervals.sh):
#   Rscript check-bca-lab.R LAB_SOURCE_DIR PLOT_PROGRAM WORK_DIR
# 1. npm_bca_bounds() and stats.bca_bounds() on the same replicates and jackknife values: equal to
#    1e-9 (the same arithmetic).
# 2. The resampled intervals (4000 resamples each, R's and Python's generators) of skewed, bimodal
#    and normal samples: the means of 12 seeds' bounds agree within 4 standard errors of their
#    difference (measured from the seeds' spread), and each single interval is within 5 Monte Carlo
#    standard deviations of the other implementation's mean.
# 3. plot-netperfmeter-summary --ci=bca: the dumped intervals of those samples, and the points the
#    lab gives no interval (single run, too few runs, no spread), agree with stats.interval().
# Prints every comparison; exits 1 when one fails.
args <- commandArgs(TRUE)
lab <- args[1]
prog <- args[2]
work <- args[3]
lib <- strsplit(Sys.getenv("NPM_RPLOT_LIBRARY"), ":", fixed = TRUE)[[1]]
.libPaths(c(lib[nzchar(lib)], .libPaths()))
suppressPackageStartupMessages({
  library(npmplot)
  library(data.table)
})
failures <- 0L
check <- function(ok, fmt, ...) {
  cat(if (ok) "ok   " else "FAIL ", sprintf(fmt, ...), "\n", sep = "")
  if (!ok) failures <<- failures + 1L
}
# Runs python3 with the lab's package on its path; returns its output lines.
python <- function(code, ...) {
  out <- system2("python3", c("-c", shQuote(paste0("import sys; sys.path.insert(0, sys.argv[1])\n", code)),
                              shQuote(lab), vapply(list(...), shQuote, "")), stdout = TRUE)
  if (!is.null(attr(out, "status"))) stop("python3 failed: ", paste(out, collapse = "\n"))
  out
}
numbers <- function(v) paste(sprintf("%.17g", v), collapse = " ")

set.seed(20261207)
samples <- list(
  exponential = rexp(15, 1 / 20),                                 # skewed: the acceleration matters
  collapse = c(rnorm(8, 10, 0.3), rnorm(2, 4.5, 0.3)),            # a run in five that collapses
  normal = rnorm(12, 100, 5),
  lognormal = rlnorm(30, 2, 0.8))
level <- 0.95

# 1. The same arithmetic on the same replicates.
exact_in <- file.path(work, "bounds-in.txt")
lines <- character(0)
r_bounds <- list()
for (name in names(samples)) for (lv in c(0.9, 0.95, 0.99)) {
  v <- samples[[name]]
  reps <- replicate(2000, mean(sample(v, replace = TRUE)))
  jack <- (sum(v) - v) / (length(v) - 1)
  lines <- c(lines, sprintf("%s %.17g %.17g", name, mean(v), lv), numbers(reps), numbers(jack))
  r_bounds[[length(r_bounds) + 1L]] <- c(npm_bca_bounds(mean(v), reps, jack, lv))
}
writeLines(lines, exact_in)
py <- python('
from npmlab import stats
lines = open(sys.argv[2]).read().splitlines()
for i in range(0, len(lines), 3):
    name, estimate, level = lines[i].split()
    reps = [float(x) for x in lines[i + 1].split()]
    jack = [float(x) for x in lines[i + 2].split()]
    print("%.17g %.17g" % stats.bca_bounds(float(estimate), reps, jack, float(level)))
', exact_in)
for (k in seq_along(py)) {
  p <- as.numeric(strsplit(py[k], " ")[[1]])
  r <- r_bounds[[k]]
  check(max(abs(p - r) / pmax(abs(p), 1e-300)) < 1e-9, "bca_bounds %d: R %.10g %.10g, Python %.10g %.10g",
        k, r[1], r[2], p[1], p[2])
}

# 2. Resampled intervals of the same samples, 12 seeds each side.
seeds <- 1:12
values_file <- file.path(work, "samples.txt")
writeLines(vapply(names(samples), function(n) paste(n, numbers(samples[[n]])), ""), values_file)
py <- python('
from npmlab import stats
for line in open(sys.argv[2]).read().splitlines():
    name, *v = line.split()
    v = [float(x) for x in v]
    for k in range(1, 13):
        got = stats.interval(v, 0.95, ("npmplot", name, k))
        print(name, k, "%.17g %.17g" % (got["low"], got["high"]), got["procedure"])
', values_file)
py <- fread(text = py, header = FALSE, col.names = c("name", "k", "low", "high", "p1"))
for (sample_name in names(samples)) {
  v <- samples[[sample_name]]
  r <- t(vapply(seeds, function(s) npm_bca_mean(v, level, 4000L, s), c(0, 0)))
  p <- as.matrix(py[name == sample_name, .(low, high)])
  se <- sd(v) / sqrt(length(v))
  for (b in 1:2) {
    what <- c("low", "high")[b]
    diff <- mean(r[, b]) - mean(p[, b])
    tol <- 4 * sqrt(var(r[, b]) / nrow(r) + var(p[, b]) / nrow(p))
    check(abs(diff) <= tol,
          paste0("%-11s %-4s bound: R %.4f (MC sd %.4f), Python %.4f (MC sd %.4f); difference %.4f, ",
                 "allowed %.4f (%.2f standard errors of the mean)"),
          sample_name, what, mean(r[, b]), sd(r[, b]), mean(p[, b]), sd(p[, b]), diff, tol, abs(diff) / se)
    mc <- sqrt((var(r[, b]) + var(p[, b])) / 2)
    check(all(abs(r[, b] - mean(p[, b])) <= 5 * mc) && all(abs(p[, b] - mean(r[, b])) <= 5 * mc),
          "%-11s %-4s bound: every single interval within 5 MC sd (%.4f) of the other's mean", sample_name, what, mc)
  }
}

# 3. Through the program: a table of those samples and of points without an interval.
special <- list(single = 42, few = c(1, 3, 2, 5, 4), flat = rep(7, 12))
all_samples <- c(samples, special)
table <- file.path(work, "bca.data")
d <- rbindlist(lapply(names(all_samples), function(n) {
  data.table(sample = n, Repetition = seq_along(all_samples[[n]]), value = all_samples[[n]])
}))
fwrite(d, table, sep = " ")
dump <- file.path(work, "bca-dump.csv")
rc <- system2(prog, c(shQuote(table), "-x", "sample", "-y", "value", "--ci=bca", "--seed=3", "-q",
                      "-o", shQuote(file.path(work, "bca.pdf")), paste0("--dump=", shQuote(dump))))
check(rc == 0, "plot-netperfmeter-summary --ci=bca exits %d", rc)
s <- fread(dump)
values_file <- file.path(work, "all-samples.txt")
writeLines(vapply(names(all_samples), function(n) paste(n, numbers(all_samples[[n]])), ""), values_file)
py <- python('
from npmlab import stats
for line in open(sys.argv[2]).read().splitlines():
    name, *v = line.split()
    got = stats.interval([float(x) for x in v], 0.95, ("npmplot", name))
    print("%s\t%s\t%s\t%s" % (name, "NA" if got["low"] is None else "%.17g" % got["low"],
                             "NA" if got["high"] is None else "%.17g" % got["high"], got["procedure"]))
', values_file)
py <- fread(text = py, header = FALSE, sep = "\t", col.names = c("name", "low", "high", "procedure"))
for (n in names(all_samples)) {
  mine <- s[sample == n]
  theirs <- py[name == n]
  if (n %in% names(special)) {
    # the same rule: no interval, for the same reason (the lab adds ": no interval" to "single run")
    check(is.na(mine$Lower) && is.na(theirs$low) && startsWith(theirs$procedure, mine$Interval),
          "%-11s no interval: R \"%s\", lab \"%s\"", n, mine$Interval, theirs$procedure)
  } else {
    r <- t(vapply(seeds, function(k) npm_bca_mean(all_samples[[n]], level, 4000L, k), c(0, 0)))
    mc <- apply(r, 2, sd)
    ok <- mine$Interval == "bca(4000)" && theirs$procedure == "bca(4000)" &&
          all(abs(c(mine$Lower, mine$Upper) - c(theirs$low, theirs$high)) <= 5 * sqrt(2) * mc)
    check(ok, "%-11s plotted [%.4f, %.4f], lab's summary [%.4f, %.4f] (allowed: 5 x %.4f, %.4f)",
          n, mine$Lower, mine$Upper, theirs$low, theirs$high, sqrt(2) * mc[1], sqrt(2) * mc[2])
  }
}
cat(if (failures) sprintf("%d comparisons failed\n", failures) else "all comparisons agree\n")
quit(save = "no", status = if (failures) 1L else 0L)
