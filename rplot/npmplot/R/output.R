# Writing figures: PDF (pages with bookmarks), PNG and SVG, all or nothing.
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

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
