// `tmcra-mcp console [--port N] [--no-open]`: a local web page on 127.0.0.1 to see and own what
// memory holds (docs/console.md): scopes and sessions with their turns, search with the ranking
// explanation, the last recall, the outbox with its dead letters and a replay button, feedback
// (ignore, correct, restore) and session modes, forget and export, and a chart of the store's
// growth. It makes the calls the memory commands make (src/app/memory_command.h).
//
// Access: the URL it prints holds a one-time token; opening it sets an HttpOnly SameSite=Strict
// session cookie and the token is spent. Every other request without the cookie is 401. The
// Host header must name the console's own address and an Origin header, when sent, its own
// origin (else 403), so another site's page or a DNS-rebinding name cannot use it; there is no
// CORS; every POST carries the session's CSRF token (else 403).
#pragma once

#include <string_view>
#include <vector>

namespace tmcra::app {

// `args`: what follows "console". Serves until SIGINT or SIGTERM; returns the exit status.
int RunConsole(const std::vector<std::string_view>& args);

}  // namespace tmcra::app
