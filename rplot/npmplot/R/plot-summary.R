# The parameter-study figure: means and confidence intervals over repetitions.
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

# Plot means and confidence intervals of y over x, one curve per colour/linetype group, facets
# by rows/cols. ci: "t" (t.test()'s), "bca" (bootstrap BCa of the mean, as netperfmeter-lab;
# resamples, seed, min_runs), "given" (the table's ci_low/ci_high or Lower/Upper columns, see
# npm_given_columns()) or "none"; a point without an interval (a single run, fewer than
# min_runs, no spread, none given) has no bar, and the caption says how many and why. Labels
# may use markup (see npm_markup_to_plotmath); value_labels is a list column ->
# c(value = "label") for legend entries and strips. x_unit/y_unit
# ("bit/s:Mbit/s") convert units on top of x_scale/y_scale. The axis titles are xlab/ylab,
# else the metric a column holds with its unit (the converted one), else the column's name.
# Returns a ggplot with the summarised data in attr(p, "summary").
npm_plot_summary <- function(data, x, y, colour = NULL, linetype = NULL,
                             facet_rows = NULL, facet_cols = NULL, filter = NULL,
                             level = 0.95, x_scale = 1, y_scale = 1,
                             xlab = NULL, ylab = NULL, colour_title = NULL,
                             linetype_title = NULL, title = NULL, value_labels = list(),
                             grey = FALSE, points = TRUE, base_size = 12,
                             legend_position = "bottom", x_limits = NULL, y_limits = NULL,
                             x_log = FALSE, y_log = FALSE, runs = FALSE, reference = NULL,
                             caption = NULL, x_unit = NULL, y_unit = NULL, ci = "t",
                             min_runs = NULL, resamples = NPM_BCA_RESAMPLES, seed = 1L) {
  data <- as.data.table(data)
  if (!is.null(x_unit)) x_scale <- x_scale * npm_parse_unit_conversion(x_unit)
  if (!is.null(y_unit)) y_scale <- y_scale * npm_parse_unit_conversion(y_unit)
  nz <- function(v) if (is.null(v) || length(v) == 0L || is.na(v[1]) || v[1] == "") NULL else v[1]
  colour <- nz(colour)
  linetype <- nz(linetype)
  facet_rows <- nz(facet_rows)
  facet_cols <- nz(facet_cols)
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
  agg <- setdiff(names(data)[vapply(names(data), function(c) {
    startsWith(y, paste0(c, "-")) || startsWith(y, paste0(c, "."))
  }, TRUE)], c(groups, y))
  for (a in agg) {
    if (any(data[, uniqueN(.SD[[1L]]), by = groups, .SDcols = a]$V1 > 1L))
      npm_warn("points average over several values of %s; filter (-F '`%s` == 0') or map it",
               a, a)
  }

  given <- if (identical(ci, "given")) npm_given_columns(data, c(y, groups))
  s <- npm_summarise(data, y, groups, level, ci, min_runs, resamples, seed, given)
  for (v in c("Mean", "SD", "Lower", "Upper")) set(s, j = v, value = s[[v]] * y_scale)
  xnum <- is.numeric(s[[x]])
  # Categories in the order the table first names them (a study's sweep order), not sorted:
  # "none", "50", "100" stays so, where sorting would put "none" last.
  s[, .x := if (xnum) get(x) * x_scale
            else factor(get(x), levels = intersect(unique(as.character(data[[x]])), as.character(get(x))))]

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
  if (!is.null(colour)) {
    line_aes$colour <- quote(.col)
    point_aes$colour <- quote(.col)
    point_aes$shape <- quote(.col)
  }
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
  with_ci <- s[!is.na(Lower)]
  if (nrow(with_ci)) {
    xr <- if (xnum) diff(range(s$.x, na.rm = TRUE)) else 1
    w <- if (xnum) (if (xr > 0) xr / 50 else 0.1) else 0.25
    eb_aes <- aes(ymin = Lower, ymax = Upper)
    if (!is.null(colour)) eb_aes$colour <- quote(.col)
    p <- p + geom_errorbar(eb_aes, data = with_ci, width = w, linewidth = 0.5, linetype = "solid",
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
             scale_shape_manual(values = setNames(npm_rep_len(npm_shapes, length(lv)), lv),
                                labels = labs_c, name = ctitle, drop = FALSE)
  }
  if (!is.null(lt_col)) {
    lv2 <- levels(s$.lt)
    p <- p + scale_linetype_manual(values = setNames(npm_rep_len(npm_linetypes, length(lv2)), lv2),
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
  p <- p + labs(x = npm_label(xlab %||% npm_axis_label(x, x_scale, x_unit)),
                y = npm_label(ylab %||% npm_axis_label(y, y_scale, y_unit)),
                title = npm_label(title),
                # plain text (no markup: it names columns like failed_attempts), wrapped to the page
                caption = npm_caption(c(caption, npm_interval_note(s, ci, level, resamples, given)))) +
    npm_theme(base_size, legend_position) +
    theme(plot.caption = element_text(hjust = 0), plot.caption.position = "plot")
  if (length(grp_cols) == 0L || (is.null(colour) && is.null(lt_col))) {
    p <- p + theme(legend.position = "none")
  } else if (identical(legend_position, "bottom") || identical(legend_position, "top")) {
    # A legend under or above the plot is one row: at most three entries to a row, so that five
    # variants with names like "nrsack+split+smartfr" stay on a 7-inch page. The scales that
    # share the legend get the same layout, or ggplot2 draws them apart.
    per_row <- 3L
    wrap <- function(n) guide_legend(nrow = ceiling(n / per_row), byrow = TRUE)
    n_col <- if (!is.null(colour)) length(levels(s$.col)) else 0L
    if (n_col > per_row) p <- p + guides(colour = wrap(n_col), shape = wrap(n_col))
    n_lt <- if (!is.null(lt_col)) length(levels(s$.lt)) else 0L
    if (n_lt > per_row) p <- p + guides(linetype = wrap(n_lt))
  }
  if (x_log) p <- p + scale_x_log10()
  if (y_log) p <- p + scale_y_log10()
  if (!is.null(x_limits) || !is.null(y_limits))
    p <- p + coord_cartesian(xlim = x_limits, ylim = y_limits)
  attr(p, "summary") <- s[, !c(".x", ".grp", intersect(names(s), c(".col", ".lt"))), with = FALSE]
  p
}

# Caption paragraphs as plain text, each wrapped at 100 characters; NULL when there are none.
npm_caption <- function(parts) {
  parts <- parts[!is.na(parts) & nzchar(parts)]
  if (length(parts) == 0L) return(NULL)
  paste(vapply(parts, function(t) paste(strwrap(t, width = 100), collapse = "\n"), ""), collapse = "\n")
}
