# The config parser reads KEY="value" lines as data: shell-style quoting and
# escapes, and never executes anything.

# The escaping netperfmeter applies to description values.
escape <- function(s) gsub("([\\\\\"$`])", "\\\\\\1", s)

test_that("unquoted numbers, double and single quotes, escapes", {
  cfg <- npm_parse_config_lines(c(
    "NUM_FLOWS=2",
    "NAME_ACTIVE_NODE=\"Client\"",
    "",
    "# a comment",
    "FLOW0_OUTBOUND_FRAME_SIZE_VALUE1=1460.000000",
    "A=\"with \\\"quotes\\\" and \\$HOME and \\`cmd\\` and \\\\ backslash\"",
    "B='single $HOME `x`'",
    "C=\"keeps \\n and \\a\"",
    "D=\"semi; colon & amp | pipe > gt\"",
    "E=\"\"",
    "F=word\\ with\\ escaped\\ spaces",
    "G=\"a\"'b'c  # trailing comment"))
  expect_equal(unname(cfg["NUM_FLOWS"]), "2")
  expect_equal(unname(cfg["NAME_ACTIVE_NODE"]), "Client")
  expect_equal(unname(cfg["FLOW0_OUTBOUND_FRAME_SIZE_VALUE1"]), "1460.000000")
  expect_equal(unname(cfg["A"]), "with \"quotes\" and $HOME and `cmd` and \\ backslash")
  expect_equal(unname(cfg["B"]), "single $HOME `x`")
  expect_equal(unname(cfg["C"]), "keeps \\n and \\a")
  expect_equal(unname(cfg["D"]), "semi; colon & amp | pipe > gt")
  expect_equal(unname(cfg["E"]), "")
  expect_equal(unname(cfg["F"]), "word with escaped spaces")
  expect_equal(unname(cfg["G"]), "abc")
  expect_equal(names(cfg)[1:3], c("NUM_FLOWS", "NAME_ACTIVE_NODE", "FLOW0_OUTBOUND_FRAME_SIZE_VALUE1"))
})

test_that("descriptions with $(...), backticks and ; are data, nothing runs", {
  marker <- tempfile("npm-pwned-")
  nasty <- c(sprintf("x $(touch %s) y", marker), sprintf("`touch %s`", marker),
             sprintf("a\"; touch %s; \"b", marker), sprintf("${IFS}$(touch${IFS}%s)", marker),
             "trailing backslash \\", "  spaces  ", "tab\there", "ünïcödé Γ ρ")
  lines <- sprintf("FLOW%d_DESCRIPTION=\"%s\"", seq_along(nasty) * 3L, escape(nasty))
  f <- tempfile(fileext = ".config")
  writeLines(lines, f)
  cfg <- npm_read_config(f)
  expect_equal(as.character(cfg), nasty)
  flows <- npm_config_flows(cfg)
  expect_equal(flows$FlowID, seq_along(nasty) * 3L)
  expect_equal(flows$Description, nasty)
  expect_false(file.exists(marker))
})

test_that("our reading of escaped values matches the shell's", {
  bash <- Sys.which("bash")
  skip_if(bash == "", "bash is missing")
  values <- c("plain", "with \"quotes\"", "dollar $HOME $(id) ${X}", "back`tick`", "back\\slash",
              "semi;colon", "multi\nline", "Γ ρ unicode")
  f <- tempfile(fileext = ".config")
  writeLines(sprintf("V%d=\"%s\"", seq_along(values), escape(values)), f, useBytes = TRUE)
  cfg <- npm_read_config(f)
  expect_equal(as.character(cfg), values)
  # Safe only because the values are escaped: the shell must see the same strings.
  for (i in seq_along(values)) {
    out <- system2(bash, c("-c", shQuote(sprintf(". %s; printf %%s \"$V%d\"", shQuote(f), i))),
                   stdout = TRUE)
    expect_equal(paste(out, collapse = "\n"), values[i])
  }
})

test_that("reference configs with unescaped descriptions are read literally", {
  marker <- tempfile("npm-pwned-")
  cfg <- npm_parse_config_lines(c(
    sprintf("FLOW0_DESCRIPTION=\"a \"b\" $(touch %s); c\"", marker),
    "FLOW0_PROTOCOL=\"TCP\"",
    "FLOW1_DESCRIPTION=\"x\" ; rm -rf / ; \"\""))
  expect_equal(unname(cfg["FLOW0_DESCRIPTION"]), sprintf("a \"b\" $(touch %s); c", marker))
  expect_equal(unname(cfg["FLOW0_PROTOCOL"]), "TCP")
  expect_equal(unname(cfg["FLOW1_DESCRIPTION"]), "x\" ; rm -rf / ; \"")
  expect_false(file.exists(marker))
})

test_that("a quoted value may span lines; errors name the line", {
  cfg <- npm_parse_config_lines(c("A=\"line one", "line two\"", "B=2"))
  expect_equal(unname(cfg["A"]), "line one\nline two")
  expect_equal(unname(cfg["B"]), "2")
  expect_error(npm_parse_config_lines(c("A=1", "B=\"open", "C=3"), "x.config"),
               "x.config:2: unterminated quote", class = "npm_error")
  expect_error(npm_parse_config_lines(c("A=1", "this is not a setting"), "x.config"),
               "x.config:2: expected KEY=value", class = "npm_error")
  expect_error(npm_parse_config_lines("A=one two", "x.config"), "unexpected text",
               class = "npm_error")
  expect_error(npm_read_config(tempfile()), "does not exist", class = "npm_error")
})

test_that("flows: any IDs, labels, NUM_FLOWS mismatch warns", {
  cfg <- npm_parse_config_lines(c(
    "NUM_FLOWS=3",
    "FLOW10_DESCRIPTION=\"Video\"", "FLOW10_PROTOCOL=\"UDP\"",
    "FLOW10_VECTOR_ACTIVE_NODE=\"r-active-0000000a-0000.vec\"",
    "FLOW3_DESCRIPTION=\"\"", "FLOW3_PROTOCOL=\"TCP\""))
  expect_warning(fl <- npm_config_flows(cfg), "NUM_FLOWS=3 but describes 2", class = "npm_warning")
  expect_equal(fl$FlowID, c(10L, 3L))
  expect_equal(fl$Label, c("Video (UDP, ID 10)", "Flow 3 (TCP, ID 3)"))
  expect_equal(fl$VectorActive, c("r-active-0000000a-0000.vec", ""))
})
