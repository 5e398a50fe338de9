// A small JSON writer for netperfmeter's machine-readable output (--json, --json-stream):
// strings escaped (invalid UTF-8 replaced by U+FFFD), numbers that read back exactly,
// NaN and infinities as null, compact or indented. No parser: nothing here reads JSON.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace npm::json {

// `text` as a JSON string literal, quotes included.
std::string quote(std::string_view text);
// The shortest text that reads back as `v` (std::to_chars); "null" if not finite.
std::string number(double v);
// True if `token` is a number in JSON's grammar ("-0.5", "12", "1e3"; not "nan", "+1", "01").
bool isNumber(std::string_view token);

class Writer {
public:
  explicit Writer(bool indent = false) : indent_(indent) {}

  Writer& beginObject() { return open('{', true); }
  Writer& endObject() { return close('}'); }
  Writer& beginArray() { return open('[', false); }
  Writer& endArray() { return close(']'); }
  // The key of the next member of the current object.
  Writer& key(std::string_view name);

  Writer& value(std::string_view text) { return raw(quote(text)); }
  Writer& value(const char* text) { return value(std::string_view(text)); }
  Writer& value(const std::string& text) { return value(std::string_view(text)); }
  Writer& value(bool v) { return raw(v ? "true" : "false"); }
  Writer& value(std::uint64_t v) { return raw(std::to_string(v)); }
  Writer& value(std::int64_t v) { return raw(std::to_string(v)); }
  Writer& value(unsigned v) { return value(std::uint64_t{v}); }
  Writer& value(int v) { return value(std::int64_t{v}); }
  Writer& value(double v) { return raw(number(v)); }
  Writer& null() { return raw("null"); }
  // A number as already printed elsewhere (a scalar file's value): verbatim if it is a JSON
  // number, else (nan, inf) null.
  Writer& printedNumber(std::string_view token) { return raw(isNumber(token) ? token : std::string_view("null")); }
  // A complete JSON value written before by a compact Writer (e.g. a document embedded in a
  // stream's last line), verbatim.
  Writer& embedded(std::string_view value) { return raw(value); }

  // The document so far; complete once every object and array is closed.
  const std::string& text() const { return out_; }
  bool complete() const { return stack_.empty() && !out_.empty(); }

private:
  Writer& open(char bracket, bool object);
  Writer& close(char bracket);
  Writer& raw(std::string_view token);
  void separate();  // before a value or key: comma and line break as needed
  void newline(std::size_t depth);

  struct Level {
    bool object;
    std::size_t members = 0;
  };
  bool indent_;
  bool afterKey_ = false;
  std::vector<Level> stack_;
  std::string out_;
};

}  // namespace npm::json
