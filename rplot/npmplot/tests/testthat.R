# The testthat tests of npmplot (R CMD check runs this file; ctest runs the same tests
# against the package built into the build tree, see tests/rplot/run-testthat.R).
library(testthat)
library(npmplot)
test_check("npmplot")
