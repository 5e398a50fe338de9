# The overview figures of one run.
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

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
