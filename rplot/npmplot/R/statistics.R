# Means, confidence intervals (t, bootstrap BCa, or given in the table), grouping and row filters.
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

# The interval methods of npm_summarise() and npm_plot_summary(): "t" (as t.test()), "bca" (the
# bootstrap BCa interval of the mean, as netperfmeter-lab computes it: src/lab/npmlab/stats.py),
# "given" (the table's own columns, see npm_given_columns()) and "none".
NPM_CI_METHODS <- c("t", "bca", "given", "none")  # nolint: object_name_linter. Exported name (NAMESPACE).
# BCa: resamples per interval and fewest runs, netperfmeter-lab's RESAMPLES and MIN_RUNS (the
# lab measured that the 95 % BCa interval of 5 runs of an outcome that collapses in one run of
# five holds its mean in 66 % of samples, of 10 runs in 88 %).
NPM_BCA_RESAMPLES <- 4000L  # nolint: object_name_linter. Exported name (NAMESPACE).
NPM_BCA_MIN_RUNS <- 10L  # nolint: object_name_linter. Exported name (NAMESPACE).

# Mean and confidence interval from the t-distribution (as t.test()) of a numeric vector.
# One value, or values that are all equal (t.test() refuses them): no interval (NA bounds).
npm_mean_ci <- function(v, level = 0.95) {
  v <- v[!is.na(v)]
  n <- length(v)
  m <- if (n) mean(v) else NA_real_
  s <- if (n > 1L) sd(v) else NA_real_
  h <- if (n > 1L && s > 0) qt((1 + level) / 2, df = n - 1L) * s / sqrt(n) else NA_real_
  list(N = n, Mean = m, SD = s, Lower = m - h, Upper = m + h)
}

# The BCa bounds c(low, high) at `level` from the statistic's estimate on the sample, its
# bootstrap replicates and its jackknife (leave-one-out) values (Efron and Tibshirani 1993,
# (14.9)-(14.15)): bias correction z0 = qnorm(share of replicates below the estimate, ties half,
# kept within [0.5/B, 1 - 0.5/B]), acceleration a = sum(d^3) / (6 sum(d^2)^1.5) with
# d = mean(jackknife) - jackknife; each bound is the replicates' quantile at
# pnorm(z0 + (z0 + z) / (1 - a (z0 + z))), read from the sorted replicates at position
# p B - 0.5 (from 0), interpolated between neighbours. The same arithmetic as bca_bounds() of
# netperfmeter-lab's stats.py, so that a figure and the lab's table agree.
npm_bca_bounds <- function(estimate, replicates, jackknife, level = 0.95) {
  reps <- sort(replicates)
  b <- length(reps)
  below <- sum(reps < estimate) + 0.5 * sum(reps == estimate)
  z0 <- qnorm(min(max(below / b, 0.5 / b), 1 - 0.5 / b))
  d <- mean(jackknife) - jackknife
  s2 <- sum(d^2)
  a <- if (s2 > 0) sum(d^3) / (6 * s2^1.5) else 0
  z <- qnorm(c((1 - level) / 2, (1 + level) / 2))
  pos <- pmin(pmax(pnorm(z0 + (z0 + z) / (1 - a * (z0 + z))) * b - 0.5, 0), b - 1)
  i <- floor(pos)
  reps[i + 1L] + (pos - i) * (reps[pmin(i + 2L, b)] - reps[i + 1L])
}

# The BCa interval of the mean of v from `resamples` bootstrap resamples drawn with R's
# Mersenne-Twister seeded by `seed`; the caller's random state is left as it was.
npm_bca_mean <- function(v, level = 0.95, resamples = NPM_BCA_RESAMPLES, seed = 1L) {
  n <- length(v)
  idx <- npm_with_seed(seed, sample.int(n, n * resamples, replace = TRUE))
  replicates <- colMeans(matrix(v[idx], nrow = n))
  npm_bca_bounds(mean(v), replicates, (sum(v) - v) / (n - 1L), level)
}

npm_with_seed <- function(seed, expr) {
  env <- globalenv()
  old <- if (exists(".Random.seed", envir = env, inherits = FALSE)) get(".Random.seed", envir = env)
  on.exit(if (is.null(old)) rm(".Random.seed", envir = env) else assign(".Random.seed", old, envir = env))
  set.seed(seed, kind = "Mersenne-Twister", normal.kind = "Inversion", sample.kind = "Rejection")
  expr
}

# The seed of one point's resamples: the seed and the point's group values, so that a point's
# interval does not depend on the other points of the table (nor on a filter).
npm_point_seed <- function(seed, key) {
  h <- 0
  for (code in utf8ToInt(enc2utf8(key))) h <- (h * 131 + code) %% 2147483629
  as.integer((seed + h) %% 2147483629)
}

# The columns of an interval given in the table (--ci=given): ci_low/ci_high (netperfmeter-lab's
# summary.csv and plot tables), else Lower/Upper (npm_summarise(), --dump), in any case; with
# them the count of runs behind it (n or N) and the reason there is none (procedure or
# Interval), where the table has those.
npm_given_columns <- function(data, exclude = character(0)) {
  nm <- setdiff(names(data), exclude)
  low <- tolower(nm)
  for (pair in list(c("ci_low", "ci_high"), c("lower", "upper"))) {
    k <- match(pair, low)
    if (!anyNA(k))
      return(list(low = nm[k[1]], high = nm[k[2]], n = nm[match("n", low)],
                  reason = c(nm[low %in% c("procedure", "interval")], NA_character_)[1]))
  }
  npm_stop("--ci=given needs the columns ci_low and ci_high (or Lower and Upper); the table has %s",
           paste(names(data), collapse = ", "))
}

# N, Mean, SD, Lower, Upper and Interval of one point: the values v of its runs, the method, and
# for "given" the given columns' values of its rows (list(low, high, n, reason)). No interval
# (NA bounds, Interval saying why) for a single run, fewer than min_runs, runs that all measured
# the same value, and where the given interval is NA or has no width: a bar of no width would
# claim a certainty no repetition showed. Otherwise Interval names the method.
npm_point_interval <- function(v, level = 0.95, method = "t", min_runs = NULL,
                               resamples = NPM_BCA_RESAMPLES, seed = 1L, key = "", given = NULL) {
  keep <- !is.na(v)
  v <- v[keep]
  n <- length(v)
  m <- if (n) mean(v) else NA_real_
  s <- if (n > 1L) sd(v) else NA_real_
  out <- function(lower, upper, why, count = n) {
    list(N = count, Mean = m, SD = s, Lower = lower, Upper = upper, Interval = why)
  }
  spread <- n < 2L || any(v != v[1L])
  if (method == "none") return(out(NA_real_, NA_real_, "none"))
  if (method == "given") {
    one <- function(x, column) {
      u <- unique(x[keep])
      if (length(u) > 1L)
        npm_stop("column %s holds %d different values at %s: a given interval is one per point",
                 column, length(u), if (nzchar(key)) key else "the one point")
      if (length(u)) u else NA
    }
    lo <- as.numeric(one(given$low, given$columns$low))
    hi <- as.numeric(one(given$high, given$columns$high))
    count <- if (is.null(given$n)) n else as.numeric(one(given$n, given$columns$n))
    reason <- if (is.null(given$reason)) NA_character_ else as.character(one(given$reason, given$columns$reason))
    said <- !is.na(reason) && nzchar(reason)
    if (is.na(lo) || is.na(hi)) return(out(NA_real_, NA_real_, if (said) reason else "none given", count))
    if (lo > hi)
      npm_stop("the given interval at %s is [%s, %s]: its low bound is above its high one",
               if (nzchar(key)) key else "the one point", format(lo), format(hi))
    if (!is.na(count) && count < 2) return(out(NA_real_, NA_real_, "single run", count))
    if (!spread) return(out(NA_real_, NA_real_, sprintf("no spread (all %d runs equal)", n), count))
    if (lo == hi) return(out(NA_real_, NA_real_, "zero-width interval given", count))
    return(out(lo, hi, if (said) reason else "given", count))
  }
  min_runs <- min_runs %||% if (method == "bca") NPM_BCA_MIN_RUNS else 2L
  if (n == 0L) return(out(NA_real_, NA_real_, "no runs"))
  if (n == 1L) return(out(NA_real_, NA_real_, "single run"))
  if (n < min_runs) return(out(NA_real_, NA_real_, sprintf("too few runs (n = %d < %d)", n, min_runs)))
  if (!spread) return(out(NA_real_, NA_real_, sprintf("no spread (all %d runs equal)", n)))
  if (method == "t") {
    r <- npm_mean_ci(v, level)
    return(out(r$Lower, r$Upper, "t"))
  }
  b <- npm_bca_mean(v, level, resamples, npm_point_seed(seed, key))
  out(b[1], b[2], sprintf("bca(%d)", as.integer(resamples)))
}

# Mean, standard deviation and interval of column y for every combination of `by`: columns N,
# Mean, SD, Lower, Upper, Interval (see npm_point_interval()). ci is one of NPM_CI_METHODS;
# min_runs (default 2, for "bca" 10), resamples and seed are those of npm_point_interval();
# given (for "given") the columns of npm_given_columns().
npm_summarise <- function(data, y, by = character(0), level = 0.95, ci = "t", min_runs = NULL,
                          resamples = NPM_BCA_RESAMPLES, seed = 1L, given = NULL) {
  data <- as.data.table(data)
  npm_require_columns(data, c(y, by))
  if (!is.numeric(level) || length(level) != 1L || is.na(level) || level <= 0 || level >= 1)
    npm_stop("confidence level must be between 0 and 1 (exclusive), got %s", format(level))
  if (!is.character(ci) || length(ci) != 1L || !(ci %in% NPM_CI_METHODS))
    npm_stop("unknown interval %s (use %s)", paste(ci, collapse = " "), paste(NPM_CI_METHODS, collapse = ", "))
  if (!is.null(min_runs) && (length(min_runs) != 1L || is.na(min_runs) || min_runs < 2))
    npm_stop("the fewest runs of an interval must be at least 2, got %s", format(min_runs))
  if (ci == "bca" && (length(resamples) != 1L || is.na(resamples) || resamples < 100))
    npm_stop("a BCa interval needs at least 100 resamples, got %s", format(resamples))
  if (!is.numeric(data[[y]])) npm_stop("column %s is not numeric", y)
  by <- unique(by)
  cols <- y
  if (ci == "given") {
    given <- given %||% npm_given_columns(data, c(y, by))
    given <- given[!vapply(given, function(g) is.null(g) || is.na(g), TRUE)]
    npm_require_columns(data, unlist(given))
    for (b in c("low", "high"))
      if (!is.numeric(data[[given[[b]]]]) && !all(is.na(data[[given[[b]]]])))
        npm_stop("column %s of the given interval is not numeric", given[[b]])
    cols <- unique(c(y, unlist(given)))
  }
  point <- function(sd, bys) {
    key <- if (length(bys)) paste(names(bys), vapply(bys, as.character, ""), sep = "=", collapse = ", ") else ""
    g <- if (ci == "given") c(lapply(given, function(column) sd[[column]]), list(columns = given))
    npm_point_interval(sd[[y]], level, ci, min_runs, resamples, seed, key, g)
  }
  res <- if (length(by)) data[, point(.SD, .BY), by = by, .SDcols = cols]
         else data[, point(.SD, list()), .SDcols = cols]
  if (length(by)) setorderv(res, by)
  res[]
}

# What the figure must say about its intervals (NULL when nothing is to be said: t intervals at
# every point): the kind of the bars, and at how many points there is none and why.
npm_interval_note <- function(s, ci, level, resamples, given = NULL) {
  missing <- is.na(s$Lower)
  pct <- sprintf("%s %%", format(100 * level))
  bars <- switch(ci,
    t = sprintf("Error bars: %s t intervals of the mean", pct),
    bca = sprintf("Error bars: %s bootstrap BCa intervals of the mean (%d resamples)", pct, as.integer(resamples)),
    given = {
      kinds <- unique(s$Interval[!missing])
      kinds <- kinds[kinds != "given"]
      sprintf("Error bars: the table's intervals (%s%s)", paste(c(given$low, given$high), collapse = ", "),
              if (length(kinds)) paste0(": ", paste(kinds, collapse = ", ")) else "")
    },
    none = return(NULL))
  if (!any(missing)) return(if (ci == "t") NULL else paste0(bars, "."))
  why <- table(factor(s$Interval[missing], levels = unique(s$Interval[missing])))
  reasons <- paste0(names(why), ifelse(why > 1L, sprintf(" (%d points)", as.integer(why)), ""))
  if (length(reasons) > 4L) reasons <- c(reasons[1:3], sprintf("%d more reasons", length(reasons) - 3L))
  if (all(missing)) sprintf("No error bars: no interval at any of the %d points: %s.", length(missing),
                            paste(reasons, collapse = "; "))
  else sprintf("%s; none at %d of %d points: %s.", bars, sum(missing), length(missing),
               paste(reasons, collapse = "; "))
}

npm_require_columns <- function(data, cols) {
  cols <- unique(cols[!is.na(cols) & cols != ""])
  missing <- setdiff(cols, names(data))
  if (length(missing))
    npm_stop("no column %s in the table (columns: %s)",
             paste(missing, collapse = ", "), paste(names(data), collapse = ", "))
  invisible(TRUE)
}

# Keep the rows for which an R expression over the columns is TRUE, e.g.
# 'Gamma != "cmtrpv1" & Flow == 0'. The expression is the user's own command line.
npm_filter <- function(data, expr) {
  data <- as.data.table(data)
  if (is.null(expr) || length(expr) == 0L || all(is.na(expr)) || identical(expr, "")) return(data)
  e <- tryCatch(parse(text = expr, keep.source = FALSE),
                error = function(err) npm_stop("cannot parse filter expression: %s", expr))
  if (length(e) != 1L) npm_stop("the filter must be one expression: %s", expr)
  keep <- tryCatch(eval(e[[1L]], envir = data, enclos = baseenv()),
                   error = function(err) npm_stop("filter %s failed: %s", expr, conditionMessage(err)))
  if (!is.logical(keep) || !(length(keep) %in% c(1L, nrow(data))))
    npm_stop("filter %s must give TRUE/FALSE per row", expr)
  keep <- rep_len(keep, nrow(data))
  data[!is.na(keep) & keep]
}
