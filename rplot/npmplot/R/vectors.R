# Vector and scalar files of one run.
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

npm_measurement_columns <- c("AbsTime", "RelTime", "Interval", "FlowID", "Description",
                             "Jitter", "Action", "AbsBytes", "AbsPackets", "AbsFrames",
                             "RelBytes", "RelPackets", "RelFrames")
npm_flow_columns <- c("AbsTime", "RelTime", "SeqNumber", "AbsBytes", "AbsPackets", "AbsFrames",
                      "RelBytes", "RelPackets", "RelFrames", "Delay", "PrevPacketDelayDiff",
                      "Jitter")

# The per-path vector's columns as netperfmeter writes them (src/measure/path_counters.h: the
# identity columns kPathIdentityColumns, then one per figure of the table kPathCounters). A file
# may have others (a figure added later: read, numeric) or lack some (an older file: NA).
npm_path_columns <- c("AbsTime", "RelTime", "Path", "Local", "Remote", "State", "Cwnd", "Ssthresh",
                      "RTT", "RTTVar", "RTO", "MTU", "BytesSent", "BytesAcked", "BytesReceived",
                      "Retransmissions", "Lost", "Unacked", "DeliveryRate", "PacingRate", "Rwnd",
                      "Pending", "FastRetrans", "TimerRetrans", "Rescheduled", "DropReported",
                      "SmartFrIgnored")
# The columns a per-path vector must have: the time, the path and what it is, and the figures the
# plots draw (plot-run.R, plot-traces.R) that every netperfmeter file has had. Rwnd and Pending,
# drawn from the connection rows, came with those rows: a file before them has neither (NA).
npm_path_required_columns <- c("AbsTime", "RelTime", "Path", "Local", "Remote", "State", "Cwnd",
                               "Ssthresh", "RTT", "BytesSent", "BytesAcked", "Unacked")
# The columns that are text (the addresses and the state); every other one is a number.
npm_path_text_columns <- c("Local", "Remote", "State")
# Path ID of the rows of a whole MPTCP connection or SCTP association.
npm_connection_path <- -1L

# The column names of a vector's header line (tab- or blank-separated); those of `expected`
# that it lacks are an error.
npm_vector_columns <- function(header, path, expected, what) {
  cols <- strsplit(trimws(header), "[ \t]+")[[1]]
  missing <- setdiff(expected, cols)
  if (length(missing))
    npm_stop("%s %s lacks column(s) %s", what, path, paste(missing, collapse = ", "))
  cols
}

# Read a per-path vector (*-paths-active-*.vec; plain, .bz2 or .gz): tab-separated, a header line
# naming the columns, a leading line number per row, NA where the transport does not tell. The
# columns are the header's: npm_path_required_columns must be there; Local, Remote and State are
# text, every other column a number, those of npm_path_columns first (in that order), then any
# other the file has (a figure netperfmeter added later, under its own name), and a column of
# npm_path_columns the file lacks (files of netperfmeter 2.1.0 before the connection rows, the
# separate fast and timer retransmissions, chunk rescheduling, the mechanisms' counts) is NA.
# NULL when the file has no rows.
npm_read_path_vector <- function(path) {
  what <- "per-path vector"
  plain <- npm_plain_file(path, what)
  on.exit(npm_plain_done(plain, path))
  start <- npm_vector_start(plain, path, what)
  cols <- strsplit(start$header, "\t")[[1]]
  missing <- setdiff(npm_path_required_columns, cols)
  if (length(missing))
    npm_stop("%s %s lacks column(s) %s", what, path, paste(missing, collapse = ", "))
  twice <- unique(cols[duplicated(cols)])
  if (length(twice))
    npm_stop("%s %s names column(s) %s more than once in its header", what, path,
             paste(twice, collapse = ", "))
  if (is.null(start$first)) return(NULL)
  d <- npm_fread(plain, path, what, start$skip, sep = "\t", na.strings = "NA",
                 colClasses = list(character = match(npm_path_text_columns, cols) + 1L))
  if (ncol(d) != length(cols) + 1L)
    npm_stop("%s %s has %d columns per row but %d names in its header", what, path, ncol(d),
             length(cols))
  setnames(d, c(".line", cols))
  d[, .line := NULL]
  for (column in setdiff(cols, npm_path_text_columns)) {
    v <- d[[column]]
    if (!is.numeric(v) && !all(is.na(v)))
      npm_stop("%s %s: column %s is not numeric", what, path, column)
    set(d, j = column, value = as.numeric(v))
  }
  for (column in setdiff(npm_path_columns, cols)) set(d, j = column, value = NA_real_)
  setcolorder(d, c(npm_path_columns, setdiff(cols, npm_path_columns)))
  d[]
}

npm_empty_measurement <- function() {
  dt <- as.data.table(setNames(rep(list(numeric(0)), 13L), npm_measurement_columns))
  dt[, `:=`(Description = character(0), Action = character(0))]
  dt
}

# The rows of a measurement vector as netperfmeter writes them: tab-separated, the
# description in quotes (taken literally between them), read by fread(). NULL when the
# file is laid out otherwise (blanks as separators, a tab in a description, a bad row).
npm_measurement_fread <- function(plain, skip) {
  r <- npm_fread_quietly(file = plain, skip = skip, header = FALSE, sep = "\t", quote = "",
                         integer64 = "double", blank.lines.skip = TRUE, showProgress = FALSE,
                         encoding = "UTF-8")
  d <- r$data
  if (length(r$warnings) || is.null(d) || !(ncol(d) %in% c(13L, 14L))) return(NULL)
  if (ncol(d) == 14L) {
    if (!is.numeric(d[[1L]])) return(NULL)
    set(d, j = 1L, value = NULL)                   # the line numbers
  }
  setnames(d, npm_measurement_columns)
  desc <- as.character(d$Description)
  action <- as.character(d$Action)
  if (anyNA(desc) || !all(grepl("^\".*\"$", desc)) || anyNA(action) ||
      !all(grepl("^\"?[A-Za-z]*\"?$", action)))
    return(NULL)
  set(d, j = "Description", value = substr(desc, 2L, nchar(desc) - 1L))
  set(d, j = "Action", value = gsub("\"", "", action, fixed = TRUE))
  for (c in setdiff(npm_measurement_columns, c("Description", "Action"))) {
    if (!is.numeric(d[[c]]) || anyNA(d[[c]])) return(NULL)
    set(d, j = c, value = as.numeric(d[[c]]))
  }
  d
}

# The rows of a measurement vector split by a regular expression from both ends, so that
# blanks may separate the fields and a description may hold anything but a line break.
npm_measurement_split <- function(plain, path, what) {
  lines <- readLines(plain, warn = FALSE, encoding = "UTF-8")[-1L]
  lines <- lines[grepl("[^ \t\r]", lines)]
  num <- "([-+0-9.eE]+)"
  sp <- "[ \t]+"
  re <- paste0("^[ \t]*(?:[0-9]+", sp, ")?", num, sp, num, sp, num, sp, num, sp,
               "\"(.*)\"", sp, num, sp, "\"?([A-Za-z]*)\"?",
               paste(rep(paste0(sp, num), 6L), collapse = ""), "[ \t\r]*$")
  m <- regmatches(lines, regexec(re, lines, perl = TRUE))
  bad <- which(lengths(m) != 14L)
  if (length(bad))
    npm_stop("%s %s: line %d is not a measurement row", what, path, bad[1] + 1L)
  f <- matrix(unlist(m, use.names = FALSE), ncol = 14L, byrow = TRUE)[, -1L, drop = FALSE]
  dt <- as.data.table(f)
  setnames(dt, npm_measurement_columns)
  for (c in setdiff(npm_measurement_columns, c("Description", "Action"))) {
    v <- suppressWarnings(as.numeric(dt[[c]]))
    if (anyNA(v)) npm_stop("%s %s: column %s is not numeric", what, path, c)
    set(dt, j = c, value = v)
  }
  dt
}

# Read a measurement vector (*-active.vec, *-passive.vec; plain, .bz2 or .gz): a header
# line, then per data row a line number (optional), the numbers and the description in
# quotes. fread() reads netperfmeter's tab-separated rows; rows separated by blanks (older
# files) or with a tab in a description are split by npm_measurement_split().
npm_read_measurement_vector <- function(path) {
  what <- "measurement vector"
  plain <- npm_plain_file(path, what)
  on.exit(npm_plain_done(plain, path))
  start <- npm_vector_start(plain, path, what)
  cols <- strsplit(trimws(start$header), "[ \t]+")[[1]]
  if (!identical(cols, npm_measurement_columns))
    npm_stop("%s %s does not have the header of a measurement vector (%s)", what, path,
             paste(npm_measurement_columns, collapse = " "))
  if (is.null(start$first)) return(npm_empty_measurement())
  d <- if (grepl("\t", start$first)) npm_measurement_fread(plain, start$skip)
  if (is.null(d)) d <- npm_measurement_split(plain, path, what)
  d
}

# Read a per-flow vector (*-<flow>-<stream>.vec; plain, .bz2 or .gz): numbers only, with or
# without a leading line number per row, one row per message (the large files of a run).
# columns: the columns to keep (default all); fewer columns need less memory.
npm_read_flow_vector <- function(path, columns = NULL) {
  what <- "per-flow vector"
  plain <- npm_plain_file(path, what)
  on.exit(npm_plain_done(plain, path))
  start <- npm_vector_start(plain, path, what)
  cols <- npm_vector_columns(start$header, path, npm_flow_columns, what)
  keep <- if (is.null(columns)) cols else intersect(cols, columns)
  if (!is.null(columns) && length(setdiff(columns, cols)))
    npm_stop("%s %s has no column(s) %s", what, path, paste(setdiff(columns, cols), collapse = ", "))
  if (is.null(start$first))
    return(as.data.table(setNames(rep(list(numeric(0)), length(keep)), keep)))
  k <- length(strsplit(trimws(start$first), "[ \t]+")[[1]])
  if (k != length(cols) && k != length(cols) + 1L)
    npm_stop("%s %s has %d columns per row but %d names in its header",
             what, path, k, length(cols))
  names_k <- if (k == length(cols)) cols else c(".line", cols)
  sel <- which(names_k %in% keep)
  d <- npm_fread(plain, path, what, start$skip, sep = if (grepl("\t", start$first)) "\t" else " ",
                 select = sel)
  if (ncol(d) != length(sel))
    npm_stop("%s %s is truncated or malformed: %d columns read, %d expected", what, path,
             ncol(d), length(sel))
  setnames(d, names_k[sel])
  for (c in names(d)) {
    if (!is.numeric(d[[c]]) && !is.logical(d[[c]]))
      npm_stop("%s %s is truncated or malformed: column %s is not numeric", what, path, c)
    if (!is.double(d[[c]])) set(d, j = c, value = as.numeric(d[[c]]))
  }
  d
}

# Read a scalar file (.sca, plain or compressed): lines  scalar "<object>" "<name>" <value>,
# by the rules of the C++ reader (src/common/scalar_line.h) and the lab's (npmlab/scalars.py):
# blanks before the keyword allowed; object and name each "quoted" (a backslash takes the next
# character as it is) or a single word without quotes (older files, OMNeT++); the value is the
# rest of the line without its blanks and CR. OMNeT++'s header, attribute and statistic lines
# are passed over. Anything else is a corrupt file: an error naming the file and the line, as is
# a file without a single scalar.
npm_read_scalars <- function(path) {
  what <- "scalar file"
  lines <- npm_read_lines(path, what)
  if (length(lines) == 0L) npm_stop("%s %s %s", what, path, npm_empty_reason(path))
  lines <- sub("[ \t\r]+$", "", lines)
  word <- "(\"((?:[^\"\\\\]|\\\\.)*)\"|([^ \t\"]+))"
  re <- paste0("^[ \t]*scalar[ \t]+", word, "[ \t]*", word, "[ \t]+(.+)$")
  m <- regmatches(lines, regexec(re, lines, perl = TRUE))
  row <- lengths(m) == 8L
  skipped <- "version|run|attr|param|itervar|config|statistic|field|bin|par|file"
  other <- grepl(paste0("^[ \t]*$|^[ \t]*#|^[ \t]*(", skipped, ")([ \t]|$)"), lines)
  bad <- which(!row & !other)
  if (length(bad))
    npm_stop("%s %s: line %d is not a scalar row (scalar \"object\" \"name\" value): %s", what, path,
             bad[1], encodeString(substr(lines[bad[1]], 1L, 60L), quote = "\""))
  m <- m[row]
  value <- vapply(m, `[`, "", 8L)
  num <- suppressWarnings(as.numeric(sub("^-(nan|NaN)$", "\\1", value)))
  wrong <- which(is.na(num) & !grepl("^-?(nan|NaN)$", value))
  if (length(wrong))
    npm_stop("%s %s: line %d: the value %s is not a number", what, path, which(row)[wrong[1]],
             encodeString(value[wrong[1]], quote = "\""))
  if (!length(m)) npm_stop("%s %s has no scalar rows", what, path)
  unescape <- function(x) gsub("\\\\(.)", "\\1", x, perl = TRUE)
  field <- function(k) vapply(m, function(x) if (startsWith(x[k], "\"")) unescape(x[k + 1L]) else x[k + 2L], "")
  data.table(Object = field(2L), Name = field(5L), Value = num)
}
