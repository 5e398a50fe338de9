# npmplot.R -- R function library of the NetPerfMeter plotting programs.
#
# Source it and build figures in a few lines:
#
#   source("/usr/share/netperfmeter/npmplot.R")
#   d <- npm_read_summary("active.flow-ReceivedBitRate.data.bz2")
#   p <- npm_plot_summary(d, x = "rhoDFN", y = "active.flow-ReceivedBitRate",
#                         colour = "Gamma", y_scale = 1e-6,
#                         xlab = "Bandwidth \\rho_{DFN} [Mbit/s]",
#                         ylab = "Throughput [Mbit/s]", colour_title = "\\Gamma")
#   npm_save_plots(list(p), "figure.pdf")
#
#   run <- npm_read_run("run.config")          # config + vector files of one run
#   npm_save_plots(npm_run_plots(run), "run.pdf")
#
# Every function is prefixed npm_. Errors a user can cause are signalled as
# conditions of class "npm_error" (see npm_stop()); the programs print them as
# one line. Needs ggplot2 and data.table (Debian: r-cran-ggplot2,
# r-cran-data.table). Config files are parsed as data, never sourced.
#
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

NPM_RPLOT_VERSION <- "2.1.0"

# Text files are UTF-8; work in a UTF-8 character type even when started in the C locale.
if (!isTRUE(l10n_info()[["UTF-8"]])) invisible(Sys.setlocale("LC_CTYPE", "C.UTF-8"))

suppressPackageStartupMessages({
  library(data.table)
  library(ggplot2)
})

`%||%` <- function(a, b) if (is.null(a)) b else a

# ---- Errors ------------------------------------------------------------------

# Signal an error the user can fix: one line, no traceback in the programs.
npm_stop <- function(fmt, ...) {
  msg <- if (...length()) sprintf(fmt, ...) else fmt
  stop(structure(class = c("npm_error", "error", "condition"),
                 list(message = msg, call = NULL)))
}

npm_warn <- function(fmt, ...) {
  msg <- if (...length()) sprintf(fmt, ...) else fmt
  warning(structure(class = c("npm_warning", "warning", "condition"),
                    list(message = msg, call = NULL)))
}

# Check that a file exists and is readable; returns the path.
npm_check_readable <- function(path, what = "file") {
  if (!is.character(path) || length(path) != 1L || is.na(path) || path == "")
    npm_stop("no %s given", what)
  if (!file.exists(path)) npm_stop("%s %s does not exist", what, path)
  if (dir.exists(path)) npm_stop("%s %s is a directory", what, path)
  if (file.access(path, 4L) != 0L) npm_stop("%s %s is not readable", what, path)
  path
}

# Open a text file for reading; bzip2, gzip and xz are detected from the content.
npm_open <- function(path, what = "file") {
  npm_check_readable(path, what)
  con <- tryCatch(file(path, open = "rt"),
                  error = function(e) npm_stop("cannot open %s %s: %s", what, path,
                                               conditionMessage(e)))
  con
}

# Why a file gave no lines: really empty, or compressed data that is cut short.
npm_empty_reason <- function(path) {
  if (isTRUE(file.info(path)$size > 0))
    "gives no text (a truncated or corrupt compressed file?)"
  else "is empty"
}

npm_read_lines <- function(path, what = "file") {
  con <- npm_open(path, what)
  on.exit(close(con))
  tryCatch(readLines(con, warn = FALSE, encoding = "UTF-8"),
           error = function(e) npm_stop("cannot read %s %s: %s", what, path, conditionMessage(e)),
           warning = function(w) npm_stop("cannot read %s %s: %s", what, path, conditionMessage(w)))
}

# ---- Config file: KEY="value" lines parsed as data ----------------------------

# Parse one shell-style value (the text after KEY=) without expanding or executing
# anything: "double quoted" with backslash escapes of \ " $ ` and newline,
# 'single quoted', and unquoted words (backslash escapes any character).
# Returns list(value, status) with status "ok", "unterminated" (an open quote at
# the end of the text) or "trailing" (more words after the value).
npm_shell_value <- function(s) {
  ch <- strsplit(s, "", fixed = TRUE)[[1]]
  n <- length(ch)
  out <- character(0)
  i <- 1L
  mode <- "plain"
  while (i <= n) {
    c <- ch[i]
    if (mode == "plain") {
      if (c == "\\") {
        if (i == n) return(list(value = paste(out, collapse = ""), status = "unterminated"))
        out <- c(out, ch[i + 1L]); i <- i + 2L; next
      } else if (c == "\"") {
        mode <- "double"
      } else if (c == "'") {
        mode <- "single"
      } else if (c == " " || c == "\t" || c == "\r") {
        rest <- trimws(paste(ch[i:n], collapse = ""))
        status <- if (rest == "" || startsWith(rest, "#")) "ok" else "trailing"
        return(list(value = paste(out, collapse = ""), status = status))
      } else {
        out <- c(out, c)
      }
    } else if (mode == "double") {
      if (c == "\\" && i < n && ch[i + 1L] %in% c("\\", "\"", "$", "`", "\n")) {
        if (ch[i + 1L] != "\n") out <- c(out, ch[i + 1L])
        i <- i + 2L; next
      } else if (c == "\"") {
        mode <- "plain"
      } else {
        out <- c(out, c)
      }
    } else {  # single quotes: everything literal
      if (c == "'") mode <- "plain" else out <- c(out, c)
    }
    i <- i + 1L
  }
  list(value = paste(out, collapse = ""),
       status = if (mode == "plain") "ok" else "unterminated")
}

# Parse the lines of a config file into a named character vector (keys in file
# order). Also reads the reference's unescaped files: a line KEY="…" whose value
# does not parse as one shell word is taken literally between the outer quotes.
npm_parse_config_lines <- function(lines, file = "config") {
  keys <- character(0)
  values <- character(0)
  n <- length(lines)
  i <- 1L
  while (i <= n) {
    lineno <- i
    line <- sub("^[ \t]+", "", lines[i])
    i <- i + 1L
    if (line == "" || startsWith(line, "#")) next
    m <- regmatches(line, regexec("^(export[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$", line))[[1]]
    if (length(m) == 0L)
      npm_stop("%s:%d: expected KEY=value, found: %s", file, lineno, substr(line, 1L, 60L))
    key <- m[3]
    raw <- sub("[ \t\r]+$", "", m[4])
    r <- npm_shell_value(raw)
    # Written by netperfmeter: exactly one double-quoted string with escapes. The
    # reference writes descriptions unescaped: a value that starts and ends with a
    # quote but is not one quoted string is taken literally between the outer quotes.
    one <- regexpr("^\"(?:[^\"\\\\]|\\\\.)*\"", raw, perl = TRUE)
    quoted_line <- nchar(raw) >= 2L && startsWith(raw, "\"") && endsWith(raw, "\"")
    if (quoted_line && attr(one, "match.length") != nchar(raw))
      r <- list(value = substr(raw, 2L, nchar(raw) - 1L), status = "ok")
    if (r$status == "unterminated") {
      # A double-quoted value may span lines (an escaped description with a newline).
      text <- raw
      while (r$status == "unterminated" && i <= n) {
        text <- paste0(text, "\n", lines[i])
        i <- i + 1L
        r <- npm_shell_value(text)
      }
      if (r$status == "unterminated")
        npm_stop("%s:%d: unterminated quote in the value of %s", file, lineno, key)
    }
    if (r$status == "trailing")
      npm_stop("%s:%d: unexpected text after the value of %s", file, lineno, key)
    if (key %in% keys) values[match(key, keys)] <- r$value
    else { keys <- c(keys, key); values <- c(values, r$value) }
  }
  structure(values, names = keys)
}

# Read a NetPerfMeter config file (plain or compressed) as data.
npm_read_config <- function(path) {
  lines <- npm_read_lines(path, "config file")
  cfg <- npm_parse_config_lines(lines, file = path)
  structure(cfg, class = c("npm_config", "character"), path = path)
}

# Value of a config key (default if missing).
npm_cfg <- function(cfg, key, default = "") {
  v <- unname(cfg[key])
  if (length(v) == 0L || is.na(v)) default else v
}

# Flows described by a config: one row per FLOW<id>_* group, any flow IDs, in
# file order. Columns FlowID, Description, Protocol, Label, VectorActive,
# VectorPassive (file names as written in the config).
npm_config_flows <- function(cfg) {
  k <- names(cfg)
  m <- regmatches(k, regexec("^FLOW([0-9]+)_", k))
  ids <- unique(vapply(m[lengths(m) > 0L], `[`, "", 2L))
  flows <- data.table(
    FlowID = as.integer(ids),
    Description = vapply(ids, function(id) npm_cfg(cfg, paste0("FLOW", id, "_DESCRIPTION")), ""),
    Protocol = vapply(ids, function(id) npm_cfg(cfg, paste0("FLOW", id, "_PROTOCOL")), ""),
    VectorActive = vapply(ids, function(id) npm_cfg(cfg, paste0("FLOW", id, "_VECTOR_ACTIVE_NODE")), ""),
    VectorPassive = vapply(ids, function(id) npm_cfg(cfg, paste0("FLOW", id, "_VECTOR_PASSIVE_NODE")), ""),
    PathsActive = vapply(ids, function(id) npm_cfg(cfg, paste0("FLOW", id, "_PATHS_VECTOR_ACTIVE_NODE")), ""),
    PathsPassive = vapply(ids, function(id) npm_cfg(cfg, paste0("FLOW", id, "_PATHS_VECTOR_PASSIVE_NODE")), ""))
  flows <- flows[!duplicated(FlowID)]
  flows[, Label := npm_flow_label(FlowID, Description, Protocol)]
  nf <- suppressWarnings(as.integer(npm_cfg(cfg, "NUM_FLOWS", NA)))
  if (!is.na(nf) && nf != nrow(flows))
    npm_warn("config says NUM_FLOWS=%d but describes %d flows", nf, nrow(flows))
  flows[]
}

npm_flow_label <- function(id, description, protocol = "") {
  if (length(id) == 0L) return(character(0))
  d <- ifelse(is.na(description) | description == "", paste("Flow", id), description)
  p <- ifelse(is.na(protocol) | protocol == "", "", paste0(protocol, ", "))
  paste0(d, " (", p, "ID ", id, ")")
}

# Find a file named in a config: relative names are looked up next to the config
# first, then relative to the working directory; .bz2 and plain variants both count.
npm_resolve_file <- function(name, config_dir) {
  if (is.na(name) || name == "") return(NA_character_)
  base <- if (grepl("^/", name)) name else c(file.path(config_dir, name), name,
                                              file.path(config_dir, basename(name)))
  alt <- ifelse(grepl("\\.bz2$", base), sub("\\.bz2$", "", base), paste0(base, ".bz2"))
  cand <- unique(c(base, alt))
  hit <- cand[file.exists(cand) & !dir.exists(cand)]
  if (length(hit)) hit[1] else NA_character_
}

# ---- Vector and scalar files ---------------------------------------------------

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

# ---- One run: config + vectors --------------------------------------------------

# Read everything a config file points at. time_range = c(from, to) in seconds
# (NA = open end) restricts the samples. Returns a list with config, flows,
# measurement (both nodes), flowvectors (both receiving nodes), cpu (or NULL).
npm_read_run <- function(config, time_range = c(NA_real_, NA_real_)) {
  cfg <- npm_read_config(config)
  dir <- dirname(config)
  flows <- npm_config_flows(cfg)
  nodes <- c(Active = npm_cfg(cfg, "NAME_ACTIVE_NODE", "Client"),
             Passive = npm_cfg(cfg, "NAME_PASSIVE_NODE", "Server"))
  node_label <- c(Active = sprintf("Active node (%s)", nodes[["Active"]]),
                  Passive = sprintf("Passive node (%s)", nodes[["Passive"]]))
  in_range <- function(t) {
    ok <- rep(TRUE, length(t))
    if (!is.na(time_range[1])) ok <- ok & t >= time_range[1]
    if (!is.na(time_range[2])) ok <- ok & t <= time_range[2]
    ok
  }

  mv <- list()
  for (role in c("Active", "Passive")) {
    key <- paste0("VECTOR_", toupper(role), "_NODE")
    name <- npm_cfg(cfg, key)
    if (name == "")
      npm_stop("%s: %s is empty; run netperfmeter with -vector=NAME.vec[.bz2] to record vectors",
               config, key)
    file <- npm_resolve_file(name, dir)
    if (is.na(file))
      npm_stop("%s: the %s measurement vector %s does not exist", config, tolower(role), name)
    d <- npm_read_measurement_vector(file)
    d[, Node := role]
    mv[[role]] <- d
  }
  mv <- rbindlist(mv, use.names = TRUE)
  if (nrow(mv) == 0L) npm_stop("%s: the measurement vectors have no samples", config)
  if (!all(in_range(mv$RelTime)) && !any(in_range(mv$RelTime) & mv$Interval > 0))
    npm_stop("no samples between %s and %s s (the run has samples from %g to %g s)",
             ifelse(is.na(time_range[1]), "the start", format(time_range[1])),
             ifelse(is.na(time_range[2]), "the end", format(time_range[2])),
             min(mv$RelTime), max(mv$RelTime))
  mv <- mv[in_range(RelTime)]

  fv <- list()
  for (i in seq_len(nrow(flows))) {
    for (role in c("Active", "Passive")) {
      name <- flows[[paste0("Vector", role)]][i]
      if (name == "") next
      file <- npm_resolve_file(name, dir)
      if (is.na(file)) {
        npm_warn("per-flow vector %s does not exist; skipped", name)
        next
      }
      d <- npm_read_flow_vector(file, c("RelTime", "Delay", "Jitter"))
      if (nrow(d) == 0L) next
      d[, `:=`(FlowID = flows$FlowID[i], Node = role)]
      fv[[length(fv) + 1L]] <- d
    }
  }
  fv <- if (length(fv)) rbindlist(fv, use.names = TRUE) else NULL
  if (!is.null(fv)) fv <- fv[in_range(RelTime)]

  # Per-path vectors (netperfmeter's own; a reference run has none).
  pv <- list()
  for (i in seq_len(nrow(flows))) {
    for (role in c("Active", "Passive")) {
      name <- flows[[paste0("Paths", role)]][i]
      if (name == "") next
      file <- npm_resolve_file(name, dir)
      if (is.na(file)) next  # e.g. a passive that records none
      d <- npm_read_path_vector(file)
      if (is.null(d) || nrow(d) == 0L) next
      d[, `:=`(FlowID = flows$FlowID[i], Node = role)]
      pv[[length(pv) + 1L]] <- d
    }
  }
  pv <- if (length(pv)) rbindlist(pv, use.names = TRUE) else NULL
  if (!is.null(pv)) pv <- pv[in_range(RelTime)]

  # Labels: config description for known flows, the vector's description otherwise.
  known <- flows$FlowID
  extra <- unique(mv[FlowID >= 0 & !(FlowID %in% known), .(FlowID, Description)])
  extra <- extra[!duplicated(FlowID)]
  labels <- rbind(flows[, .(FlowID, Label)],
                  extra[, .(FlowID, Label = npm_flow_label(FlowID, Description))])
  flow_levels <- labels$Label
  mv[, Flow := factor(labels$Label[match(FlowID, labels$FlowID)], levels = flow_levels)]
  mv[FlowID < 0, Flow := NA]
  mv[, NodeLabel := factor(node_label[Node], levels = node_label)]
  if (!is.null(fv)) {
    fv[, Flow := factor(labels$Label[match(FlowID, labels$FlowID)], levels = flow_levels)]
    recv_label <- c(Active = sprintf("Received at active node (%s)", nodes[["Active"]]),
                    Passive = sprintf("Received at passive node (%s)", nodes[["Passive"]]))
    fv[, NodeLabel := factor(recv_label[Node], levels = recv_label)]
  }

  cpu <- NULL
  for (role in c("Active", "Passive")) {
    name <- npm_cfg(cfg, paste0("SCALAR_", toupper(role), "_NODE"))
    file <- npm_resolve_file(name, dir)
    if (is.na(file)) next
    s <- npm_read_scalars(file)
    s <- s[grepl("\\.(CPU\\[[0-9]+\\]|totalCPU)$", Object)]
    if (nrow(s) == 0L) next
    s[, CPU := ifelse(grepl("totalCPU$", Object), "All",
                      sub(".*CPU\\[([0-9]+)\\]$", "\\1", Object))]
    s[, Node := role]
    cpu[[role]] <- s
  }
  if (!is.null(cpu)) {
    cpu <- rbindlist(cpu)
    cpu[, NodeLabel := factor(node_label[Node], levels = node_label)]
    cpu_levels <- unique(c(sort(as.integer(setdiff(cpu$CPU, "All"))), "All"))
    cpu[, CPU := factor(CPU, levels = as.character(cpu_levels))]
  }

  if (!is.null(pv) && nrow(pv)) {
    pv[, Flow := factor(labels$Label[match(FlowID, labels$FlowID)], levels = flow_levels)]
    pv[, NodeLabel := factor(node_label[Node], levels = node_label)]
    # One label per path and node: its ID and addresses as the node sees them.
    pv[, PathLabel := ifelse(Path == NPM_CONNECTION_PATH, "Whole connection",
                             ifelse(Local == "-", sprintf("Path %d: to %s", Path, Remote),
                                    sprintf("Path %d: %s to %s", Path, Local, Remote)))]
  }

  list(config = cfg, config_file = config, flows = flows, nodes = nodes,
       measurement = mv, flowvectors = fv, paths = pv, cpu = cpu)
}

# ---- Units and labels ------------------------------------------------------------

# Choose a decimal prefix for values of a quantity; returns list(factor, unit).
npm_auto_unit <- function(values, unit) {
  m <- suppressWarnings(max(abs(values), na.rm = TRUE))
  if (!is.finite(m)) m <- 0
  p <- if (m >= 1e9) list(1e-9, "G") else if (m >= 1e6) list(1e-6, "M")
       else if (m >= 1e3) list(1e-3, "k") else list(1, "")
  list(factor = p[[1]], unit = paste0(p[[2]], unit))
}

NPM_UNITS <- c("bit" = 1, "b" = 1, "byte" = 8, "B" = 8, "Byte" = 8, "s" = 1, "ms" = 1e-3,
               "us" = 1e-6, "µs" = 1e-6, "frame" = 1, "packet" = 1)
NPM_PREFIXES <- c(k = 1e3, K = 1e3, M = 1e6, G = 1e9, T = 1e12, Ki = 1024, Mi = 1024^2,
                  Gi = 1024^3, Ti = 1024^4)

# Value of one unit in base units: "Mbit/s", "KiB/s", "byte", "ms".
npm_unit_value <- function(u) {
  parts <- strsplit(trimws(u), "/", fixed = TRUE)[[1]]
  if (length(parts) < 1L || length(parts) > 2L || any(parts == "")) npm_stop("unknown unit %s", u)
  one <- function(p) {
    if (!is.na(NPM_UNITS[p])) return(NPM_UNITS[[p]])
    for (pre in names(NPM_PREFIXES)[order(-nchar(names(NPM_PREFIXES)))]) {
      if (startsWith(p, pre)) {
        rest <- substring(p, nchar(pre) + 1L)
        if (!is.na(NPM_UNITS[rest])) return(NPM_PREFIXES[[pre]] * NPM_UNITS[[rest]])
      }
    }
    npm_stop("unknown unit %s (known: bit, B/byte, s, ms, us with prefixes k, M, G, T, Ki, Mi, Gi)", u)
  }
  v <- one(parts[1])
  if (length(parts) == 2L) v <- v / one(parts[2])
  v
}

# Factor that converts values given in unit `from` into unit `to`:
# npm_unit_factor("bit/s", "Mbit/s") == 1e-6, npm_unit_factor("B/s", "kbit/s") == 8e-3.
npm_unit_factor <- function(from, to) npm_unit_value(from) / npm_unit_value(to)

# Parse a "FROM:TO" or "FROM->TO" unit conversion; returns the factor.
npm_parse_unit_conversion <- function(spec) {
  p <- strsplit(spec, "->|:")[[1]]
  if (length(p) != 2L) npm_stop("unit conversion %s is not FROM:TO (e.g. bit/s:Mbit/s)", spec)
  npm_unit_factor(p[1], p[2])
}

NPM_GREEK <- c("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota",
               "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau",
               "upsilon", "phi", "chi", "psi", "omega", "Alpha", "Beta", "Gamma", "Delta",
               "Epsilon", "Zeta", "Eta", "Theta", "Iota", "Kappa", "Lambda", "Mu", "Nu", "Xi",
               "Omicron", "Pi", "Rho", "Sigma", "Tau", "Upsilon", "Phi", "Chi", "Psi", "Omega")

# Convert label markup into the text of an R plotmath expression:
#   \rho, \Gamma ...   Greek letters;   X_{DFN}, X_1   subscripts;   X^{2}   superscripts;
#   \_ \^ \\ \{ \}     the characters themselves; everything else is literal text.
# Text is embedded as quoted strings, so nothing from a label is ever evaluated.
npm_markup_to_plotmath <- function(s) {
  ch <- strsplit(s, "", fixed = TRUE)[[1]]
  n <- length(ch)
  atoms <- list()                       # each: list(type = "text"|"expr", v = ...)
  add_text <- function(t) {
    k <- length(atoms)
    if (k && atoms[[k]]$type == "text") atoms[[k]]$v <<- paste0(atoms[[k]]$v, t)
    else atoms[[k + 1L]] <<- list(type = "text", v = t)
  }
  read_arg <- function(i) {             # argument of _ or ^ starting at ch[i]
    if (i > n) return(list(text = "", next_i = i))
    if (ch[i] == "{") {
      depth <- 1L; j <- i + 1L
      while (j <= n) {
        if (ch[j] == "\\" && j < n) { j <- j + 2L; next }
        if (ch[j] == "{") depth <- depth + 1L
        if (ch[j] == "}") { depth <- depth - 1L; if (depth == 0L) break }
        j <- j + 1L
      }
      return(list(text = if (j > i + 1L) paste(ch[(i + 1L):(j - 1L)], collapse = "") else "",
                  next_i = j + 1L))
    }
    if (ch[i] == "\\") {
      m <- regmatches(paste(ch[i:n], collapse = ""), regexpr("^\\\\[A-Za-z]+", paste(ch[i:n], collapse = "")))
      if (length(m)) return(list(text = m, next_i = i + nchar(m)))
      return(list(text = paste(ch[i:min(n, i + 1L)], collapse = ""), next_i = i + 2L))
    }
    list(text = ch[i], next_i = i + 1L)
  }
  i <- 1L
  while (i <= n) {
    c <- ch[i]
    if (c == "\\" && i < n) {
      rest <- paste(ch[(i + 1L):n], collapse = "")
      word <- regmatches(rest, regexpr("^[A-Za-z]+", rest))
      if (length(word) && word %in% NPM_GREEK) {
        atoms[[length(atoms) + 1L]] <- list(type = "expr", v = word)
        i <- i + 1L + nchar(word); next
      }
      if (ch[i + 1L] %in% c("_", "^", "\\", "{", "}")) { add_text(ch[i + 1L]); i <- i + 2L; next }
      add_text(c); i <- i + 1L; next
    }
    if (c %in% c("_", "^")) {
      arg <- read_arg(i + 1L)
      sub <- npm_markup_to_plotmath(arg$text)
      k <- length(atoms)
      base <- "\"\""
      if (k && atoms[[k]]$type == "expr") {
        base <- atoms[[k]]$v; atoms[[k]] <- NULL
      } else if (k) {
        t <- atoms[[k]]$v
        w <- regmatches(t, regexpr("[[:alnum:].]+$", t))
        if (length(w)) {
          base <- deparse(w)
          t <- substr(t, 1L, nchar(t) - nchar(w))
          if (t == "") atoms[[k]] <- NULL else atoms[[k]]$v <- t
        }
      }
      e <- if (c == "_") sprintf("%s[%s]", base, sub) else sprintf("%s^{%s}", base, sub)
      atoms[[length(atoms) + 1L]] <- list(type = "expr", v = e)
      i <- arg$next_i; next
    }
    add_text(c); i <- i + 1L
  }
  parts <- vapply(atoms, function(a) if (a$type == "text") deparse(a$v) else a$v, "")
  if (length(parts) == 0L) "\"\"" else if (length(parts) == 1L) parts
  else sprintf("paste(%s)", paste(parts, collapse = ", "))
}

npm_has_markup <- function(s) grepl("[\\\\_^]", s)

# A label for axis/legend titles: plain string without markup, else a plotmath expression.
npm_label <- function(s) {
  if (is.null(s) || length(s) == 0L) return(NULL)
  if (is.language(s) || is.expression(s)) return(s)
  if (!npm_has_markup(s)) return(s)
  tryCatch(parse(text = npm_markup_to_plotmath(s), keep.source = FALSE)[[1]],
           error = function(e) npm_stop("cannot understand label %s", s))
}

# Labels for several legend entries / strips: character, or an expression vector.
npm_labels <- function(s) {
  if (!any(npm_has_markup(s))) return(s)
  ex <- vapply(s, function(x) if (npm_has_markup(x)) npm_markup_to_plotmath(x) else deparse(x), "")
  tryCatch(parse(text = ex, keep.source = FALSE),
           error = function(e) npm_stop("cannot understand label(s) %s", paste(s, collapse = ", ")))
}

# ---- Look ---------------------------------------------------------------------------

NPM_OKABE_ITO <- c("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9",
                   "#000000", "#F0E442")
NPM_SHAPES <- c(16, 17, 15, 18, 1, 2, 0, 5, 3, 4, 8, 6)
NPM_LINETYPES <- c("solid", "dashed", "dotted", "dotdash", "longdash", "twodash",
                   "11", "44", "1343")

npm_palette <- function(n, grey = FALSE) {
  if (n <= 0L) return(character(0))
  if (grey) return(if (n == 1L) "black" else grey.colors(n, start = 0, end = 0.62))
  if (n <= length(NPM_OKABE_ITO)) NPM_OKABE_ITO[seq_len(n)]
  else grDevices::hcl.colors(n, "Dark 3")
}

npm_rep_len <- function(v, n) rep_len(v, max(n, 0L))

npm_theme <- function(base_size = 12, legend_position = "bottom") {
  theme_bw(base_size = base_size) +
    theme(legend.position = legend_position,
          legend.key.width = grid::unit(2.2, "lines"),
          panel.grid.minor = element_blank(),
          strip.background = element_rect(fill = "grey92"),
          plot.title = element_text(face = "bold"))
}

# ---- Statistics -------------------------------------------------------------------------

# Mean and confidence interval from the t-distribution (as t.test()) of a numeric vector.
# One value: no interval (NA bounds); zero variance: the interval collapses to the mean.
npm_mean_ci <- function(v, level = 0.95) {
  v <- v[!is.na(v)]
  n <- length(v)
  m <- if (n) mean(v) else NA_real_
  s <- if (n > 1L) sd(v) else NA_real_
  h <- if (n > 1L) qt((1 + level) / 2, df = n - 1L) * s / sqrt(n) else NA_real_
  list(N = n, Mean = m, SD = s, Lower = m - h, Upper = m + h)
}

# Mean, standard deviation and t-interval of column y for every combination of `by`.
npm_summarise <- function(data, y, by = character(0), level = 0.95) {
  data <- as.data.table(data)
  npm_require_columns(data, c(y, by))
  if (!is.numeric(level) || length(level) != 1L || is.na(level) || level <= 0 || level >= 1)
    npm_stop("confidence level must be between 0 and 1 (exclusive), got %s", format(level))
  if (!is.numeric(data[[y]])) npm_stop("column %s is not numeric", y)
  by <- unique(by)
  res <- if (length(by)) data[, npm_mean_ci(.SD[[1L]], level), by = by, .SDcols = y]
         else data[, npm_mean_ci(.SD[[1L]], level), .SDcols = y]
  if (length(by)) setorderv(res, by)
  res[]
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

# ---- createsummary tables -----------------------------------------------------------------

# Read a createsummary/combinesummaries table (plain, .bz2, .gz): header line,
# whitespace-separated fields, "quoted" values, optional leading line numbers.
# createsummary --csv tables (*.csv[.bz2]) are comma-separated; sep overrides.
npm_read_summary <- function(path, sep = NULL) {
  if (is.null(sep))
    sep <- if (grepl("\\.csv(\\.(bz2|gz|xz))?$", path, ignore.case = TRUE)) "," else ""
  con <- npm_open(path, "table")
  on.exit(close(con))
  d <- tryCatch(
    read.table(con, header = TRUE, quote = "\"", comment.char = "", sep = sep,
               check.names = FALSE, stringsAsFactors = FALSE, strip.white = TRUE),
    error = function(e) {
      if (grepl("no lines available|first five rows are empty", conditionMessage(e)))
        npm_stop("table %s %s", path, npm_empty_reason(path))
      npm_stop("cannot parse table %s: %s", path, conditionMessage(e))
    },
    warning = function(w) npm_stop("cannot parse table %s: %s", path, conditionMessage(w)))
  if (nrow(d) == 0L) npm_stop("table %s has no rows", path)
  if ("Split" %in% names(d) && all(is.na(d$Split))) d$Split <- ""
  d <- as.data.table(d)
  if (anyDuplicated(names(d))) npm_stop("table %s has duplicate column names", path)
  d
}

# ---- Parameter-study figure -----------------------------------------------------------------

# Plot means and t-intervals of y over x, one curve per colour/linetype group, facets
# by rows/cols. Labels may use markup (see npm_markup_to_plotmath); value_labels is a
# list column -> c(value = "label") for legend entries and strips. Returns a ggplot
# with the summarised data in attr(p, "summary").
npm_plot_summary <- function(data, x, y, colour = NULL, linetype = NULL,
                             facet_rows = NULL, facet_cols = NULL, filter = NULL,
                             level = 0.95, x_scale = 1, y_scale = 1,
                             xlab = NULL, ylab = NULL, colour_title = NULL,
                             linetype_title = NULL, title = NULL, value_labels = list(),
                             grey = FALSE, points = TRUE, base_size = 12,
                             legend_position = "bottom", x_limits = NULL, y_limits = NULL,
                             x_log = FALSE, y_log = FALSE, runs = FALSE, reference = NULL) {
  data <- as.data.table(data)
  nz <- function(v) if (is.null(v) || length(v) == 0L || is.na(v[1]) || v[1] == "") NULL else v[1]
  colour <- nz(colour); linetype <- nz(linetype)
  facet_rows <- nz(facet_rows); facet_cols <- nz(facet_cols)
  npm_require_columns(data, c(x, y, colour, linetype, facet_rows, facet_cols))
  if (!is.numeric(data[[y]])) npm_stop("column %s (y) is not numeric", y)
  nrow_before <- nrow(data)
  data <- npm_filter(data, filter)
  if (nrow(data) == 0L)
    npm_stop("no rows left after filtering with %s (of %d)", filter, nrow_before)
  for (col in names(value_labels))
    if (!(col %in% names(data))) npm_stop("value label for unknown column %s", col)

  groups <- unique(c(x, colour, linetype, facet_rows, facet_cols))
  # createsummary's aggregate columns (active.flow for active.flow-ReceivedBitRate)
  # tell flows, CPUs ... apart: averaging over several of them is almost always a mistake.
  agg <- setdiff(names(data)[vapply(names(data), function(c)
    startsWith(y, paste0(c, "-")) || startsWith(y, paste0(c, ".")), TRUE)], c(groups, y))
  for (a in agg) {
    if (any(data[, uniqueN(.SD[[1L]]), by = groups, .SDcols = a]$V1 > 1L))
      npm_warn("points average over several values of %s; filter (-F '`%s` == 0') or map it",
               a, a)
  }

  s <- npm_summarise(data, y, groups, level)
  for (v in c("Mean", "SD", "Lower", "Upper")) set(s, j = v, value = s[[v]] * y_scale)
  xnum <- is.numeric(s[[x]])
  s[, .x := if (xnum) get(x) * x_scale else factor(get(x), levels = unique(get(x)))]

  # Group factors in natural order with their legend labels.
  lev <- function(col) {
    v <- sort(unique(data[[col]]))
    as.character(v)
  }
  lab_for <- function(col, levels) {
    vl <- value_labels[[col]]
    out <- levels
    if (!is.null(vl)) {
      hit <- levels %in% names(vl)
      out[hit] <- unname(vl[levels[hit]])
    }
    out
  }
  aes_map <- aes(x = .x, y = Mean, group = .grp)
  grp_cols <- unique(c(colour, linetype, facet_rows, facet_cols))
  s[, .grp := "all"]
  if (length(grp_cols)) {
    key <- function(d) do.call(paste, c(lapply(grp_cols, function(g) as.character(d[[g]])), sep = "\r"))
    u <- unique(s[, grp_cols, with = FALSE])
    setorderv(u, grp_cols)           # natural order: numbers as numbers
    s[, .grp := factor(key(s), levels = key(u))]
  }

  if (!is.null(colour)) {
    lv <- lev(colour)
    s[, .col := factor(as.character(get(colour)), levels = lv)]
  }
  lt_col <- linetype
  if (is.null(lt_col) && grey && !is.null(colour)) lt_col <- colour  # keep grey curves apart
  if (!is.null(lt_col)) {
    lv2 <- lev(lt_col)
    s[, .lt := factor(as.character(get(lt_col)), levels = lv2)]
  }
  p <- ggplot(s, aes_map)
  line_aes <- aes()
  point_aes <- aes()
  if (!is.null(colour)) { line_aes$colour <- quote(.col); point_aes$colour <- quote(.col)
                          point_aes$shape <- quote(.col) }
  if (!is.null(lt_col)) line_aes$linetype <- quote(.lt)
  # Numeric x: curves. Categories: points side by side, no lines between categories.
  dodge <- if (xnum) position_identity() else position_dodge(width = 0.5)
  if (xnum) p <- p + geom_line(line_aes, linewidth = 0.7)
  if (points || !xnum) p <- p + geom_point(point_aes, size = 2.2, position = dodge)
  if (!is.null(reference)) {
    # Values to compare with (a paper's): hollow, in the colour of the curve they belong to.
    ref <- as.data.table(reference)
    npm_require_columns(ref, c(x, y, if (!is.null(colour) && colour %in% names(ref)) colour))
    ref[, .y := as.numeric(get(y)) * y_scale]
    ref[, .x := if (xnum) as.numeric(get(x)) * x_scale else factor(as.character(get(x)), levels = levels(s$.x))]
    ref_aes <- aes(x = .x, y = .y)
    if (!is.null(colour) && colour %in% names(ref)) {
      ref[, .col := factor(as.character(get(colour)), levels = levels(s$.col))]
      ref_aes$colour <- quote(.col)
    }
    # a value as a diamond; a bound ("less than", "at least") as a triangle pointing its way
    kind <- if ("bound" %in% names(ref)) as.character(ref$bound) else rep("value", nrow(ref))
    if (!all(kind %in% c("value", "upper", "lower"))) {
      npm_stop("the reference's bound column takes value, upper or lower, not \"%s\"",
               setdiff(kind, c("value", "upper", "lower"))[1])
    }
    for (k in c("value", "upper", "lower")) {
      rows <- ref[kind == k & !is.na(.y)]
      if (nrow(rows) > 0L) {
        p <- p + geom_point(ref_aes, data = rows, shape = c(value = 5, upper = 6, lower = 2)[[k]], size = 3,
                            stroke = 0.9, inherit.aes = FALSE, show.legend = FALSE)
      }
    }
  }
  if (runs) {
    # Every run's value beside the means, so that a spread or two modes show as such.
    r <- copy(data)
    r[, .y := get(y) * y_scale]
    r[, .x := if (xnum) get(x) * x_scale else factor(get(x), levels = levels(s$.x))]
    run_aes <- aes(x = .x, y = .y, group = NULL)
    if (!is.null(colour)) {
      r[, .col := factor(as.character(get(colour)), levels = levels(s$.col))]
      run_aes$colour <- quote(.col)
      run_aes$group <- quote(.col)
    }
    xr <- if (xnum) diff(range(s$.x, na.rm = TRUE)) else 1
    jitter <- if (xnum) position_jitter(width = if (xr > 0) xr / 80 else 0.05, height = 0, seed = 1)
              else if (is.null(colour)) position_jitter(width = 0.08, height = 0, seed = 1)
              else position_jitterdodge(jitter.width = 0.1, jitter.height = 0, dodge.width = 0.5, seed = 1)
    p <- p + geom_point(run_aes, data = r, size = 1.3, alpha = 0.55, shape = 16, position = jitter,
                        inherit.aes = FALSE, show.legend = FALSE)
  }
  ci <- s[!is.na(Lower)]
  if (nrow(ci)) {
    xr <- if (xnum) diff(range(s$.x, na.rm = TRUE)) else 1
    w <- if (xnum) (if (xr > 0) xr / 50 else 0.1) else 0.25
    eb_aes <- aes(ymin = Lower, ymax = Upper)
    if (!is.null(colour)) eb_aes$colour <- quote(.col)
    p <- p + geom_errorbar(eb_aes, data = ci, width = w, linewidth = 0.5, linetype = "solid",
                           position = dodge)
  }

  ctitle <- npm_label(colour_title %||% colour)
  # A grey-scale line type that doubles the colour shares its legend.
  ltitle <- if (!is.null(linetype)) npm_label(linetype_title %||% linetype) else ctitle
  if (!is.null(colour)) {
    lv <- levels(s$.col)
    labs_c <- npm_labels(lab_for(colour, lv))
    p <- p + scale_colour_manual(values = setNames(npm_palette(length(lv), grey), lv),
                                 labels = labs_c, name = ctitle, drop = FALSE) +
             scale_shape_manual(values = setNames(npm_rep_len(NPM_SHAPES, length(lv)), lv),
                                labels = labs_c, name = ctitle, drop = FALSE)
  }
  if (!is.null(lt_col)) {
    lv2 <- levels(s$.lt)
    p <- p + scale_linetype_manual(values = setNames(npm_rep_len(NPM_LINETYPES, length(lv2)), lv2),
                                   labels = npm_labels(lab_for(lt_col, lv2)), name = ltitle,
                                   drop = FALSE)
  }
  if (!is.null(facet_rows) || !is.null(facet_cols)) {
    strip <- function(col) {
      force(col)
      function(values) {
        values <- as.character(values)
        vl <- value_labels[[col]]
        out <- ifelse(values %in% names(vl), unname(vl[values]), paste0(col, " = ", values))
        ex <- vapply(out, function(o) if (npm_has_markup(o)) npm_markup_to_plotmath(o) else deparse(o), "")
        lapply(ex, function(e) c(parse(text = e, keep.source = FALSE)))
      }
    }
    lab <- list()
    if (!is.null(facet_rows)) lab[[facet_rows]] <- strip(facet_rows)
    if (!is.null(facet_cols)) lab[[facet_cols]] <- strip(facet_cols)
    lbl <- function(labels) {
      out <- lapply(names(labels), function(n) lab[[n]](labels[[n]]))
      names(out) <- names(labels)
      out
    }
    class(lbl) <- c("function", "labeller")
    p <- p + facet_grid(rows = if (!is.null(facet_rows)) vars(.data[[facet_rows]]),
                        cols = if (!is.null(facet_cols)) vars(.data[[facet_cols]]),
                        labeller = lbl)
  }
  p <- p + labs(x = npm_label(if (!is.null(xlab)) xlab else x),
                y = npm_label(if (!is.null(ylab)) ylab else y),
                title = npm_label(title)) +
    npm_theme(base_size, legend_position)
  if (length(grp_cols) == 0L || (is.null(colour) && is.null(lt_col)))
    p <- p + theme(legend.position = "none")
  if (x_log) p <- p + scale_x_log10()
  if (y_log) p <- p + scale_y_log10()
  if (!is.null(x_limits) || !is.null(y_limits))
    p <- p + coord_cartesian(xlim = x_limits, ylim = y_limits)
  attr(p, "summary") <- s[, !c(".x", ".grp", intersect(names(s), c(".col", ".lt"))), with = FALSE]
  p
}

# ---- Run overview figures -------------------------------------------------------------------

npm_bin_width <- function(t, target = 150) {
  span <- diff(range(t, na.rm = TRUE))
  if (!is.finite(span) || span <= 0) return(1)
  raw <- span / target
  e <- 10^floor(log10(raw))
  nice <- c(1, 2, 5, 10) * e
  nice[which(nice >= raw)[1]]
}

npm_time_label <- function(w) {
  if (w >= 1) sprintf("%g s", w) else sprintf("%g ms", w * 1000)
}

# Rates of very short intervals (the last one, cut short at STOP) say little and
# dwarf the rest: an interval shorter than a quarter of the median one is merged
# into the interval before it (bytes, packets, frames and durations add up).
npm_merge_short_intervals <- function(d) {
  d <- as.data.table(d)
  if (nrow(d) == 0L) return(d)
  typical <- median(d$Interval)
  d <- d[order(Node, FlowID, Action, RelTime)]
  d[, .block := cumsum(Interval >= typical / 4 | seq_len(.N) == 1L), by = .(Node, FlowID, Action)]
  d[, `:=`(Interval = sum(Interval), RelBytes = sum(RelBytes), RelPackets = sum(RelPackets),
           RelFrames = sum(RelFrames)), by = .(Node, FlowID, Action, .block)]
  d <- d[d[, .I[.N], by = .(Node, FlowID, Action, .block)]$V1]
  d[, .block := NULL][]
}

# Step curves of interval values: a row at RelTime holds the value of the interval
# (RelTime - Interval, RelTime]; returns two points per row, in drawing order.
npm_steps <- function(d, yv, by) {
  d <- as.data.table(d)[order(RelTime)][, .row := seq_len(.N)]
  a <- copy(d)[, RelTime := pmax(0, RelTime - Interval)][, .ord := 1L]
  b <- copy(d)[, .ord := 2L]
  r <- rbind(a, b)
  setorderv(r, c(by, ".row", ".ord"))
  r[]
}

# The figures of one run, as a list of list(plot, title, outline = c(section, title)).
npm_run_plots <- function(run, per_flow = TRUE, grey = FALSE, base_size = 12,
                          legend_position = "bottom") {
  mv <- run$measurement
  fv <- run$flowvectors
  flows <- levels(mv$Flow)
  pal <- setNames(npm_palette(length(flows), grey), flows)
  flow_cols <- max(1L, ceiling(length(flows) / 5))   # legend: at most 5 flows per column
  theme_npm <- npm_theme(base_size, legend_position)
  xl <- "Time t [s]"
  colour_flow <- scale_colour_manual(values = pal, name = "Flow", drop = TRUE)
  out <- list()
  add <- function(p, title, section) {
    shown <- if (section == "Overview") title else paste0(section, ": ", title)
    out[[length(out) + 1L]] <<- list(plot = p + labs(title = shown), title = title,
                                     outline = c(section, title))
  }
  act <- npm_merge_short_intervals(mv[FlowID >= 0 & Interval > 0])
  lost <- act[Action %in% c("Received", "Lost")]
  act <- act[Action %in% c("Sent", "Received")]
  act[, Action := factor(Action, levels = c("Sent", "Received"))]
  linetype_action <- scale_linetype_manual(values = c(Sent = "solid", Received = "22"),
                                           name = "Action", drop = FALSE)
  lines_by_flow <- function(d, yv, ylab) {
    ggplot(npm_steps(d, yv, c("NodeLabel", "Flow", "Action")),
           aes(x = RelTime, y = .data[[yv]], colour = Flow, linetype = Action,
               group = interaction(Flow, Action))) +
      geom_path(linewidth = 0.6) +
      facet_wrap(vars(NodeLabel), ncol = 1) + colour_flow + linetype_action +
      labs(x = xl, y = ylab) + theme_npm +
      guides(colour = guide_legend(ncol = flow_cols, order = 1), linetype = guide_legend(order = 2))
  }
  section <- "Overview"
  if (nrow(act)) {
    act[, BitRate := RelBytes * 8 / Interval]
    u <- npm_auto_unit(act$BitRate, "bit/s")
    act[, BitRateS := BitRate * u$factor]
    add(lines_by_flow(act, "BitRateS", sprintf("Bit rate [%s]", u$unit)) +
          expand_limits(y = 0), "Bit rate", section)
    cum <- mv[FlowID >= 0 & Action %in% c("Sent", "Received")]
    cum[, Action := factor(Action, levels = c("Sent", "Received"))]
    u <- npm_auto_unit(cum$AbsBytes, "B")
    cum[, AbsBytesS := AbsBytes * u$factor]
    add(ggplot(cum[order(RelTime)], aes(x = RelTime, y = AbsBytesS, colour = Flow, linetype = Action,
                        group = interaction(Flow, Action))) +
          geom_line(linewidth = 0.7) + facet_wrap(vars(NodeLabel), ncol = 1) +
          colour_flow + linetype_action + expand_limits(y = 0) +
          labs(x = xl, y = sprintf("Cumulative data [%s]", u$unit)) + theme_npm +
          guides(colour = guide_legend(ncol = flow_cols, order = 1), linetype = guide_legend(order = 2)),
        "Cumulative data", section)
    act[, FrameRate := RelFrames / Interval]
    add(lines_by_flow(act, "FrameRate", "Frame rate [frames/s]") + expand_limits(y = 0),
        "Frame rate", section)
    # Loss as seen by the receiver of each interval: lost / (received + lost) packets.
    rl <- lost[, .(Received = sum(RelPackets[Action == "Received"]),
               Lost = sum(RelPackets[Action == "Lost"])),
             by = .(NodeLabel, Flow, FlowID, RelTime)]
    rl[, Loss := ifelse(Received + Lost > 0, 100 * Lost / (Received + Lost), NA_real_)]
    rl <- merge(rl, unique(act[, .(NodeLabel, FlowID, RelTime, Interval)]),
                by = c("NodeLabel", "FlowID", "RelTime"))
    add(ggplot(npm_steps(rl, "Loss", c("NodeLabel", "Flow")),
               aes(x = RelTime, y = Loss, colour = Flow, group = Flow)) +
          geom_path(linewidth = 0.6) + facet_wrap(vars(NodeLabel), ncol = 1) +
          colour_flow + expand_limits(y = c(0, 1)) +
          labs(x = xl, y = "Packet loss [%]") + theme_npm +
          guides(colour = guide_legend(ncol = flow_cols)),
        "Packet loss", section)
  }
  if (!is.null(fv) && nrow(fv)) {
    w <- npm_bin_width(fv$RelTime)
    fb <- fv[, .(Delay = mean(Delay), Jitter = mean(Jitter)),
             by = .(NodeLabel, Flow, RelTime = (floor(RelTime / w) + 0.5) * w)]
    for (m in list(c("Delay", "One-way delay"), c("Jitter", "Jitter")))
      add(ggplot(fb, aes(x = RelTime, y = .data[[m[1]]], colour = Flow)) +
            geom_line(linewidth = 0.6) + facet_wrap(vars(NodeLabel), ncol = 1) + colour_flow +
            expand_limits(y = 0) +
            labs(x = xl, y = sprintf("%s [ms] (mean per %s)", m[2], npm_time_label(w))) +
            theme_npm + guides(colour = guide_legend(ncol = flow_cols)),
          m[2], section)
  }
  if (!is.null(run$cpu) && nrow(run$cpu)) {
    cpu <- run$cpu[Name != "Idle"]
    cpu[, Name := factor(Name, levels = unique(Name))]
    add(ggplot(cpu, aes(x = CPU, y = Value, fill = Name)) +
          geom_col(width = 0.7, colour = "grey20", linewidth = 0.2) +
          facet_wrap(vars(NodeLabel), ncol = 1) +
          scale_fill_manual(values = npm_palette(nlevels(cpu$Name), grey), name = "State") +
          scale_y_continuous(limits = c(0, 100), expand = expansion(mult = c(0, 0.02))) +
          labs(x = "CPU", y = "Utilisation [%]") + theme_npm,
        "CPU utilisation", section)
  }
  if (per_flow) {
    for (f in flows) {
      d <- act[Flow == f]
      if (nrow(d) == 0L) next
      series <- c("Sent by active node", "Received by passive node",
                  "Sent by passive node", "Received by active node")
      d[, Series := factor(paste(Action, "by", tolower(Node), "node"), levels = series)]
      u <- npm_auto_unit(d$BitRate, "bit/s")
      d[, BitRateS := BitRate * u$factor]
      pc <- npm_palette(2L, grey)
      add(ggplot(npm_steps(d, "BitRateS", "Series"),
                 aes(x = RelTime, y = BitRateS, colour = Series, linetype = Series,
                     group = Series)) +
            geom_path(linewidth = 0.6) +
            scale_colour_manual(values = setNames(pc[c(1, 1, 2, 2)], series), name = NULL,
                                drop = TRUE) +
            scale_linetype_manual(values = setNames(c("solid", "22", "solid", "22"), series),
                                  name = NULL, drop = TRUE) +
            expand_limits(y = 0) + labs(x = xl, y = sprintf("Bit rate [%s]", u$unit)) + theme_npm,
          "Bit rate", f)
      if (!is.null(fv) && nrow(fv[Flow == f])) {
        g <- fv[Flow == f]
        w <- npm_bin_width(g$RelTime)
        gb <- g[, .(Delay = mean(Delay), Jitter = mean(Jitter)),
                by = .(NodeLabel, RelTime = (floor(RelTime / w) + 0.5) * w)]
        long <- rbind(gb[, .(NodeLabel, RelTime, Metric = "One-way delay [ms]", Value = Delay)],
                      gb[, .(NodeLabel, RelTime, Metric = "Jitter [ms]", Value = Jitter)])
        long[, Metric := factor(Metric, levels = c("One-way delay [ms]", "Jitter [ms]"))]
        add(ggplot(long, aes(x = RelTime, y = Value, colour = NodeLabel)) +
              geom_line(linewidth = 0.6) +
              facet_grid(rows = vars(Metric), scales = "free_y") +
              scale_colour_manual(values = npm_palette(nlevels(long$NodeLabel), grey),
                                  name = NULL, drop = TRUE) +
              expand_limits(y = 0) +
              labs(x = xl, y = sprintf("Mean per %s", npm_time_label(w))) + theme_npm,
            "One-way delay and jitter", f)
      }
      pv <- run$paths
      if (!is.null(pv) && nrow(pv[Flow == f])) {
        p <- pv[Flow == f][order(NodeLabel, Path, RelTime)]
        # Throughput per path from the bytes it sent (TCP, MPTCP subflows and the MPTCP
        # connection's data level), between samples.
        p[, Throughput := c(NA_real_, diff(BytesSent) * 8 / diff(RelTime)) / 1e6,
          by = .(NodeLabel, Path)]
        long <- rbind(p[, .(NodeLabel, PathLabel, RelTime, Metric = "cwnd [kB]",
                            Value = Cwnd / 1000)],
                      p[, .(NodeLabel, PathLabel, RelTime, Metric = "SRTT [ms]", Value = RTT)],
                      p[, .(NodeLabel, PathLabel, RelTime, Metric = "Sent [Mbit/s]", Value = Throughput)])
        long <- long[is.finite(Value)]
        metrics <- c("cwnd [kB]", "SRTT [ms]", "Sent [Mbit/s]")
        long[, Metric := factor(Metric, levels = metrics[metrics %in% unique(Metric)])]
        labels <- unique(p$PathLabel)
        if (nrow(long))
          add(ggplot(long, aes(x = RelTime, y = Value, colour = PathLabel, group = PathLabel)) +
                geom_line(linewidth = 0.6) +
                facet_grid(rows = vars(Metric), cols = vars(NodeLabel), scales = "free_y") +
                scale_colour_manual(values = setNames(npm_palette(length(labels), grey), labels),
                                    name = NULL) +
                expand_limits(y = 0) + labs(x = xl, y = NULL) + theme_npm +
                guides(colour = guide_legend(ncol = 1)),
              "Per-path state", f)
      }
    }
  }
  if (length(out) == 0L) npm_stop("the run has no samples to plot (check the time range)")
  out
}

# ---- Output ------------------------------------------------------------------------------------

npm_slug <- function(s) {
  s <- iconv(s, "UTF-8", "ASCII//TRANSLIT", sub = "")
  s <- gsub("[^A-Za-z0-9]+", "-", s)
  s <- gsub("^-+|-+$", "", s)
  ifelse(s == "", "plot", tolower(s))
}

npm_format_from_name <- function(file, default = "pdf") {
  ext <- tolower(sub(".*\\.", "", basename(file)))
  if (grepl("\\.", basename(file)) && ext %in% c("pdf", "png", "svg")) ext else default
}

npm_open_device <- function(file, format, width, height, dpi, onefile = TRUE) {
  r <- tryCatch(switch(format,
           pdf = grDevices::cairo_pdf(file, width = width, height = height, onefile = onefile),
           png = grDevices::png(file, width = round(width * dpi), height = round(height * dpi),
                                res = dpi, type = "cairo"),
           svg = grDevices::svg(file, width = width, height = height),
           npm_stop("unknown format %s (use pdf, png or svg)", format)),
           npm_error = function(e) stop(e),
           error = function(e) npm_stop("cannot create %s: %s", file, conditionMessage(e)))
  invisible(r)
}

npm_print_quietly <- function(p) {
  withCallingHandlers(print(p), warning = function(w) invokeRestart("muffleWarning"),
                      message = function(m) invokeRestart("muffleMessage"))
}

# Write plots: a list of ggplots, or of list(plot, title, outline). PDF: one file,
# a page per plot, with bookmarks from the outlines. PNG/SVG (and PDF with
# onefile = FALSE): one file per plot, named <file without extension>-NN-<title>.<format>
# (the file itself if only one plot). Files appear only when all are complete.
# Returns the written file names.
npm_save_plots <- function(plots, file, format = npm_format_from_name(file), width = 10,
                           height = 6.5, dpi = 150, bookmarks = TRUE, onefile = TRUE) {
  if (inherits(plots, "ggplot")) plots <- list(plots)
  plots <- lapply(seq_along(plots), function(i) {
    p <- plots[[i]]
    if (inherits(p, "ggplot")) list(plot = p, title = sprintf("Plot %d", i), outline = NULL) else p
  })
  if (length(plots) == 0L) npm_stop("nothing to plot")
  for (v in c(width, height, dpi))
    if (!is.numeric(v) || is.na(v) || v <= 0) npm_stop("width, height and dpi must be positive")
  dir <- dirname(file)
  if (!dir.exists(dir)) npm_stop("output directory %s does not exist", dir)
  if (file.access(dir, 2L) != 0L) npm_stop("output directory %s is not writable", dir)
  if (format == "pdf" && onefile) {
    tmp <- tempfile(pattern = ".npmplot-", tmpdir = dir, fileext = ".pdf")
    on.exit(unlink(tmp), add = TRUE)
    npm_open_device(tmp, "pdf", width, height, dpi)
    dev <- grDevices::dev.cur()
    tryCatch(for (p in plots) npm_print_quietly(p$plot),
             finally = grDevices::dev.off(dev))
    if (bookmarks) {
      ol <- npm_outline_entries(plots)
      if (nrow(ol)) npm_pdf_add_outline(tmp, ol)
    }
    if (!file.rename(tmp, file)) npm_stop("cannot write %s", file)
    return(file)
  }
  stem <- sub(sprintf("\\.%s$", format), "", file, ignore.case = TRUE)
  names <- if (length(plots) == 1L) paste0(stem, ".", format)
           else sprintf("%s-%02d-%s.%s", stem, seq_along(plots),
                        npm_slug(vapply(plots, function(p) paste(p$outline %||% p$title, collapse = " "), "")),
                        format)
  # Draw all into temporary files first: either every file appears or none.
  tmps <- character(0)
  on.exit(unlink(tmps), add = TRUE)
  for (i in seq_along(plots)) {
    tmps[i] <- tempfile(pattern = ".npmplot-", tmpdir = dir, fileext = paste0(".", format))
    npm_open_device(tmps[i], format, width, height, dpi)
    dev <- grDevices::dev.cur()
    tryCatch(npm_print_quietly(plots[[i]]$plot), finally = grDevices::dev.off(dev))
  }
  for (i in seq_along(plots))
    if (!file.rename(tmps[i], names[i])) npm_stop("cannot write %s", names[i])
  names
}

npm_outline_entries <- function(plots) {
  rows <- list()
  last <- NULL
  for (i in seq_along(plots)) {
    o <- plots[[i]]$outline %||% plots[[i]]$title
    for (lv in seq_along(o)) {
      if (lv < length(o) && identical(last[seq_len(lv)], o[seq_len(lv)])) next
      rows[[length(rows) + 1L]] <- data.frame(title = o[lv], level = lv, page = i)
    }
    last <- o
  }
  if (length(rows)) do.call(rbind, rows) else data.frame(title = character(0), level = integer(0),
                                                          page = integer(0))
}

# ---- PDF bookmarks (incremental update of a classic-xref PDF) -----------------------------------

npm_pdf_text <- function(s) {
  r <- iconv(s, "UTF-8", "UTF-16BE", toRaw = TRUE)[[1]]
  if (is.null(r)) r <- iconv(s, "latin1", "UTF-16BE", toRaw = TRUE)[[1]]
  paste0("<FEFF", toupper(paste(as.character(r), collapse = "")), ">")
}

# Add an outline (bookmarks) to a PDF written by R's pdf()/cairo_pdf(): entries is a
# data.frame(title, level (1 = top), page (1-based)). Appends new objects, a new
# catalog and a cross-reference section (a standard incremental update).
npm_pdf_add_outline <- function(file, entries) {
  size <- file.info(file)$size
  raw <- readBin(file, "raw", size)
  raw[raw == as.raw(0)] <- as.raw(32)
  txt <- rawToChar(raw)
  Encoding(txt) <- "bytes"
  fail <- function(why) npm_stop("cannot add bookmarks to %s: %s", file, why)
  sx <- gregexpr("startxref[ \t\r\n]+([0-9]+)", txt, useBytes = TRUE)[[1]]
  if (sx[1] < 0) fail("no startxref")
  last <- sx[length(sx)]
  xref_off <- as.numeric(sub("startxref[ \t\r\n]+", "",
                             substr(txt, last, last + attr(sx, "match.length")[length(sx)] - 1L)))
  tr <- gregexpr("trailer", txt, useBytes = TRUE)[[1]]
  if (tr[1] < 0) fail("no classic trailer (cross-reference streams are not supported)")
  trailer <- substr(txt, tr[length(tr)], last - 1L)
  num <- function(re, s) {
    m <- regmatches(s, regexec(re, s, useBytes = TRUE))[[1]]
    if (length(m) < 2L) NA_real_ else as.numeric(m[2])
  }
  root <- num("/Root[ \r\n]+([0-9]+)[ \r\n]+[0-9]+[ \r\n]+R", trailer)
  info <- num("/Info[ \r\n]+([0-9]+)[ \r\n]+[0-9]+[ \r\n]+R", trailer)
  nobj <- num("/Size[ \r\n]+([0-9]+)", trailer)
  if (is.na(root) || is.na(nobj)) fail("trailer without /Root or /Size")
  # Cross-reference table(s): "xref" then subsections "first count" + 20-byte entries.
  offsets <- rep(NA_real_, nobj)
  pos <- xref_off + 1L
  if (substr(txt, pos, pos + 3L) != "xref") fail("startxref does not point at an xref table")
  rest <- substr(txt, pos + 4L, tr[length(tr)] - 1L)
  toks <- strsplit(trimws(rest), "[ \r\n]+")[[1]]
  k <- 1L
  while (k + 1L <= length(toks)) {
    first <- as.numeric(toks[k]); count <- as.numeric(toks[k + 1L]); k <- k + 2L
    for (j in seq_len(count)) {
      if (toks[k + 2L] == "n") offsets[first + j] <- as.numeric(toks[k])
      k <- k + 3L
    }
  }
  obj <- function(n) {
    off <- offsets[n + 1L]
    if (is.na(off)) fail(sprintf("object %d not in the xref table", n))
    s <- substr(txt, off + 1L, min(nchar(txt, type = "bytes"), off + 4096L))
    e <- regexpr("endobj", s, fixed = TRUE, useBytes = TRUE)
    if (e < 0) fail(sprintf("object %d has no endobj", n))
    s <- substr(s, 1L, e - 1L)
    sub("^[ \r\n]*[0-9]+[ \r\n]+[0-9]+[ \r\n]+obj", "", s, useBytes = TRUE)
  }
  catalog <- obj(root)
  pages_root <- num("/Pages[ \r\n]+([0-9]+)[ \r\n]+[0-9]+[ \r\n]+R", catalog)
  if (is.na(pages_root)) fail("catalog without /Pages")
  collect <- function(n, depth = 0L) {
    if (depth > 32L) fail("page tree too deep")
    o <- obj(n)
    if (!grepl("/Type[ \r\n]*/Pages", o, useBytes = TRUE)) return(n)
    kids <- regmatches(o, regexec("/Kids[ \r\n]*\\[([^]]*)\\]", o, useBytes = TRUE))[[1]][2]
    refs <- as.numeric(regmatches(kids, gregexpr("[0-9]+(?=[ \r\n]+[0-9]+[ \r\n]+R)", kids,
                                                 perl = TRUE, useBytes = TRUE))[[1]])
    unlist(lapply(refs, collect, depth = depth + 1L))
  }
  pages <- collect(pages_root)
  entries <- entries[entries$page >= 1 & entries$page <= length(pages), , drop = FALSE]
  if (nrow(entries) == 0L) return(invisible(FALSE))
  # Build the tree: an entry's parent is the closest previous entry of a lower level.
  m <- nrow(entries)
  outline_root <- nobj
  ids <- nobj + seq_len(m)
  parent <- rep(0L, m)
  for (i in seq_len(m)) {
    lv <- entries$level[i]
    j <- i - 1L
    while (j >= 1L && entries$level[j] >= lv) j <- j - 1L
    parent[i] <- j
  }
  kids_of <- function(p) which(parent == p)
  descendants <- function(i) { k <- kids_of(i); length(k) + sum(vapply(k, descendants, 0)) }
  ref <- function(i) if (i == 0L) sprintf("%d 0 R", outline_root) else sprintf("%d 0 R", ids[i])
  objs <- character(0)
  top <- kids_of(0L)
  objs[1] <- sprintf("%d 0 obj\n<< /Type /Outlines /First %s /Last %s /Count %d >>\nendobj\n",
                     outline_root, ref(top[1]), ref(top[length(top)]), m)
  for (i in seq_len(m)) {
    sib <- kids_of(parent[i])
    at <- match(i, sib)
    kids <- kids_of(i)
    d <- sprintf("/Title %s /Parent %s /Dest [%d 0 R /Fit]",
                 npm_pdf_text(entries$title[i]), ref(parent[i]), pages[entries$page[i]])
    if (at > 1L) d <- paste(d, "/Prev", ref(sib[at - 1L]))
    if (at < length(sib)) d <- paste(d, "/Next", ref(sib[at + 1L]))
    if (length(kids)) d <- paste(d, sprintf("/First %s /Last %s /Count %d", ref(kids[1]),
                                            ref(kids[length(kids)]), descendants(i)))
    objs[i + 1L] <- sprintf("%d 0 obj\n<< %s >>\nendobj\n", ids[i], d)
  }
  cat_body <- sub(">>[ \r\n]*$", "", trimws(catalog), useBytes = TRUE)
  cat_body <- gsub("/(Outlines[ \r\n]+[0-9]+[ \r\n]+[0-9]+[ \r\n]+R|PageMode[ \r\n]*/[A-Za-z]+)", "",
                   cat_body, useBytes = TRUE)
  objs <- c(objs, sprintf("%d 0 obj\n%s /Outlines %d 0 R /PageMode /UseOutlines >>\nendobj\n",
                          root, cat_body, outline_root))
  out <- "\n"
  obj_off <- numeric(length(objs))
  at <- size + nchar(out, type = "bytes")
  for (i in seq_along(objs)) {
    obj_off[i] <- at
    at <- at + nchar(objs[i], type = "bytes")
  }
  new_xref <- at
  entry <- function(off) sprintf("%010.0f 00000 n \n", off)
  xref <- paste0("xref\n", sprintf("%d 1\n", root), entry(obj_off[length(objs)]),
                 sprintf("%d %d\n", nobj, m + 1L),
                 paste(vapply(obj_off[seq_len(m + 1L)], entry, ""), collapse = ""))
  trailer_new <- sprintf("trailer\n<< /Size %d /Root %d 0 R%s /Prev %.0f >>\nstartxref\n%.0f\n%%%%EOF\n",
                         nobj + m + 1L, root,
                         if (is.na(info)) "" else sprintf(" /Info %d 0 R", info), xref_off, new_xref)
  con <- file(file, "ab")
  on.exit(close(con))
  writeBin(charToRaw(paste0(out, paste(objs, collapse = ""), xref, trailer_new)), con)
  invisible(TRUE)
}

# ---- Command-line helpers ------------------------------------------------------------------------

# Parse GNU-style arguments. spec: list of list(long, short = NA, value = FALSE,
# repeat = FALSE). --opt=value, --opt value, -o value, -ovalue, "--" ends options.
# Returns list(options = named list, positional = character()).
npm_parse_args <- function(args, spec) {
  opts <- list()
  pos <- character(0)
  longs <- vapply(spec, `[[`, "", "long")
  shorts <- vapply(spec, function(s) if (is.null(s$short)) NA_character_ else s$short, "")
  i <- 1L
  set <- function(s, v) {
    if (isTRUE(s$`repeat`)) opts[[s$long]] <<- c(opts[[s$long]], v) else opts[[s$long]] <<- v
  }
  while (i <= length(args)) {
    a <- args[i]; i <- i + 1L
    if (a == "--") { pos <- c(pos, args[seq_len(length(args) - i + 1L) + i - 1L]); break }
    if (startsWith(a, "--") || (startsWith(a, "-") && nchar(a) > 1L && !grepl("^-[0-9.]", a))) {
      if (startsWith(a, "--")) {
        body <- substring(a, 3L)
        name <- sub("=.*$", "", body)
        inline <- if (grepl("=", body, fixed = TRUE)) sub("^[^=]*=", "", body) else NA
        k <- match(name, longs)
        if (is.na(k)) {
          cand <- which(startsWith(longs, name))
          if (length(cand) == 1L) k <- cand
          else if (length(cand) > 1L)
            npm_stop("option --%s is ambiguous (%s); see --help", name,
                     paste0("--", longs[cand], collapse = ", "))
          else npm_stop("unknown option --%s; see --help", name)
        }
      } else {
        name <- substr(a, 2L, 2L)
        inline <- if (nchar(a) > 2L) substring(a, 3L) else NA
        k <- match(name, shorts)
        if (is.na(k)) npm_stop("unknown option -%s; see --help", name)
      }
      s <- spec[[k]]
      if (isTRUE(s$value)) {
        if (is.na(inline)) {
          if (i > length(args)) npm_stop("option --%s needs a value; see --help", s$long)
          inline <- args[i]; i <- i + 1L
        }
        set(s, inline)
      } else {
        if (!is.na(inline)) npm_stop("option --%s takes no value", s$long)
        set(s, TRUE)
      }
    } else {
      pos <- c(pos, a)
    }
  }
  list(options = opts, positional = pos)
}

npm_opt_number <- function(opts, name, default, min = -Inf, max = Inf, integer = FALSE) {
  v <- opts[[name]]
  if (is.null(v)) return(default)
  x <- suppressWarnings(as.numeric(v))
  if (is.na(x) || x < min || x > max || (integer && x != round(x)))
    npm_stop("--%s: %s is not a valid number%s", name, v,
             if (is.finite(min) && is.finite(max)) sprintf(" (%g to %g)", min, max) else "")
  x
}

# "A:B" with optional ends -> c(A, B) (NA for an open end).
npm_parse_range <- function(s, what) {
  p <- strsplit(s, ":", fixed = TRUE)[[1]]
  if (endsWith(s, ":")) p <- c(p, "")
  if (length(p) != 2L) npm_stop("%s %s is not FROM:TO", what, s)
  v <- suppressWarnings(as.numeric(p))
  if (any(is.na(v) & p != "")) npm_stop("%s %s is not FROM:TO with numbers", what, s)
  if (!any(is.na(v)) && v[1] >= v[2]) npm_stop("%s %s is empty (FROM must be below TO)", what, s)
  v
}

# Run a program's main function: user errors -> one line on stderr, exit 1.
npm_run_main <- function(program, main) {
  status <- tryCatch(
    withCallingHandlers(
      { main(); 0L },
      warning = function(w) {
        if (inherits(w, "npm_warning"))
          cat(program, ": warning: ", conditionMessage(w), "\n", sep = "", file = stderr())
        invokeRestart("muffleWarning")
      }),
    npm_error = function(e) {
      cat(program, ": ", conditionMessage(e), "\n", sep = "", file = stderr())
      1L
    },
    error = function(e) {
      msg <- gsub("[\r\n]+", " ", conditionMessage(e))
      cat(program, ": internal error: ", msg, "\n", sep = "", file = stderr())
      2L
    })
  quit(save = "no", status = status)
}
