// The passive's access control (--allow ranges) and result-spool budgets.
#include <catch2/catch.hpp>

#include "measure/results.h"
#include "transport/sockets.h"

using namespace npm;

namespace {
boost::asio::ip::address a(const char* text) { return boost::asio::ip::make_address(text); }
}  // namespace

TEST_CASE("option --allow, ranges: IPv4, IPv6, single hosts, IPv4-mapped addresses") {
  const auto ranges = transport::parsePrefixList("192.0.2.0/24,2001:db8::/32,198.51.100.7,[::1]");
  INFO(ranges.error());
  REQUIRE(ranges);
  REQUIRE(ranges->size() == 4);
  CHECK(transport::allowed(*ranges, a("192.0.2.200")));
  CHECK_FALSE(transport::allowed(*ranges, a("192.0.3.1")));
  CHECK(transport::allowed(*ranges, a("::ffff:192.0.2.9")));  // as a dual-stack socket sees it
  CHECK(transport::allowed(*ranges, a("2001:db8:ffff::1")));
  CHECK_FALSE(transport::allowed(*ranges, a("2001:db9::1")));
  CHECK(transport::allowed(*ranges, a("198.51.100.7")));
  CHECK_FALSE(transport::allowed(*ranges, a("198.51.100.8")));
  CHECK(transport::allowed(*ranges, a("::1")));
  CHECK(transport::allowed({}, a("203.0.113.1")));  // no list: everyone
  const auto odd = transport::parsePrefixList("10.0.0.0/9,0.0.0.0/0");
  REQUIRE(odd);
  CHECK((*odd)[0].contains(a("10.127.255.255")));
  CHECK_FALSE((*odd)[0].contains(a("10.128.0.0")));
  CHECK((*odd)[1].contains(a("203.0.113.1")));
  CHECK_FALSE((*odd)[1].contains(a("2001:db8::1")));
}

TEST_CASE("option --allow, ranges: one clear line for a bad one") {
  CHECK_THAT(transport::parsePrefixList("192.0.2.0/33").error(), Catch::Contains("0 to 32"));
  CHECK_THAT(transport::parsePrefixList("2001:db8::/129").error(), Catch::Contains("0 to 128"));
  CHECK_THAT(transport::parsePrefixList("example.org").error(), Catch::Contains("not an address range"));
  CHECK_FALSE(transport::parsePrefixList("10.0.0.0/x"));
  CHECK_THAT(transport::parsePrefixList("").error(), Catch::Contains("empty"));
}

TEST_CASE("spool budgets: a session's draws from the passive's, and gives back when it goes") {
  auto total = std::make_shared<measure::SpoolBudget>(1000, "in all");
  {
    measure::SpoolBudget one(600, "per session", total);
    measure::SpoolBudget two(600, "per session", total);
    CHECK(one.take(500));
    CHECK_FALSE(one.take(200));  // its own limit
    CHECK_THAT(one.describe(), Catch::Contains("per session"));
    CHECK(two.take(400));
    CHECK_FALSE(two.take(150));  // the passive's limit
    CHECK_THAT(two.describe(), Catch::Contains("in all"));
    CHECK(two.used() == 400);
    CHECK(total->used() == 900);
  }
  CHECK(total->used() == 0);
}

#include <string_view>
#include <vector>

#include "common/hmac.h"
#include "control/auth.h"

namespace {
std::string hex(std::span<const std::uint8_t> d) {
  std::string s;
  char b[3];
  for (auto c : d) {
    std::snprintf(b, sizeof(b), "%02x", c);
    s += b;
  }
  return s;
}
std::span<const std::uint8_t> bytes(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}
}  // namespace

TEST_CASE("SHA-256 and HMAC-SHA-256 against the standards' test vectors") {
  // FIPS 180-4's examples (NIST CSRC), and the empty message.
  CHECK(hex(npm::sha256(bytes("abc"))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(hex(npm::sha256(bytes(""))) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(hex(npm::sha256(bytes("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // RFC 4231, all seven test cases for HMAC-SHA-256 (case 5 compares the 128 bits it gives).
  const std::vector<std::uint8_t> longKey(131, 0xaa);
  std::vector<std::uint8_t> countingKey;
  for (std::uint8_t i = 1; i <= 25; ++i) countingKey.push_back(i);
  struct Case {
    std::vector<std::uint8_t> key, data;
    std::string_view hmac;
  };
  const std::string_view largeData =
      "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be "
      "hashed before being used by the HMAC algorithm.";
  auto text = [](std::string_view s) { return std::vector<std::uint8_t>(s.begin(), s.end()); };
  const Case cases[] = {
      {std::vector<std::uint8_t>(20, 0x0b), text("Hi There"),
       "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {text("Jefe"), text("what do ya want for nothing?"),
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {std::vector<std::uint8_t>(20, 0xaa), std::vector<std::uint8_t>(50, 0xdd),
       "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {countingKey, std::vector<std::uint8_t>(50, 0xcd),
       "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      {std::vector<std::uint8_t>(20, 0x0c), text("Test With Truncation"), "a3b6167473100ee06e0c796c2955552b"},
      {longKey, text("Test Using Larger Than Block-Size Key - Hash Key First"),
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {longKey, text(largeData), "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
      // Not in the RFC: an empty key and message (the same as Python's hmac module gives).
      {{}, {}, "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.hmac);
    CHECK(hex(npm::hmacSha256(c.key, c.data)).substr(0, c.hmac.size()) == c.hmac);
  }
  CHECK(npm::constantTimeEqual(bytes("same"), bytes("same")));
  CHECK(npm::constantTimeEqual(bytes(""), bytes("")));
  CHECK_FALSE(npm::constantTimeEqual(bytes("same"), bytes("samf")));
  CHECK_FALSE(npm::constantTimeEqual(bytes("same"), bytes("sam")));
  CHECK_FALSE(npm::constantTimeEqual(bytes(""), bytes("a")));
}

TEST_CASE("authentication proofs: both directions differ, and depend on both nonces and the key") {
  const npm::control::AuthKey key(32, 7), other(32, 8);
  const auto na = npm::control::newNonce(), np = npm::control::newNonce();
  CHECK(na != np);
  const auto pp = npm::control::passiveProof(key, na, np);
  CHECK(npm::control::sameProof(pp, npm::control::passiveProof(key, na, np)));
  CHECK_FALSE(npm::control::sameProof(pp, npm::control::activeProof(key, np, na)));  // no reflection
  CHECK_FALSE(npm::control::sameProof(pp, npm::control::passiveProof(other, na, np)));
  CHECK_FALSE(npm::control::sameProof(pp, npm::control::passiveProof(key, na, npm::control::newNonce())));
}
