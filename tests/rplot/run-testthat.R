# Runs the testthat tests of the R package npmplot against the package built into the
# build tree (R CMD check runs the same tests against the source tarball):
#   Rscript run-testthat.R LIBRARY_DIR TESTS_DIR
# Exits 0 when all pass, 1 on a failure, 77 when R packages are missing.
args <- commandArgs(TRUE)
if (length(args) != 2L) {
  cat("usage: Rscript run-testthat.R LIBRARY_DIR TESTS_DIR\n")
  quit(save = "no", status = 1)
}
library_dir <- normalizePath(args[1], mustWork = FALSE)
tests <- normalizePath(args[2])
if (!dir.exists(file.path(library_dir, "npmplot"))) {
  cat("SKIP: the R package npmplot was not built into", library_dir,
      "(R or its packages were missing when the build was configured)\n")
  quit(save = "no", status = 77)
}
.libPaths(c(library_dir, .libPaths()))
for (p in c("testthat", "ggplot2", "data.table"))
  if (!requireNamespace(p, quietly = TRUE)) {
    cat("SKIP: R package", p, "is missing (Debian: r-cran-", tolower(p), ")\n", sep = "")
    quit(save = "no", status = 77)
  }
library(testthat)
ok <- tryCatch({
  test_dir(tests, reporter = "summary", stop_on_failure = TRUE, package = "npmplot",
           load_package = "installed")
  TRUE
}, error = function(e) {
  cat(conditionMessage(e), "\n")
  FALSE
})
quit(save = "no", status = if (ok) 0 else 1)
