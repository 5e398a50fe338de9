# Vector and scalar files of one run.
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

NPM_MEASUREMENT_COLUMNS <- c("AbsTime", "RelTime", "Interval", "FlowID", "Description",
                             "Jitter", "Action", "AbsBytes", "AbsPackets", "AbsFrames",
                             "RelBytes", "RelPackets", "RelFrames")
NPM_FLOW_COLUMNS <- c("AbsTime", "RelTime", "SeqNumber", "AbsBytes", "AbsPackets", "AbsFrames",
                      "RelBytes", "RelPackets", "RelFrames", "Delay", "PrevPacketDelayDiff",
                      "Jitter")

NPM_PATH_COLUMNS <- c("AbsTime", "RelTime", "Path", "Local", "Remote", "State", "Cwnd", "Ssthresh",
                      "RTT", "RTTVar", "RTO", "MTU", "BytesSent", "BytesAcked", "BytesReceived",
                      "Retransmissions", "Lost", "Unacked", "DeliveryRate", "PacingRate", "Rwnd",
                      "Pending", "FastRetrans", "TimerRetrans", "Rescheduled", "DropReported",
                      "SmartFrIgnored")
# Path ID of the rows of a whole MPTCP connection or SCTP association.
NPM_CONNECTION_PATH <- -1L

# Read a per-path vector (*-paths-active-*.vec; plain, .bz2 or .gz): tab-separated, a leading
# line number per row, NA where the transport does not tell. Files of netperfmeter 2.1.0 before
# the connection rows lack the last seven columns, those before the separate fast and timer
# retransmissions the last five, those before chunk rescheduling the last three, those before the
# mechanisms' counts the last two (read as NA).
npm_read_path_vector <- function(path) {
  what <- "per-path vector"
  lines <- npm_read_lines(path, what)
  if (length(lines) == 0L) npm_stop("%s %s %s", what, path, npm_empty_reason(path))
  cols <- strsplit(lines[1], "\t")[[1]]
  older <- any(vapply(c(7L, 5L, 3L, 2L), function(n) identical(cols, head(NPM_PATH_COLUMNS, -n)), logical(1)))
  if (!identical(cols, NPM_PATH_COLUMNS) && !older)
    npm_stop("%s %s lacks column(s) %s", what, path,
             paste(setdiff(NPM_PATH_COLUMNS, cols), collapse = ", "))
  rows <- lines[-1L]
  rows <- rows[nzchar(rows)]
  if (!length(rows)) return(NULL)
  # (One row alone, without a line end, fread would take for a file name.)
  d <- tryCatch(fread(text = paste0(rows, "\n", collapse = ""), sep = "\t", header = FALSE, na.strings = "NA",
                      colClasses = list(character = c(5L, 6L, 7L))),
                error = function(e) npm_stop("%s %s is malformed: %s", what, path, conditionMessage(e)))
  if (ncol(d) != length(cols) + 1L)
    npm_stop("%s %s has %d columns per row but %d names in its header", what, path, ncol(d),
             length(cols))
  setnames(d, c(".line", cols))
  d[, .line := NULL]
  for (column in setdiff(NPM_PATH_COLUMNS, cols)) d[, (column) := NA_real_]
  d[]
}

npm_vector_header <- function(con, path, expected, what) {
  header <- tryCatch(readLines(con, n = 1L, warn = FALSE),
                     error = function(e) npm_stop("cannot read %s %s: %s", what, path, conditionMessage(e)),
                     warning = function(w) npm_stop("cannot read %s %s: %s", what, path, conditionMessage(w)))
  if (length(header) == 0L) npm_stop("%s %s %s", what, path, npm_empty_reason(path))
  cols <- strsplit(trimws(header), "[ \t]+")[[1]]
  missing <- setdiff(expected, cols)
  if (length(missing))
    npm_stop("%s %s lacks column(s) %s", what, path, paste(missing, collapse = ", "))
  cols
}

# Read a measurement vector (*-active.vec, *-passive.vec; plain or .bz2):
# whitespace-separated, a leading line number per data row, the description in
# quotes. Rows are split from both ends, so a description may contain anything
# (spaces, quotes) but a line break.
npm_read_measurement_vector <- function(path) {
  what <- "measurement vector"
  lines <- npm_read_lines(path, what)
  if (length(lines) == 0L) npm_stop("%s %s %s", what, path, npm_empty_reason(path))
  cols <- strsplit(trimws(lines[1]), "[ \t]+")[[1]]
  if (!identical(cols, NPM_MEASUREMENT_COLUMNS))
    npm_stop("%s %s does not have the header of a measurement vector (%s)", what, path,
             paste(NPM_MEASUREMENT_COLUMNS, collapse = " "))
  lines <- lines[-1L]
  lines <- lines[grepl("[^ \t\r]", lines)]
  num <- "([-+0-9.eE]+)"
  sp <- "[ \t]+"
  re <- paste0("^[ \t]*(?:[0-9]+", sp, ")?", num, sp, num, sp, num, sp, num, sp,
               "\"(.*)\"", sp, num, sp, "\"?([A-Za-z]*)\"?",
               paste(rep(paste0(sp, num), 6L), collapse = ""), "[ \t\r]*$")
  if (length(lines) == 0L) {
    dt <- as.data.table(setNames(rep(list(numeric(0)), 13L), NPM_MEASUREMENT_COLUMNS))
    dt[, `:=`(Description = character(0), Action = character(0))]
    return(dt)
  }
  m <- regmatches(lines, regexec(re, lines, perl = TRUE))
  bad <- which(lengths(m) != 14L)
  if (length(bad))
    npm_stop("%s %s: line %d is not a measurement row", what, path, bad[1] + 1L)
  f <- matrix(unlist(m, use.names = FALSE), ncol = 14L, byrow = TRUE)[, -1L, drop = FALSE]
  dt <- as.data.table(f)
  setnames(dt, NPM_MEASUREMENT_COLUMNS)
  for (c in setdiff(NPM_MEASUREMENT_COLUMNS, c("Description", "Action"))) {
    v <- suppressWarnings(as.numeric(dt[[c]]))
    if (anyNA(v)) npm_stop("%s %s: column %s is not numeric", what, path, c)
    set(dt, j = c, value = v)
  }
  dt
}

# Read a per-flow vector (*-<flow>-<stream>.vec; plain or .bz2): numbers only.
# columns: the columns to keep (default all); fewer columns need less memory.
npm_read_flow_vector <- function(path, columns = NULL) {
  what <- "per-flow vector"
  con <- npm_open(path, what)
  on.exit(close(con))
  cols <- npm_vector_header(con, path, NPM_FLOW_COLUMNS, what)
  keep <- if (is.null(columns)) cols else intersect(cols, columns)
  if (!is.null(columns) && length(setdiff(columns, cols)))
    npm_stop("%s %s has no column(s) %s", what, path, paste(setdiff(columns, cols), collapse = ", "))
  empty <- function() as.data.table(setNames(rep(list(numeric(0)), length(keep)), keep))
  first <- character(0)
  while (length(first) == 0L) {
    l <- readLines(con, n = 1L, warn = FALSE)
    if (length(l) == 0L) return(empty())
    if (grepl("[^ \t\r]", l)) first <- l
  }
  k <- length(strsplit(trimws(first), "[ \t]+")[[1]])
  if (k != length(cols) && k != length(cols) + 1L)
    npm_stop("%s %s has %d columns per row but %d names in its header",
             what, path, k, length(cols))
  names_k <- if (k == length(cols)) cols else c(".line", cols)
  spec <- lapply(names_k, function(n) if (n %in% keep) double() else NULL)
  pushBack(first, con)
  v <- tryCatch(scan(con, what = spec, quiet = TRUE, multi.line = FALSE),
                error = function(e) npm_stop("%s %s is truncated or malformed: %s", what, path,
                                             conditionMessage(e)))
  names(v) <- names_k
  dt <- as.data.table(v[keep])
  dt
}

# Read a scalar file (.sca, plain or .bz2): lines  scalar "<object>" "<name>" <value>.
npm_read_scalars <- function(path) {
  lines <- npm_read_lines(path, "scalar file")
  re <- "^scalar[ \t]+\"([^\"]*)\"[ \t]+\"([^\"]*)\"[ \t]+([^ \t]+)[ \t]*$"
  m <- regmatches(lines, regexec(re, lines))
  m <- m[lengths(m) == 4L]
  data.table(Object = vapply(m, `[`, "", 2L), Name = vapply(m, `[`, "", 3L),
             Value = suppressWarnings(as.numeric(vapply(m, `[`, "", 4L))))
}
