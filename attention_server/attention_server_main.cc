// corescape-attention-server: a core-attention daemon. It registers with the
// scheduler and holds its lease; attention tasks arrive over the data plane.
#include "runtime/control/node_daemon.h"

int main(int argc, char** argv) {
  return corescape::RunNodeDaemon(corescape::v1::ATTENTION_SERVER, argc, argv);
}
