// Long-option lookup shared by netperfmeter's command line (app/cli) and the result tools
// (tools/toolcommon): an option is named exactly or by an abbreviation, as GNU
// getopt_long_only does. The two scanners around it keep their own spellings and messages
// (they differ on purpose: see the comments at their call sites).
#pragma once

#include <span>
#include <string_view>

namespace npm::options {

enum class Abbreviations {
  Unique,           // an abbreviation must fit one option only (getopt_long_only)
  PreferBeginning,  // ... or the one whose name begins all the others' ("-comp" is --compress
                    // although --compression exists)
};

template <class Option>
struct LongMatch {
  const Option* option = nullptr;  // nullptr: none fits, or several do (`ambiguous`)
  bool ambiguous = false;
};

// The long option `word` names among `options`. `name(option)` gives an option's long name
// (nullptr: it has none); `same(a, b)` tells whether two entries are one option under two
// names (they never make an abbreviation ambiguous). An empty `word` abbreviates every name.
template <class Option, class Name, class Same>
LongMatch<Option> findLongOption(std::span<const Option> options, std::string_view word, Abbreviations rule, Name name,
                                 Same same) {
  auto begins = [](std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; };
  std::size_t matches = 0;
  for (const Option& o : options) {
    if (name(o) == nullptr) continue;
    if (word == name(o)) return {&o, false};
    if (begins(name(o), word)) ++matches;
  }
  for (const Option& candidate : options) {
    if (name(candidate) == nullptr || !begins(name(candidate), word)) continue;
    bool chosen = true;
    for (const Option& other : options) {
      if (name(other) == nullptr || !begins(name(other), word) || same(other, candidate)) continue;
      if (rule == Abbreviations::Unique || !begins(name(other), name(candidate))) chosen = false;
    }
    if (chosen) return {&candidate, false};
  }
  return {nullptr, matches > 1};
}

}  // namespace npm::options
