// Readiness for service managers: systemd's notify protocol (sd_notify(3)) without libsystemd. A
// unit of Type=notify (deploy/systemd/) starts the process with NOTIFY_SOCKET set to a datagram
// socket; the process sends "READY=1" once it serves, "STATUS=..." lines a human reads in
// `systemctl status`, and "STOPPING=1" when it begins to stop. Anywhere else (NOTIFY_SOCKET unset)
// every call does nothing.
#pragma once

#include <string>

#include "base/status.hpp"

namespace ember {

/// Sends `state` (newline-separated assignments, e.g. "READY=1\nSTATUS=serving") to the service
/// manager named by $NOTIFY_SOCKET: a filesystem path, or '@' and an abstract socket name. OK when
/// sent or when there is no service manager to tell; io_error when the socket cannot be reached.
Status notify_service_manager(const std::string& state);

}  // namespace ember
