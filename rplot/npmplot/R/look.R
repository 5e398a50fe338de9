# The look of the figures: palette, shapes, line types, theme.
# Copyright (C) the NetPerfMeter project. GPL-3.0-or-later.

npm_okabe_ito <- c("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9",
                   "#000000", "#F0E442")
npm_shapes <- c(16, 17, 15, 18, 1, 2, 0, 5, 3, 4, 8, 6)
npm_linetypes <- c("solid", "dashed", "dotted", "dotdash", "longdash", "twodash",
                   "11", "44", "1343")

npm_palette <- function(n, grey = FALSE) {
  if (n <= 0L) return(character(0))
  if (grey) return(if (n == 1L) "black" else grey.colors(n, start = 0, end = 0.62))
  if (n <= length(npm_okabe_ito)) npm_okabe_ito[seq_len(n)]
  else grDevices::hcl.colors(n, "Dark 3")
}

npm_rep_len <- function(v, n) rep_len(v, max(n, 0L))

npm_theme <- function(base_size = 12, legend_position = "bottom") {
  theme_bw(base_size = base_size) +
    theme(legend.position = legend_position,
          legend.key.width = grid::unit(2.2, "lines"),
          panel.grid.minor = element_blank(),
          strip.background = element_rect(fill = "grey92"),
          plot.title = element_text(face = "bold"))
}
