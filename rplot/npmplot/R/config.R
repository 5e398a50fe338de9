# Config files: KEY="value" lines parsed as data, never executed; the flows they describe.
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

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
        out <- c(out, ch[i + 1L])
        i <- i + 2L
        next
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
        i <- i + 2L
        next
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
    if (key %in% keys) {
      values[match(key, keys)] <- r$value
    } else {
      keys <- c(keys, key)
      values <- c(values, r$value)
    }
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
