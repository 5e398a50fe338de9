# Units, unit conversions and label markup (plotmath).
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

# Choose a decimal prefix for values of a quantity; returns list(factor, unit).
npm_auto_unit <- function(values, unit) {
  m <- suppressWarnings(max(abs(values), na.rm = TRUE))
  if (!is.finite(m)) m <- 0
  p <- if (m >= 1e9) list(1e-9, "G") else if (m >= 1e6) list(1e-6, "M")
       else if (m >= 1e3) list(1e-3, "k") else list(1, "")
  list(factor = p[[1]], unit = paste0(p[[2]], unit))
}

npm_units <- c("bit" = 1, "b" = 1, "byte" = 8, "B" = 8, "Byte" = 8, "s" = 1, "ms" = 1e-3,
               "us" = 1e-6, "\u00b5s" = 1e-6, "frame" = 1, "packet" = 1, "frames" = 1, "packets" = 1)
npm_prefixes <- c(k = 1e3, K = 1e3, M = 1e6, G = 1e9, T = 1e12, Ki = 1024, Mi = 1024^2,
                  Gi = 1024^3, Ti = 1024^4)

# Value of one unit in base units: "Mbit/s", "KiB/s", "byte", "ms".
npm_unit_value <- function(u) {
  parts <- strsplit(trimws(u), "/", fixed = TRUE)[[1]]
  if (length(parts) < 1L || length(parts) > 2L || any(parts == "")) npm_stop("unknown unit %s", u)
  one <- function(p) {
    if (!is.na(npm_units[p])) return(npm_units[[p]])
    for (pre in names(npm_prefixes)[order(-nchar(names(npm_prefixes)))]) {
      if (startsWith(p, pre)) {
        rest <- substring(p, nchar(pre) + 1L)
        if (!is.na(npm_units[rest])) return(npm_prefixes[[pre]] * npm_units[[rest]])
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

npm_greek <- c("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota",
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
  atoms <- list()                       # each a list of type ("text" or "expr") and v
  add_text <- function(t) {
    k <- length(atoms)
    if (k && atoms[[k]]$type == "text") atoms[[k]]$v <<- paste0(atoms[[k]]$v, t)
    else atoms[[k + 1L]] <<- list(type = "text", v = t)
  }
  read_arg <- function(i) {             # argument of _ or ^ starting at ch[i]
    if (i > n) return(list(text = "", next_i = i))
    if (ch[i] == "{") {
      depth <- 1L
      j <- i + 1L
      while (j <= n) {
        if (ch[j] == "\\" && j < n) {
          j <- j + 2L
          next
        }
        if (ch[j] == "{") depth <- depth + 1L
        if (ch[j] == "}") {
          depth <- depth - 1L
          if (depth == 0L) break
        }
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
      if (length(word) && word %in% npm_greek) {
        atoms[[length(atoms) + 1L]] <- list(type = "expr", v = word)
        i <- i + 1L + nchar(word)
        next
      }
      if (ch[i + 1L] %in% c("_", "^", "\\", "{", "}")) {
        add_text(ch[i + 1L])
        i <- i + 2L
        next
      }
      add_text(c)
      i <- i + 1L
      next
    }
    if (c %in% c("_", "^")) {
      arg <- read_arg(i + 1L)
      sub <- npm_markup_to_plotmath(arg$text)
      k <- length(atoms)
      base <- "\"\""
      if (k && atoms[[k]]$type == "expr") {
        base <- atoms[[k]]$v
        atoms[[k]] <- NULL
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
      i <- arg$next_i
      next
    }
    add_text(c)
    i <- i + 1L
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

# The quantity and unit of a createsummary column, from its name "<object>-<Statistic>"
# (the scalar's name without blanks, e.g. active.flow-ReceivedBitRate, passive.totalCPU-User,
# active.flow.path-MeanCwnd). list(label = "Received bit rate (active.flow)", unit = "bit/s");
# unit NA where the scalar has none (counts of packets, frames, retransmissions); NULL for a
# column that is not such a metric (a parameter of the study).
npm_metric <- function(column) {
  m <- regmatches(column, regexec("^([A-Za-z][A-Za-z0-9_.]*)-([A-Za-z][A-Za-z0-9:-]*)$", column))[[1]]
  if (length(m) != 3L) return(NULL)
  object <- m[2]
  stat <- m[3]
  last <- sub("^.*\\.", "", object)
  unit <- if (last %in% c("CPU", "totalCPU")) "%"
    else if (grepl("BitRate$", stat)) "bit/s"
    else if (grepl("ByteRate$", stat)) "B/s"
    else if (grepl("PacketRate$", stat)) "packets/s"
    else if (grepl("FrameRate$", stat)) "frames/s"
    else if (grepl("Bytes$|^Bytes[A-Z]|^Mean(Cwnd|Rwnd)$", stat)) "B"
    else if (grepl("^(First|Last)[A-Z]", stat)) "\u00b5s"   # time stamps, microseconds since 1970
    else if (grepl("^(Jitter|MeanDelay|MeanRTT)$", stat)) "ms"
    else if (grepl("(Packets|Frames|Retransmissions|Chunks|Acks|Samples|Unacked|Pending)$", stat)) NA_character_
    else return(NULL)
  words <- gsub("([a-z0-9])([A-Z])", "\\1 \\2", stat)
  words <- gsub("([A-Z]+)([A-Z][a-z])", "\\1 \\2", words)
  words <- paste0(substr(words, 1L, 1L), vapply(substring(words, 2L), function(w) {
    gsub("\\b([A-Z])([a-z])", "\\L\\1\\E\\2", w, perl = TRUE)
  }, ""))
  list(label = sprintf("%s (%s)", words, object), unit = unit)
}

# The axis title of a column: the metric and its unit (the unit converted to, after a unit
# conversion "FROM:TO"; "<1/scale> <unit>" after a bare scale factor), else the column's name
# (with the unit converted to, if any).
npm_axis_label <- function(column, scale = 1, conversion = NULL) {
  m <- npm_metric(column)
  to <- if (!is.null(conversion)) trimws(strsplit(conversion, "->|:")[[1]][2])
  if (!is.null(m) && !is.na(m$unit) && !is.null(conversion)) {
    from <- trimws(strsplit(conversion, "->|:")[[1]][1])
    ok <- tryCatch(isTRUE(all.equal(npm_unit_value(from), npm_unit_value(m$unit))),
                   npm_error = function(e) FALSE)
    if (!ok) npm_warn("column %s is in %s, but the unit conversion %s starts from %s",
                      column, m$unit, conversion, from)
  }
  base <- if (is.null(m)) column else m$label
  unit <- if (!is.null(to)) to
          else if (is.null(m) || is.na(m$unit)) NULL
          else if (isTRUE(all.equal(scale, 1))) m$unit
          else sprintf("%g %s", 1 / scale, m$unit)
  if (is.null(unit)) base else sprintf("%s [%s]", base, unit)
}
