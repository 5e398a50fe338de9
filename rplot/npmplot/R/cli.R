# Command-line helpers of the programs.
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

# Parse arguments as GNU getopt_long_only does, like netperfmeter and the reference's tools:
# a long option takes one dash or two (-version, --version), is named exactly or by an
# unambiguous abbreviation, with its value after "=" or as the next word; a single dash and
# one letter that is a short option is that option (-o FILE); a single-dash word that names
# no long option is short options: one with its value attached (-oFILE) or flags bundled
# (-qn). "--" ends the options. spec: list of list(long, short = NA, value = FALSE,
# repeat = FALSE, same = NA); `same` names the option an entry is another spelling of (gray for
# grey), which is where its value is stored, and keeps the two from making an abbreviation
# ambiguous. Returns list(options = named list, positional = character()).
npm_parse_args <- function(args, spec) {
  opts <- list()
  pos <- character(0)
  longs <- vapply(spec, `[[`, "", "long")
  shorts <- vapply(spec, function(s) if (is.null(s$short)) NA_character_ else s$short, "")
  canonical <- vapply(spec, function(s) if (is.null(s$same)) s$long else s$same, "")
  set <- function(s, v) {
    key <- if (is.null(s$same)) s$long else s$same
    if (isTRUE(s$`repeat`)) opts[[key]] <<- c(opts[[key]], v) else opts[[key]] <<- v
  }
  # The long option `name` abbreviates: its index, NA for none, or an error when several fit.
  find_long <- function(name, word) {
    k <- match(name, longs)
    if (!is.na(k) || name == "") return(k)
    cand <- which(startsWith(longs, name))
    cand <- cand[!duplicated(canonical[cand])]
    if (length(cand) > 1L)
      npm_stop("option %s is ambiguous (%s); see --help", word,
               paste0("--", longs[cand], collapse = ", "))
    if (length(cand) == 1L) cand else NA_integer_
  }
  i <- 1L
  while (i <= length(args)) {
    a <- args[i]
    i <- i + 1L
    if (a == "--") {
      pos <- c(pos, args[seq_len(length(args) - i + 1L) + i - 1L])
      break
    }
    if (!startsWith(a, "-") || nchar(a) < 2L || grepl("^-[0-9.]", a)) {
      pos <- c(pos, a)
      next
    }
    double <- startsWith(a, "--")
    body <- substring(a, if (double) 3L else 2L)
    has_value <- grepl("=", body, fixed = TRUE)
    name <- sub("=.*$", "", body)
    inline <- if (has_value) sub("^[^=]*=", "", body) else NA_character_
    one_letter <- !double && !has_value && nchar(body) == 1L && body %in% shorts
    k <- if (one_letter) NA_integer_ else find_long(name, a)
    if (is.na(k) && !double && !has_value) {
      k <- match(substr(body, 1L, 1L), shorts)
      if (is.na(k)) npm_stop("unknown option %s; see --help", a)
      if (nchar(body) > 1L) {
        if (isTRUE(spec[[k]]$value)) {
          inline <- substring(body, 2L)
        } else {
          flags <- match(strsplit(body, "", fixed = TRUE)[[1]], shorts)
          if (anyNA(flags) || any(vapply(spec[flags], function(s) isTRUE(s$value), TRUE)))
            npm_stop("unknown option %s; see --help", a)
          for (f in flags) set(spec[[f]], TRUE)
          next
        }
      }
    }
    if (is.na(k)) npm_stop("unknown option %s; see --help", a)
    s <- spec[[k]]
    if (isTRUE(s$value)) {
      if (is.na(inline)) {
        if (i > length(args)) npm_stop("option %s needs a value; see --help", a)
        inline <- args[i]
        i <- i + 1L
      }
      set(s, inline)
    } else {
      if (!is.na(inline)) npm_stop("option %s takes no value", a)
      set(s, TRUE)
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
      {
        main()
        0L
      },
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
