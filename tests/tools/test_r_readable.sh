#!/usr/bin/env bash
# The tables are for R: read.table (whitespace layout), read.csv (--csv) and data.table::fread
# read them with the intended columns, including quoted values with spaces, tables without
# aggregate columns, and multi-stream bzip2 output of combinesummaries.
source "$(dirname "$0")/lib.sh"
BIN=$1
DATA=$2
if ! command -v Rscript >/dev/null; then
  echo "SKIP: Rscript is not installed (Debian package r-base-core)" >&2
  exit 77
fi
setup_tmp
cp -r "$DATA/netperfmeter" "$TMP/npm"
cd "$TMP/npm" || exit 1
bzip2 old/run-active.sca
"$BIN/createsummary" -b -q <commands >/dev/null || fail "createsummary (reference layout)"
"$BIN/createsummary" -b -q --csv <commands >/dev/null || fail "createsummary --csv"
{ echo "A B"; seq 1 400000 | sed 's/.*/& &/'; } >big.txt
printf -- '--values=x 1\n--input=big.txt\n' | "$BIN/combinesummaries" -q big.data.bz2 "V W" ||
  fail "combinesummaries"
out=$(Rscript --vanilla -e '
  d <- read.table("out/active.flow-ReceivedBitRate.data.bz2", header = TRUE)
  stopifnot(identical(names(d), c("RunNo", "ValueNo", "Split", "active.flow", "Protocol",
                                  "Size", "active.flow.ReceivedBitRate")))
  stopifnot(nrow(d) == 8, all(is.na(d$Split) | d$Split == ""), identical(d$active.flow, c(0L,0L,0L,2L,2L,2L,10L,10L)))
  udp <- d[d$Protocol == "udp", ]
  stopifnot(nrow(udp) == 2, all(udp$Size == "big frame"), udp$active.flow.ReceivedBitRate[1] == 1100)
  t <- read.table("out/active.total-ReceivedBytes.data.bz2", header = TRUE)
  stopifnot(ncol(t) == 6, nrow(t) == 3, t$active.total.ReceivedBytes[3] == 654321)
  c <- read.csv("out/active.flow-ReceivedBitRate.csv.bz2")
  stopifnot(ncol(c) == 7, nrow(c) == 8, c$Size[c$Protocol == "udp"][1] == "big frame",
            sum(c$active.flow.ReceivedBitRate) == 15201.5)
  suppressMessages(library(data.table))
  f <- fread("out/active.flow-ReceivedBitRate.csv.bz2")
  stopifnot(ncol(f) == 7, nrow(f) == 8)
  b <- read.table("big.data.bz2", header = TRUE)
  stopifnot(nrow(b) == 400000, ncol(b) == 4, b$A[400000] == 400000)
  cat("R read all tables\n")' 2>&1)
if grep -q "R read all tables" <<<"$out"; then
  pass "R reads the tables as intended"
else
  fail "R: $out"
fi
finish
