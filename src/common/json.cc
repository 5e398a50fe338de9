#include "common/json.h"

#include <charconv>
#include <cmath>
#include <stdexcept>

namespace npm::json {

namespace {

// Length of the valid UTF-8 sequence at `s[i]`, 0 if it is not one (overlong forms,
// surrogates and code points above U+10FFFF are not).
std::size_t utf8Length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  std::size_t n;
  std::uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF)
    n = 3, cp = c & 0x0F;
  else if (c >= 0xF0 && c <= 0xF4)
    n = 4, cp = c & 0x07;
  else
    return 0;
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
    return 0;
  return n;
}

}  // namespace

std::string quote(std::string_view text) {
  static const char* const hex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else if (const std::size_t n = utf8Length(text, i); n == 0) {
          out += "\xEF\xBF\xBD";  // U+FFFD for a byte that is not UTF-8
        } else {
          out.append(text.substr(i, n));
          i += n;
          continue;
        }
    }
    ++i;
  }
  out += '"';
  return out;
}

std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char b[64];
  const auto r = std::to_chars(b, b + sizeof(b), v);
  return std::string(b, r.ptr);  // "1e+20", "3": both JSON numbers
}

bool isNumber(std::string_view t) {
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t start = i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
    return i > start;
  };
  if (i < t.size() && t[i] == '-') ++i;
  if (i >= t.size()) return false;
  if (t[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < t.size() && t[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == t.size();
}

void Writer::newline(std::size_t depth) {
  out_ += '\n';
  out_.append(2 * depth, ' ');
}

void Writer::separate() {
  if (afterKey_) {
    afterKey_ = false;
    return;
  }
  if (stack_.empty()) {
    if (!out_.empty()) throw std::logic_error("json::Writer: a second top-level value");
    return;
  }
  Level& level = stack_.back();
  if (level.object) throw std::logic_error("json::Writer: a member without a key");
  if (level.members++ > 0) out_ += ',';
  if (indent_) newline(stack_.size());
}

Writer& Writer::key(std::string_view name) {
  if (stack_.empty() || !stack_.back().object || afterKey_)
    throw std::logic_error("json::Writer: a key outside an object");
  Level& level = stack_.back();
  if (level.members++ > 0) out_ += ',';
  if (indent_) newline(stack_.size());
  out_ += quote(name);
  out_ += indent_ ? ": " : ":";
  afterKey_ = true;
  return *this;
}

Writer& Writer::open(char bracket, bool object) {
  separate();
  out_ += bracket;
  stack_.push_back(Level{object});
  return *this;
}

Writer& Writer::close(char bracket) {
  if (stack_.empty() || afterKey_ || stack_.back().object != (bracket == '}')) {
    throw std::logic_error("json::Writer: unbalanced close");
  }
  const bool hadMembers = stack_.back().members > 0;
  stack_.pop_back();
  if (indent_ && hadMembers) newline(stack_.size());
  out_ += bracket;
  return *this;
}

Writer& Writer::raw(std::string_view token) {
  separate();
  out_.append(token);
  return *this;
}

}  // namespace npm::json
