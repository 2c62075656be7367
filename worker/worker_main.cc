// corescape-worker: a compute daemon. It registers with the scheduler and
// holds its lease; training assignments arrive over its session.
#include "runtime/control/node_daemon.h"

int main(int argc, char** argv) {
  return corescape::RunNodeDaemon(corescape::v1::WORKER, argc, argv);
}
