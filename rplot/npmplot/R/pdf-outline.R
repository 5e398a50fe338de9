# PDF bookmarks (an incremental update of a classic-xref PDF).
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

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
    first <- as.numeric(toks[k])
    count <- as.numeric(toks[k + 1L])
    k <- k + 2L
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
  descendants <- function(i) {
    k <- kids_of(i)
    length(k) + sum(vapply(k, descendants, 0))
  }
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
