# Reading vector, scalar and summary files, and whole runs.

write_text <- function(lines, file) {
  con <- if (endsWith(file, ".bz2")) bzfile(file, "w")
         else if (endsWith(file, ".gz")) gzfile(file, "w")
         else if (endsWith(file, ".xz")) xzfile(file, "w") else file(file, "w")
  writeLines(lines, con)
  close(con)
  file
}

mv_header <- paste(npm_measurement_columns, collapse = "\t")

test_that("measurement vectors: quotes in descriptions, old space separators, bz2", {
  f <- write_text(c(mv_header,
    "000001\t1795272048342367\t0.000000\t0.000000\t0\t\"Flow 0\"\t0.000\t\"Sent\"\t315360\t216\t216\t315360\t216\t216",
    "000002\t1795272049342367\t1.000000\t1.000000\t3\t\"a \"b\"; $(c) `d`\"\t1.250\t\"Received\"\t10\t1\t1\t10\t1\t1",
    "000003 1795272050342367 2.000000  1.000000 -1 \"Total\" 0 \"Lost\" 0 0 0 0 0 0",
    ""), tempfile(fileext = ".vec.bz2"))
  d <- npm_read_measurement_vector(f)
  expect_equal(nrow(d), 3L)
  expect_equal(d$Description, c("Flow 0", "a \"b\"; $(c) `d`", "Total"))
  expect_equal(d$Action, c("Sent", "Received", "Lost"))
  expect_equal(d$FlowID, c(0, 3, -1))
  expect_equal(d$Jitter, c(0, 1.25, 0))
  expect_equal(d$AbsBytes[1], 315360)
  expect_equal(d$AbsTime[2], 1795272049342367)
})

test_that("measurement vectors: header only, wrong header, bad row", {
  f <- write_text(mv_header, tempfile(fileext = ".vec"))
  expect_equal(nrow(npm_read_measurement_vector(f)), 0L)
  f <- write_text(c("Foo Bar", "1 2"), tempfile(fileext = ".vec"))
  expect_error(npm_read_measurement_vector(f), "does not have the header", class = "npm_error")
  f <- write_text(c(mv_header, "000001 1 2 3"), tempfile(fileext = ".vec"))
  expect_error(npm_read_measurement_vector(f), "line 2 is not a measurement row",
               class = "npm_error")
  f <- write_text(character(0), tempfile(fileext = ".vec"))
  expect_error(npm_read_measurement_vector(f), "is empty", class = "npm_error")
})

test_that("per-flow vectors: with and without line numbers, truncated", {
  h <- paste(npm_flow_columns, collapse = "\t")
  rows <- c("000001\t1795272048342394\t0.000027\t0\t1460\t1\t0\t1460\t1\t0\t0.072\t0.072\t0.004",
            "000002\t1795272048342494\t0.000127\t1\t2920\t2\t1\t1460\t1\t1\t0.080\t0.008\t0.005")
  d <- npm_read_flow_vector(write_text(c(h, rows), tempfile(fileext = ".vec.bz2")))
  expect_equal(dim(d), c(2L, 12L))
  expect_equal(d$Delay, c(0.072, 0.080))
  expect_equal(d$SeqNumber, c(0, 1))
  d2 <- npm_read_flow_vector(write_text(c(h, sub("^[0-9]+\t", "", rows)), tempfile(fileext = ".vec")))
  expect_equal(d2, d)
  expect_equal(nrow(npm_read_flow_vector(write_text(h, tempfile(fileext = ".vec")))), 0L)
  bad <- write_text(c(h, rows[1], "000002\t1795272048342494\t0.000127"), tempfile(fileext = ".vec"))
  expect_error(npm_read_flow_vector(bad), "truncated or malformed", class = "npm_error")
})

test_that("vectors read alike plain and compressed with gzip, bzip2 or xz, by content", {
  h <- paste(npm_flow_columns, collapse = "\t")
  rows <- sprintf("%06d\t%.0f\t%.6f\t%d\t%d\t%d\t0\t1460\t1\t1\t%.3f\t0.001\t0.002", 1:500,
                  1795272048342394 + (1:500) * 100, (1:500) * 1e-4, 0:499, (1:500) * 1460, 1:500,
                  80 + (1:500) / 1000)
  plain <- npm_read_flow_vector(write_text(c(h, rows), tempfile(fileext = ".vec")))
  expect_equal(nrow(plain), 500L)
  expect_true(all(vapply(plain, is.double, TRUE)))
  expect_equal(plain$AbsTime[500], 1795272048342394 + 50000)
  for (ext in c(".vec.gz", ".vec.bz2", ".vec.xz")) {
    f <- write_text(c(h, rows), tempfile(fileext = ext))
    expect_equal(npm_read_flow_vector(f), plain)
    # the content tells the compression, not the name
    g <- tempfile(fileext = ".vec")
    file.copy(f, g)
    expect_equal(npm_read_flow_vector(g, c("RelTime", "Delay")), plain[, .(RelTime, Delay)])
  }
  mv <- c(paste(npm_measurement_columns, collapse = "\t"),
          paste0("000001\t1795272048342367\t1.000000\t1.000000\t0\t\"Flow \\\"0\\\"\"\t0.000\t\"Sent\"",
                 "\t315360\t216\t216\t315360\t216\t216"))
  for (ext in c(".vec", ".vec.gz")) {
    d <- npm_read_measurement_vector(write_text(mv, tempfile(fileext = ext)))
    expect_equal(d$Description, "Flow \\\"0\\\"")
    expect_equal(d$AbsBytes, 315360)
  }
  # cut short: no text at all, or a row cut off
  f <- write_text(c(h, rows), tempfile(fileext = ".vec.gz"))
  cut <- tempfile(fileext = ".vec.gz")
  writeBin(readBin(f, "raw", 20L), cut)
  expect_error(npm_read_flow_vector(cut), "truncated or corrupt compressed file", class = "npm_error")
  partial <- write_text(c(h, rows[1:3], substr(rows[4], 1, 20)), tempfile(fileext = ".vec.xz"))
  expect_error(npm_read_flow_vector(partial), "truncated or malformed", class = "npm_error")
  # nothing is left in the temporary directory
  expect_length(list.files(tempdir(), pattern = "^npmplot-"), 0L)
})

test_that("scalar files", {
  f <- write_text(c("scalar \"netPerfMeter.active.flow[0]\" \"Transmitted Bytes\"       281739120",
                    "scalar \"netPerfMeter.active.totalCPU\" \"Idle\" 100.000", "# comment"),
                  tempfile(fileext = ".sca"))
  s <- npm_read_scalars(f)
  expect_equal(s$Name, c("Transmitted Bytes", "Idle"))
  expect_equal(s$Value, c(281739120, 100))
})

test_that("createsummary tables: quoted values, line numbers, empty aggregate column", {
  f <- write_text(c("RunNo\tValueNo\tSplit\tactive.flow\tRun Protocol\tactive.flow-ReceivedBitRate",
                    "0\t1\t\"\"\t0\tplain mixed\t354154226.237036",
                    "0\t2\t\"\"\t0\tbz2 \"mixed 2\"\t238785957.013125"), tempfile(fileext = ".data.bz2"))
  d <- npm_read_summary(f)
  expect_equal(names(d), c("RunNo", "ValueNo", "Split", "active.flow", "Run", "Protocol",
                           "active.flow-ReceivedBitRate"))
  expect_equal(d$Protocol, c("mixed", "mixed 2"))
  expect_equal(d$Split, c("", ""))
  f <- write_text(c("RunNo\tValueNo\tSplit\t\tRun\tactive.total-ReceivedBytes",
                    "1\t0\t1\t\"\"\t\tx\t5", "2\t0\t2\t\"\"\t\ty\t7"), tempfile(fileext = ".data"))
  d <- npm_read_summary(f)
  expect_equal(names(d), c("RunNo", "ValueNo", "Split", "Run", "active.total-ReceivedBytes"))
  expect_equal(d$`active.total-ReceivedBytes`, c(5, 7))
  f <- write_text(c('"RunNo","ValueNo","Split","passive.flow","Protocol","Note","passive.flow-ReceivedBitRate"',
                    '0,1,"",0,"tcp","say ""hi"", ok",5454869326.615987',
                    '0,1,"",0,"udp","plain",12.5'), tempfile(fileext = ".csv.bz2"))
  d <- npm_read_summary(f)
  expect_equal(names(d)[c(4, 7)], c("passive.flow", "passive.flow-ReceivedBitRate"))
  expect_equal(d$Note, c("say \"hi\", ok", "plain"))
  expect_equal(d$`passive.flow-ReceivedBitRate`, c(5454869326.615987, 12.5))
  expect_equal(nrow(npm_read_summary(f, sep = ",")), 2L)
  expect_error(npm_read_summary(write_text("a b", tempfile())), "has no rows", class = "npm_error")
  expect_error(npm_read_summary(write_text(character(0), tempfile())), "is empty",
               class = "npm_error")
  expect_error(npm_read_summary(write_text(c("a b", "1 2 3 4"), tempfile())), "cannot parse",
               class = "npm_error")
})

synthetic_run <- function(...) {
  dir <- tempfile("run-")
  gen <- test_path("make-synthetic-run.R")
  status <- system2(file.path(R.home("bin"), "Rscript"), c(shQuote(gen), shQuote(dir), "run", ...))
  stopifnot(status == 0)
  file.path(dir, "run.config")
}

test_that("a whole run: non-contiguous flow IDs, both nodes, time range, pages", {
  config <- synthetic_run("--nasty")
  run <- npm_read_run(config)
  expect_equal(run$flows$FlowID, c(0L, 7L))
  expect_match(levels(run$measurement$Flow)[1], "^Bulk \"quoted\" \\$\\(touch PWNED1\\)")
  expect_setequal(unique(run$measurement$Node), c("Active", "Passive"))
  expect_setequal(unique(run$flowvectors$FlowID), c(0L, 7L))
  # Voice: 25 msg/s inbound (received by the active) for 5 s.
  expect_equal(nrow(run$flowvectors[FlowID == 7 & Node == "Active"]), 125L)
  expect_false(is.null(run$cpu))
  expect_length(npm_run_plots(run), 11L)
  expect_length(npm_run_plots(run, per_flow = FALSE), 7L)
  part <- npm_read_run(config, c(1.5, 3))
  expect_true(all(part$measurement$RelTime >= 1.5 & part$measurement$RelTime <= 3))
  expect_true(all(part$flowvectors$RelTime >= 1.5 & part$flowvectors$RelTime <= 3))
  expect_false(file.exists(file.path(dirname(config), "PWNED1")))
  expect_false(file.exists("PWNED1"))
})

test_that("a run in plain files with a reference-style (unescaped) config", {
  config <- synthetic_run("--plain", "--nasty", "--reference-config")
  run <- npm_read_run(config)
  expect_equal(run$flows$Description[1], "Bulk \"quoted\" $(touch PWNED1); `touch PWNED2` \\ x")
})

test_that("a run whose files are missing gives clear errors", {
  config <- synthetic_run()
  dir <- dirname(config)
  file.remove(file.path(dir, "run-passive-00000007-0000.vec.bz2"))
  expect_warning(run <- npm_read_run(config), "run-passive-00000007-0000.vec.bz2 does not exist",
                 class = "npm_warning")
  file.remove(file.path(dir, "run-passive.vec.bz2"))
  expect_error(suppressWarnings(npm_read_run(config)),
               "passive measurement vector run-passive.vec.bz2 does not exist", class = "npm_error")
  cfg <- readLines(config)
  writeLines(sub("^VECTOR_ACTIVE_NODE=.*", "VECTOR_ACTIVE_NODE=\"\"", cfg), config)
  expect_error(npm_read_run(config), "VECTOR_ACTIVE_NODE is empty", class = "npm_error")
})

test_that("PDF bookmarks are added and the file stays a valid PDF", {
  p <- ggplot(data.frame(x = 1:3, y = 1:3), aes(x, y)) + geom_line()
  f <- tempfile(fileext = ".pdf")
  npm_save_plots(list(list(plot = p, title = "A", outline = c("Overview", "A")),
                      list(plot = p, title = "B", outline = c("Overview", "B")),
                      list(plot = p, title = "C", outline = c("Flow \u0393 7", "C"))), f)
  raw <- readBin(f, "raw", file.info(f)$size)
  txt <- rawToChar(replace(raw, raw == as.raw(0), as.raw(32)))
  expect_match(txt, "/Type /Outlines", useBytes = TRUE)
  expect_match(txt, "/PageMode /UseOutlines", useBytes = TRUE)
  expect_equal(lengths(regmatches(txt, gregexpr("/Dest \\[", txt, useBytes = TRUE))), 5L)
  pdfinfo <- Sys.which("pdfinfo")
  skip_if(pdfinfo == "", "pdfinfo (poppler-utils) is missing")
  out <- system2(pdfinfo, shQuote(f), stdout = TRUE, stderr = TRUE)
  expect_true(any(grepl("^Pages: +3$", out)))
  expect_false(any(grepl("Syntax Error|Syntax Warning", out)))
})

test_that("file names in a config are found next to it, with or without .bz2", {
  dir <- tempfile("resolve-")
  dir.create(file.path(dir, "results"), recursive = TRUE)
  file.create(file.path(dir, "results", c("run-active.vec.bz2", "run-passive.vec")))
  cdir <- file.path(dir, "results")
  # as written by "netperfmeter ... -vector=results/run.vec.bz2", read from elsewhere
  expect_equal(npm_resolve_file("results/run-active.vec.bz2", cdir),
               file.path(cdir, "run-active.vec.bz2"))
  expect_equal(npm_resolve_file("run-active.vec", cdir), file.path(cdir, "run-active.vec.bz2"))
  expect_equal(npm_resolve_file("run-passive.vec.bz2", cdir), file.path(cdir, "run-passive.vec"))
  expect_equal(npm_resolve_file(file.path(cdir, "run-passive.vec"), "/nonexistent"),
               file.path(cdir, "run-passive.vec"))
  expect_true(is.na(npm_resolve_file("missing.vec", cdir)))
  expect_true(is.na(npm_resolve_file("", cdir)))
})

test_that("a plot that fails to draw leaves no file behind", {
  dir <- tempfile("out-")
  dir.create(dir)
  good <- ggplot(data.frame(x = 1:3, y = 1:3), aes(x, y)) + geom_line()
  bad <- ggplot(data.frame(x = 1:3), aes(x, nope)) + geom_line()
  for (f in c("a.pdf", "b.png", "c.svg"))
    expect_error(npm_save_plots(list(good, bad), file.path(dir, f)))
  expect_equal(list.files(dir, all.files = TRUE, no.. = TRUE), character(0))
  expect_error(npm_save_plots(good, file.path(dir, "missing", "x.pdf")), "does not exist",
               class = "npm_error")
})

test_that("one PDF per plot on request", {
  dir <- tempfile("own-")
  dir.create(dir)
  p <- ggplot(data.frame(x = 1:3, y = 1:3), aes(x, y)) + geom_line()
  f <- npm_save_plots(list(list(plot = p, title = "A", outline = c("Overview", "A")),
                           list(plot = p, title = "B", outline = c("Flow 7", "B"))),
                      file.path(dir, "run.pdf"), onefile = FALSE)
  expect_equal(basename(f), c("run-01-overview-a.pdf", "run-02-flow-7-b.pdf"))
  expect_true(all(file.exists(f)))
})

test_that("per-path vectors: connection rows, fast, timer and rescheduled retransmissions, mechanisms, older files", {
  row <- paste0("000001\t1795272048342367\t0.100000\t1\t10.0.1.1:5000\t10.0.1.2:9000\tESTABLISHED",
                "\t14480\tNA\t4.250\tNA\t204.000\t1500\t1000\tNA\tNA\t7\t0\t0\tNA\tNA")
  conn <- paste0("000002\t1795272048342367\t0.100000\t-1\t-\t10.0.2.2:9000\tESTABLISHED",
                 "\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA\tNA\t12\tNA\tNA\t65536\t3\tNA\tNA")
  f <- write_text(c(paste(npm_path_columns, collapse = "\t"), paste0(row, "\tNA\tNA\t5\t2\t1\t4\t9"),
                    paste0(conn, "\tNA\tNA\tNA")),
                  tempfile(fileext = ".vec"))
  d <- npm_read_path_vector(f)
  expect_equal(d$Path, c(1, npm_connection_path))
  expect_equal(d$Rwnd, c(NA, 65536))
  expect_equal(d$Pending, c(NA, 3))
  expect_equal(d$Cwnd[1], 14480)
  expect_equal(d$FastRetrans, c(5, NA))
  expect_equal(d$TimerRetrans, c(2, NA))
  expect_equal(d$Rescheduled, c(1, NA))
  expect_equal(d$DropReported, c(4, NA))
  expect_equal(d$SmartFrIgnored, c(9, NA))
  # before the mechanisms' counts, before chunk rescheduling, before the separate retransmissions
  # (2.1.0 with the connection rows), and before those rows
  counts <- write_text(c(paste(head(npm_path_columns, -2L), collapse = "\t"), paste0(row, "\tNA\tNA\t5\t2\t1")),
                       tempfile(fileext = ".vec"))
  d <- npm_read_path_vector(counts)
  expect_equal(d$Rescheduled, 1)
  expect_true(is.na(d$DropReported) && is.na(d$SmartFrIgnored))
  before <- write_text(c(paste(head(npm_path_columns, -3L), collapse = "\t"), paste0(row, "\tNA\tNA\t5\t2")),
                       tempfile(fileext = ".vec"))
  d <- npm_read_path_vector(before)
  expect_equal(d$FastRetrans, 5)
  expect_true(is.na(d$Rescheduled))
  older <- write_text(c(paste(head(npm_path_columns, -5L), collapse = "\t"), paste0(row, "\tNA\tNA")),
                      tempfile(fileext = ".vec"))
  d <- npm_read_path_vector(older)
  expect_equal(nrow(d), 1L)
  expect_true(is.na(d$FastRetrans) && is.na(d$TimerRetrans))
  oldest <- write_text(c(paste(head(npm_path_columns, -7L), collapse = "\t"), row), tempfile(fileext = ".vec"))
  d <- npm_read_path_vector(oldest)
  expect_equal(nrow(d), 1L)
  expect_true(all(is.na(d$Rwnd)) && all(is.na(d$Pending)) && all(is.na(d$TimerRetrans)))
  expect_equal(names(d), npm_path_columns)
})

test_that("per-path vectors: the columns are the header's", {
  ids <- "000001\t1795272048342367\t0.100000\t1\t10.0.1.1:5000\t10.0.1.2:9000\tESTABLISHED"
  figures <- setdiff(npm_path_columns, npm_path_text_columns)[-(1:3)]
  values <- seq_along(figures) * 10
  row <- paste(c(ids, values), collapse = "\t")
  # a column netperfmeter added later is kept, a number, after the known ones
  f <- write_text(c(paste(c(npm_path_columns, "NewCounter"), collapse = "\t"), paste0(row, "\t42"),
                    paste0(sub("^000001", "000002", row), "\tNA")),
                  tempfile(fileext = ".vec"))
  d <- npm_read_path_vector(f)
  expect_equal(names(d), c(npm_path_columns, "NewCounter"))
  expect_type(d$NewCounter, "double")
  expect_equal(d$NewCounter, c(42, NA))
  expect_equal(d$Cwnd, c(10, 10))
  for (column in npm_path_text_columns) expect_type(d[[column]], "character")
  for (column in setdiff(names(d), npm_path_text_columns)) expect_type(d[[column]], "double")
  expect_equal(d$State, c("ESTABLISHED", "ESTABLISHED"))
  # in any order, with the columns the plots do not draw missing (NA, as in an older file)
  kept <- c("RelTime", "AbsTime", "Path", "Local", "Remote", "State", "Unacked", "Cwnd", "Ssthresh", "RTT",
            "BytesSent", "BytesAcked", "Later")
  f <- write_text(c(paste(kept, collapse = "\t"),
                    "1\t0.5\t1795272048342367\t2\t-\t10.0.2.2:9000\tACTIVE\t3\t14480\tNA\t4.5\t1000\t900\t7"),
                  tempfile(fileext = ".vec"))
  d <- npm_read_path_vector(f)
  expect_equal(names(d), c(npm_path_columns, "Later"))
  expect_equal(d$RelTime, 0.5)
  expect_equal(d$AbsTime, 1795272048342367)
  expect_equal(d$Unacked, 3)
  expect_equal(d$Local, "-")
  expect_equal(d$Later, 7)
  for (column in setdiff(npm_path_columns, kept)) expect_true(is.na(d[[column]]), info = column)
  for (column in setdiff(names(d), npm_path_text_columns)) expect_type(d[[column]], "double")
  # an older header (before the connection rows): the columns it lacks are NA
  older <- head(npm_path_columns, -7L)
  f <- write_text(c(paste(older, collapse = "\t"), paste(c(ids, head(values, length(older) - 6L)), collapse = "\t")),
                  tempfile(fileext = ".vec"))
  d <- npm_read_path_vector(f)
  expect_equal(names(d), npm_path_columns)
  expect_true(all(vapply(tail(npm_path_columns, 7L), function(column) is.na(d[[column]]), logical(1))))
  # a column the plots need is missing: the error names it
  for (column in setdiff(npm_path_required_columns, c("Local", "Remote", "State"))) {
    header <- setdiff(npm_path_columns, column)
    f <- write_text(c(paste(header, collapse = "\t"), row), tempfile(fileext = ".vec"))
    expect_error(npm_read_path_vector(f), sprintf("per-path vector %s lacks column(s) %s", f, column),
                 fixed = TRUE, class = "npm_error", info = column)
  }
  f <- write_text(c(paste(setdiff(npm_path_columns, c("Local", "Cwnd")), collapse = "\t"), row),
                  tempfile(fileext = ".vec"))
  expect_error(npm_read_path_vector(f), "lacks column(s) Local, Cwnd", fixed = TRUE, class = "npm_error")
  # the rows have more or fewer columns than the header names
  f <- write_text(c(paste(npm_path_columns, collapse = "\t"), paste0(row, "\t42")), tempfile(fileext = ".vec"))
  expect_error(npm_read_path_vector(f),
               sprintf("per-path vector %s has %d columns per row but %d names in its header", f,
                       length(npm_path_columns) + 2L, length(npm_path_columns)), fixed = TRUE, class = "npm_error")
  f <- write_text(c(paste(c(npm_path_columns, "NewCounter"), collapse = "\t"), row), tempfile(fileext = ".vec"))
  expect_error(npm_read_path_vector(f),
               sprintf("per-path vector %s has %d columns per row but %d names in its header", f,
                       length(npm_path_columns) + 1L, length(npm_path_columns) + 1L), fixed = TRUE, class = "npm_error")
  # a name twice, a column that is not a number
  f <- write_text(c(paste(c(npm_path_columns, "Cwnd"), collapse = "\t"), paste0(row, "\t1")),
                  tempfile(fileext = ".vec"))
  expect_error(npm_read_path_vector(f), "names column(s) Cwnd more than once in its header", fixed = TRUE,
               class = "npm_error")
  f <- write_text(c(paste(c(npm_path_columns, "NewCounter"), collapse = "\t"), paste0(row, "\tmany")),
                  tempfile(fileext = ".vec"))
  expect_error(npm_read_path_vector(f), sprintf("per-path vector %s: column NewCounter is not numeric", f),
               fixed = TRUE, class = "npm_error")
})

test_that("a corrupt scalar file is an error naming the file and the line", {
  good <- c("version 2", "run run-1", "attr configname General",
            "scalar \"netPerfMeter.active.flow[0]\" \"Last Transmission\"       1796164534285873",
            "scalar \"netPerfMeter.active.flow[0]\" \"Jitter\" -nan", "",
            "scalar netPerfMeter.active.flow[1]   \"Received Bit Rate\"\t1100",   # older files, OMNeT++
            "statistic net.host[0].app \"rtt:stats\"", "field count 4", "attr unit s", "# a comment")
  s <- npm_read_scalars(write_text(good, tempfile(fileext = ".sca")))
  expect_equal(s$Object, c("netPerfMeter.active.flow[0]", "netPerfMeter.active.flow[0]", "netPerfMeter.active.flow[1]"))
  expect_equal(s$Name, c("Last Transmission", "Jitter", "Received Bit Rate"))
  expect_true(is.nan(s$Value[2]))
  expect_equal(s$Value[3], 1100)
  # By the C++ reader's rules: blanks before the keyword, a backslash escape inside quotes, a CR.
  s <- npm_read_scalars(write_text(c("  scalar \"a \\\"b\\\"\" \"c d\" 2.5\r", "\tscalar x y\t-3 "),
                                   tempfile(fileext = ".sca")))
  expect_equal(s$Object, c("a \"b\"", "x"))
  expect_equal(s$Name, c("c d", "y"))
  expect_equal(s$Value, c(2.5, -3))
  f <- write_text("scalar \"a\" \"b\" 1 2", tempfile(fileext = ".sca"))
  expect_error(npm_read_scalars(f), "line 1: the value \"1 2\" is not a number", class = "npm_error")
  f <- write_text(c(good[4], "scalar \"netPerfMeter.active.flow[0]\" \"Jitter\"", good[5]), tempfile(fileext = ".sca"))
  expect_error(npm_read_scalars(f), sprintf("scalar file %s: line 2 is not a scalar row", f), fixed = TRUE,
               class = "npm_error")
  f <- write_text(c(good[4], "Q\u00e4\u00b5 garbage"), tempfile(fileext = ".sca.bz2"))
  expect_error(npm_read_scalars(f), "line 2 is not a scalar row .*garbage", class = "npm_error")
  f <- write_text("scalar \"a\" \"b\" 12abc", tempfile(fileext = ".sca"))
  expect_error(npm_read_scalars(f), "line 1: the value \"12abc\" is not a number", class = "npm_error")
  f <- tempfile(fileext = ".sca")
  writeBin(as.raw(c(0x73, 0x63, 0:200)), f)
  expect_error(npm_read_scalars(f), "is not a text file: it holds NUL bytes", class = "npm_error")
  expect_error(npm_read_scalars(write_text(character(0), tempfile(fileext = ".sca"))), "is empty",
               class = "npm_error")
  expect_error(npm_read_scalars(write_text(good[1:3], tempfile(fileext = ".sca"))), "has no scalar rows",
               class = "npm_error")
  # cut short: bzip2 gives nothing, gzip what it could decompress, up to within a line
  rows <- sprintf("scalar \"netPerfMeter.active.flow[%d]\" \"Transmitted Bytes\" %d", 0:400, 1000 * (0:400))
  for (ext in c(".sca.bz2", ".sca.gz")) {
    whole <- write_text(rows, tempfile(fileext = ext))
    cut <- tempfile(fileext = ext)
    writeBin(readBin(whole, "raw", file.info(whole)$size - 20L), cut)
    expect_error(npm_read_scalars(cut), "truncated", class = "npm_error", info = ext)
  }
})

test_that("a corrupt or missing scalar file of a run: an error, a warning", {
  config <- synthetic_run()
  sca <- file.path(dirname(config), npm_cfg(npm_read_config(config), "SCALAR_ACTIVE_NODE"))
  writeLines("this is not a scalar file", sca)
  expect_error(npm_read_run(config), sprintf("scalar file %s: line 1 is not a scalar row", sca),
               fixed = TRUE, class = "npm_error")
  unlink(sca)
  expect_warning(run <- npm_read_run(config), "active scalar file .* does not exist; plotted without it",
                 class = "npm_warning")
  expect_setequal(unique(run$cpu$Node), "Passive")
})

# n bytes of zeros, bzip2-compressed: a "decompression bomb" of a few hundred bytes
bomb <- function(n, ext = ".bz2") {
  f <- tempfile(fileext = ext)
  writeBin(memCompress(raw(n), "bzip2"), f)
  f
}

test_that("inputs that unpack beyond the bound are refused, naming the file and the bound", {
  old <- options(npmplot.max_input_size = "1M")
  on.exit(options(old))
  b <- bomb(8 * 1024^2)
  expect_lt(file.info(b)$size, 200)
  msg <- function(what) {
    sprintf("%s %s decompresses to more than 1 MB, the bound for every input (set by --max-input-size", what, b)
  }
  expect_error(npm_read_config(b), msg("config file"), fixed = TRUE, class = "npm_error")
  expect_error(npm_read_scalars(b), msg("scalar file"), fixed = TRUE, class = "npm_error")
  expect_error(npm_read_summary(b), msg("table"), fixed = TRUE, class = "npm_error")
  # rows of a vector that would be read as such: refused at the bound, not at its header
  h <- paste(npm_flow_columns, collapse = "\t")
  rows <- rep("000001\t1795272048342394\t0.000027\t0\t1460\t1\t0\t1460\t1\t0\t0.072\t0.072\t0.004", 30000)
  big <- write_text(c(h, rows), tempfile(fileext = ".vec.bz2"))
  expect_error(npm_read_flow_vector(big), sprintf("per-flow vector %s decompresses to more than 1 MB", big),
               fixed = TRUE, class = "npm_error")
  plain <- write_text(c(h, rows), tempfile(fileext = ".vec"))
  expect_error(npm_read_flow_vector(plain), sprintf("per-flow vector %s holds more than 1 MB", plain),
               fixed = TRUE, class = "npm_error")
  options(npmplot.max_input_size = "3Mi")
  expect_equal(nrow(npm_read_flow_vector(big)), 30000L)
  # the environment variable, when the option is not set
  options(npmplot.max_input_size = NULL)
  Sys.setenv(NPM_RPLOT_MAX_INPUT_SIZE = "100k")
  on.exit(Sys.unsetenv("NPM_RPLOT_MAX_INPUT_SIZE"), add = TRUE)
  expect_error(npm_read_scalars(b), "more than 100 kB, the bound for every input (set by NPM_RPLOT_MAX_INPUT_SIZE",
               fixed = TRUE, class = "npm_error")
  Sys.setenv(NPM_RPLOT_MAX_INPUT_SIZE = "lots")
  expect_error(npm_read_scalars(b), "NPM_RPLOT_MAX_INPUT_SIZE lots is not a size", class = "npm_error")
  expect_equal(npm_parse_size("2G"), 2e9)
  expect_equal(npm_parse_size("64MiB"), 64 * 1024^2)
  expect_equal(npm_parse_size("1500"), 1500)
})

test_that("the default bound of text inputs (64 MiB); zeros as a vector are refused at once", {
  b <- bomb(65 * 1024^2)
  expect_error(npm_read_config(b),
               sprintf(paste0("config file %s decompresses to more than 64 MiB, the bound for config, ",
                              "scalar and table files (the default;"), b),
               fixed = TRUE, class = "npm_error")
  # zeros as a vector are refused at their first chunk, not when the bound is reached (here:
  # 16 MiB of zeros under a bound of 8 MiB) nor once all of them are in a temporary file
  old <- options(npmplot.max_input_size = "8Mi")
  on.exit(options(old))
  v <- bomb(16 * 1024^2, ".vec.bz2")
  expect_error(npm_read_measurement_vector(v),
               sprintf("measurement vector %s is not a text file: it holds NUL bytes", v),
               fixed = TRUE, class = "npm_error")
  expect_length(list.files(tempdir(), pattern = "^npmplot-"), 0L)
})
