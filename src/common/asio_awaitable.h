// Boost.Asio's awaitable, for the headers that declare coroutines. Boost 1.74's
// boost/asio/awaitable.hpp uses std::exchange without including <utility>, so <utility> comes
// first: include this before any other Asio header (which may bring awaitable.hpp in).
#pragma once

#include <utility>

#include <boost/asio/awaitable.hpp>
