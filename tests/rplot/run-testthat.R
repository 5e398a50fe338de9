# Runs the testthat tests of the R plotting library:
#   Rscript run-testthat.R RPLOT_SOURCE_DIR
# Exits 0 when all pass, 1 on a failure, 77 when R packages are missing.
args <- commandArgs(TRUE)
rplot <- normalizePath(if (length(args)) args[1] else file.path("..", "..", "rplot"))
self <- sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))
here <- dirname(normalizePath(self[1]))
for (p in c("testthat", "ggplot2", "data.table"))
  if (!requireNamespace(p, quietly = TRUE)) {
    cat("SKIP: R package", p, "is missing (Debian: r-cran-", p, ")\n", sep = "")
    quit(save = "no", status = 77)
  }
Sys.setenv(NPM_RPLOT_DIR = rplot, NPM_RPLOT_TESTS = here)
source(file.path(rplot, "npmplot.R"))
library(testthat)
ok <- tryCatch({
  test_dir(file.path(here, "testthat"), reporter = "summary", stop_on_failure = TRUE)
  TRUE
}, error = function(e) { cat(conditionMessage(e), "\n"); FALSE })
quit(save = "no", status = if (ok) 0 else 1)
