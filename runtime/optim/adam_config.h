#ifndef CORESCAPE_RUNTIME_OPTIM_ADAM_CONFIG_H_
#define CORESCAPE_RUNTIME_OPTIM_ADAM_CONFIG_H_

namespace corescape::optim {

// The hyper-parameters AdamW and AdamS share (AdamS inherits AdamW's): one
// struct, so no optimizer copies them field by field into another's.
struct AdamConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double epsilon = 1e-8;
  double weight_decay = 0.1;  // decoupled; only where the decay mask says so
};

using AdamWConfig = AdamConfig;
using AdamSConfig = AdamConfig;

}  // namespace corescape::optim

#endif  // CORESCAPE_RUNTIME_OPTIM_ADAM_CONFIG_H_
