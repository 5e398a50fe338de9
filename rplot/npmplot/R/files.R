# Opening result files: plain, gzip, bzip2 or xz, told apart by their content (netperfmeter
# writes .bz2 and .gz; a name may also lack the suffix).
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

# How much text one input may hold, after decompression: a compressed file of a few hundred
# bytes can unpack to gigabytes (300 MB of zeros are 242 bytes of bzip2), which a reader must
# not take whole. Text files read into memory (config, scalar and table files) may hold
# 64 MiB, vector files (decompressed into a temporary file that fread() maps) 4 GiB, unless
# options(npmplot.max_input_size) or the environment variable NPM_RPLOT_MAX_INPUT_SIZE
# (the programs' --max-input-size) set one bound for every input: bytes, or a number with
# k, M, G, T (powers of 1000) or Ki, Mi, Gi, Ti (of 1024), optionally followed by B.
npm_max_input_default <- c(text = 64 * 1024^2, vector = 4 * 1024^3)

npm_parse_size <- function(s, what = "size") {
  m <- regmatches(s, regexec("^[ \t]*([0-9]+(\\.[0-9]*)?)[ \t]*(k|K|M|G|T|Ki|Mi|Gi|Ti)?B?[ \t]*$", s))[[1]]
  if (length(m) == 0L)
    npm_stop("%s %s is not a size (bytes, or a number with k, M, G, T, Ki, Mi, Gi or Ti)", what, s)
  v <- as.numeric(m[2]) * if (m[4] == "") 1 else npm_prefixes[[m[4]]]
  if (!is.finite(v) || v < 1) npm_stop("%s %s is not a size of at least one byte", what, s)
  v
}

npm_format_size <- function(bytes) {
  for (k in 4:1) {
    if (bytes %% 1024^k == 0) return(sprintf("%.0f %s", bytes / 1024^k, c("KiB", "MiB", "GiB", "TiB")[k]))
    if (bytes %% 1000^k == 0) return(sprintf("%.0f %s", bytes / 1000^k, c("kB", "MB", "GB", "TB")[k]))
  }
  sprintf("%.0f bytes", bytes)
}

# The bound for an input of the kind "text" or "vector", and where it comes from.
npm_max_input_size <- function(kind) {
  set <- getOption("npmplot.max_input_size")
  if (!is.null(set)) return(list(bytes = npm_parse_size(as.character(set), "npmplot.max_input_size"),
                                 from = "--max-input-size"))
  env <- Sys.getenv("NPM_RPLOT_MAX_INPUT_SIZE")
  if (nzchar(env)) return(list(bytes = npm_parse_size(env, "NPM_RPLOT_MAX_INPUT_SIZE"),
                               from = "NPM_RPLOT_MAX_INPUT_SIZE"))
  list(bytes = npm_max_input_default[[kind]], from = "default")
}

npm_too_large <- function(path, what, kind, bound, compressed) {
  npm_stop("%s %s %s more than %s, the bound for %s (%s; raise it with --max-input-size or NPM_RPLOT_MAX_INPUT_SIZE)",
           what, path, if (compressed) "decompresses to" else "holds", npm_format_size(bound$bytes),
           if (bound$from == "default") c(text = "config, scalar and table files", vector = "vector files")[[kind]]
           else "every input",
           if (bound$from == "default") "the default" else paste("set by", bound$from))
}

# Decompress (or copy) `path` in chunks, handing each to `sink`, and stop as soon as the text
# exceeds the bound of its kind. Returns the number of bytes handed over. A compressed file
# that is cut short or corrupt is an error naming it.
npm_stream_input <- function(path, what, kind, sink) {
  npm_check_readable(path, what)
  bound <- npm_max_input_size(kind)
  compression <- npm_compression(path)
  if (compression == "none" && isTRUE(file.info(path)$size > bound$bytes))
    npm_too_large(path, what, kind, bound, FALSE)
  inp <- tryCatch(switch(compression, gzip = gzfile(path, "rb"), bzip2 = bzfile(path, "rb"),
                         xz = xzfile(path, "rb"), none = file(path, "rb")),
                  error = function(e) npm_stop("cannot open %s %s: %s", what, path, conditionMessage(e)))
  on.exit(close(inp))
  total <- 0
  problem <- tryCatch({
    repeat {
      chunk <- readBin(inp, "raw", 4194304L)
      if (length(chunk) == 0L) break
      total <- total + length(chunk)
      if (total > bound$bytes) return(npm_too_large(path, what, kind, bound, compression != "none"))
      sink(chunk)
    }
    NULL
  }, error = function(e) if (inherits(e, "npm_error")) stop(e) else conditionMessage(e),
     warning = function(w) conditionMessage(w))
  if (!is.null(problem))
    npm_stop("cannot read %s %s: %s (a truncated or corrupt compressed file?)", what, path, problem)
  total
}

# The lines of a text file (config, scalar file, summary table; plain or compressed), read
# whole within the bound of text inputs. A file with NUL bytes is not text, compressed text
# that ends within a line was cut short.
npm_read_lines <- function(path, what = "file") {
  chunks <- list()
  total <- npm_stream_input(path, what, "text", function(chunk) chunks[[length(chunks) + 1L]] <<- chunk)
  if (total == 0) return(character(0))
  bytes <- unlist(chunks, use.names = FALSE)
  rm(chunks)
  nul <- which(bytes == as.raw(0L))
  if (length(nul))
    npm_stop("%s %s is not a text file: it holds NUL bytes (the first at byte %.0f)", what, path, nul[1])
  # The writers end every line; compressed text that stops within one was cut short (gzip
  # and xz give what they could decompress of a truncated file).
  if (bytes[length(bytes)] != as.raw(10L) && npm_compression(path) != "none")
    npm_stop("%s %s ends within a line (a truncated compressed file?)", what, path)
  text <- rawToChar(bytes)
  rm(bytes)
  lines <- strsplit(text, "\r?\n")[[1]]
  Encoding(lines) <- "UTF-8"
  lines
}

# Why a file gave no lines: really empty, or compressed data that is cut short.
npm_empty_reason <- function(path) {
  if (isTRUE(file.info(path)$size > 0))
    "gives no text (a truncated or corrupt compressed file?)"
  else "is empty"
}

# The compression of a file from its first bytes: "gzip", "bzip2", "xz" or "none".
npm_compression <- function(path) {
  magic <- readBin(path, "raw", 6L)
  starts <- function(bytes) {
    length(magic) >= length(bytes) && identical(magic[seq_along(bytes)], as.raw(bytes))
  }
  if (starts(c(0x1f, 0x8b))) "gzip"
  else if (starts(c(0x42, 0x5a, 0x68))) "bzip2"                  # "BZh"
  else if (starts(c(0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00))) "xz"
  else "none"
}

# The name of a file that fread() can map: the file itself when it is plain, else a
# decompressed copy in tempdir() that the caller removes (see npm_plain_done()), within the
# bound of vector inputs. fread() would decompress .gz and .bz2 itself only through the
# R.utils package, by the name's suffix and in the same single-threaded way (R's
# connections); this needs neither.
npm_plain_file <- function(path, what = "file") {
  npm_check_readable(path, what)
  if (npm_compression(path) == "none") {
    if (isTRUE(file.info(path)$size == 0)) npm_stop("%s %s is empty", what, path)
    bound <- npm_max_input_size("vector")
    if (isTRUE(file.info(path)$size > bound$bytes)) npm_too_large(path, what, "vector", bound, FALSE)
    return(path)
  }
  tmp <- tempfile("npmplot-", fileext = ".txt")
  out <- file(tmp, "wb")
  first <- TRUE
  sink <- function(chunk) {
    # What cannot start a vector file is refused at its first chunk, not after gigabytes.
    if (first) npm_check_vector_start(chunk, path, what, complete = FALSE)
    first <<- FALSE
    writeBin(chunk, out)
  }
  written <- tryCatch(npm_stream_input(path, what, "vector", sink),
                      error = function(e) {
                        close(out)
                        unlink(tmp)
                        stop(e)
                      })
  close(out)
  if (written == 0) {
    unlink(tmp)
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
# when there is none) and the number of lines before that one. Both must lie in the first MiB:
# a longer line is no vector row (and would otherwise be read whole, however long).
npm_vector_start_bytes <- 1048576L

# Checks the first bytes of a vector file (up to 1 MiB; `complete`: they are the whole file):
# text, and a first line that ends within them.
npm_check_vector_start <- function(head, path, what, complete) {
  head <- head[seq_len(min(length(head), npm_vector_start_bytes))]
  if (any(head == as.raw(0L)))
    npm_stop("%s %s is not a text file: it holds NUL bytes", what, path)
  if (!complete && length(head) == npm_vector_start_bytes && !any(head == as.raw(10L)))
    npm_stop("%s %s: its first line is longer than 1 MiB; not a %s", what, path, what)
  invisible(head)
}

npm_vector_start <- function(plain, path, what) {
  head <- readBin(plain, "raw", npm_vector_start_bytes)
  if (length(head) == 0L) npm_stop("%s %s %s", what, path, npm_empty_reason(path))
  complete <- length(head) < npm_vector_start_bytes || isTRUE(file.info(plain)$size == length(head))
  npm_check_vector_start(head, path, what, complete)
  lines <- strsplit(rawToChar(head), "\n", fixed = TRUE)[[1]]
  if (!complete && head[length(head)] != as.raw(10L))
    lines <- lines[-length(lines)]                         # cut off by the first MiB
  lines <- sub("\r$", "", lines)
  Encoding(lines) <- "UTF-8"
  data <- which(grepl("[^ \t\r]", lines) & seq_along(lines) > 1L)
  if (length(data)) return(list(header = lines[1], first = lines[data[1]], skip = data[1] - 1L))
  if (!complete) npm_stop("%s %s has no data row in its first MiB; not a %s", what, path, what)
  list(header = lines[1], first = NULL, skip = length(lines))
}

# fread(), with its warnings collected instead of raised: a warning unwound out of fread()
# would leave its state behind for the next call. Returns list(data, warnings); an error
# becomes list(NULL, message).
npm_fread_quietly <- function(...) {
  warnings <- character(0)
  data <- tryCatch(withCallingHandlers(fread(...), warning = function(w) {
    warnings <<- c(warnings, conditionMessage(w))
    invokeRestart("muffleWarning")
  }), error = function(e) {
    warnings <<- c(warnings, conditionMessage(e))
    NULL
  })
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
