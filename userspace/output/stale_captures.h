// What killed captures leave behind, looked at when attach or record starts.
#pragma once

namespace gtrace {

// Lists, one line each (unless quiet), the partial traces of captures whose gtrace died (kill -9,
// a crash) with the command that completes them; forgets the registry entries whose partial is
// gone; removes the /dev/shm/gtrace-<pid> directories that earlier versions of gtrace left when
// they died (root-owned ones of pids that are no longer gtrace, without following links).
void sweep_stale_captures(bool quiet);

} // namespace gtrace
