# Command-line helpers of the programs.
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

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

# The version of the package, which is the project's ("2.1.0").
npm_version <- function() unname(getNamespaceVersion("npmplot"))

# Text files are UTF-8: work in a UTF-8 character type even when started in the C locale.
npm_use_utf8 <- function() {
  if (!isTRUE(l10n_info()[["UTF-8"]])) invisible(Sys.setlocale("LC_CTYPE", "C.UTF-8"))
  invisible(NULL)
}

# Run a program's main function: user errors -> one line on stderr, exit 1; internal
# errors -> one line, exit 2. Ends the R session with that status.
npm_run_main <- function(program, main) {
  npm_use_utf8()
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
