# Opening result files: plain, gzip, bzip2 or xz, told apart by their content (netperfmeter
# writes .bz2 and .gz; a name may also lack the suffix).
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

# Open a text file for reading (the line-based formats: config, scalar, summary table);
# R's file() detects gzip, bzip2 and xz from the content.
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

# The compression of a file from its first bytes: "gzip", "bzip2", "xz" or "none".
npm_compression <- function(path) {
  magic <- readBin(path, "raw", 6L)
  starts <- function(bytes) length(magic) >= length(bytes) &&
    identical(magic[seq_along(bytes)], as.raw(bytes))
  if (starts(c(0x1f, 0x8b))) "gzip"
  else if (starts(c(0x42, 0x5a, 0x68))) "bzip2"                  # "BZh"
  else if (starts(c(0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00))) "xz"
  else "none"
}

# The name of a file that fread() can map: the file itself when it is plain, else a
# decompressed copy in tempdir() that the caller removes (see npm_plain_done()).
# fread() would decompress .gz and .bz2 itself only through the R.utils package, by the
# name's suffix and in the same single-threaded way (R's connections); this needs neither.
npm_plain_file <- function(path, what = "file") {
  npm_check_readable(path, what)
  kind <- npm_compression(path)
  if (kind == "none") {
    if (isTRUE(file.info(path)$size == 0)) npm_stop("%s %s is empty", what, path)
    return(path)
  }
  tmp <- tempfile("npmplot-", fileext = ".txt")
  inp <- switch(kind, gzip = gzfile(path, "rb"), bzip2 = bzfile(path, "rb"), xz = xzfile(path, "rb"))
  out <- file(tmp, "wb")
  written <- 0
  problem <- tryCatch({
    repeat {
      chunk <- readBin(inp, "raw", 4194304L)
      if (length(chunk) == 0L) break
      writeBin(chunk, out)
      written <- written + length(chunk)
    }
    NULL
  }, error = function(e) conditionMessage(e), warning = function(w) conditionMessage(w))
  close(inp)
  close(out)
  if (!is.null(problem) || written == 0) {
    unlink(tmp)
    if (!is.null(problem))
      npm_stop("cannot read %s %s: %s (a truncated or corrupt compressed file?)", what, path, problem)
    npm_stop("%s %s %s", what, path, npm_empty_reason(path))
  }
  tmp
}

# Remove the decompressed copy npm_plain_file() made of path (nothing for a plain file).
npm_plain_done <- function(plain, path) {
  if (!identical(plain, path)) unlink(plain)
  invisible(NULL)
}

# The start of a vector file: its header line, the first data line that is not blank (NULL
# when there is none) and the number of lines before that one.
npm_vector_start <- function(plain, path, what) {
  con <- file(plain, open = "rt")
  on.exit(close(con))
  read1 <- function() tryCatch(readLines(con, n = 1L, warn = FALSE, encoding = "UTF-8"),
    error = function(e) npm_stop("cannot read %s %s: %s", what, path, conditionMessage(e)),
    warning = function(w) npm_stop("cannot read %s %s: %s", what, path, conditionMessage(w)))
  header <- read1()
  if (length(header) == 0L) npm_stop("%s %s %s", what, path, npm_empty_reason(path))
  skip <- 1L
  repeat {
    line <- read1()
    if (length(line) == 0L) return(list(header = header, first = NULL, skip = skip))
    if (grepl("[^ \t\r]", line)) return(list(header = header, first = line, skip = skip))
    skip <- skip + 1L
  }
}

# fread(), with its warnings collected instead of raised: a warning unwound out of fread()
# would leave its state behind for the next call. Returns list(data, warnings); an error
# becomes list(NULL, message).
npm_fread_quietly <- function(...) {
  warnings <- character(0)
  data <- tryCatch(withCallingHandlers(fread(...), warning = function(w) {
    warnings <<- c(warnings, conditionMessage(w))
    invokeRestart("muffleWarning")
  }), error = function(e) { warnings <<- c(warnings, conditionMessage(e)); NULL })
  list(data = data, warnings = warnings)
}

# fread() of the data lines of a vector file (after `skip` lines), numbers as doubles; any
# complaint of fread (a short or long row, a row cut off) is an npm_error naming the file.
npm_fread <- function(plain, path, what, skip, ...) {
  r <- npm_fread_quietly(file = plain, skip = skip, header = FALSE, integer64 = "double",
                         blank.lines.skip = TRUE, showProgress = FALSE, encoding = "UTF-8", ...)
  if (length(r$warnings) || is.null(r$data))
    npm_stop("%s %s is truncated or malformed: %s", what, path, r$warnings[1])
  r$data
}
