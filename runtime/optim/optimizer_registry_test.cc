#include "runtime/optim/optimizer_registry.h"

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/optim/in_process_rank_group.h"

namespace corescape::optim {
namespace {

TEST(OptimizerRegistryTest, ListsEveryOptimizerOnceWithItsTraits) {
  EXPECT_EQ(OptimizerNames(),
            (std::vector<std::string>{"adamw", "adams", "scape", "scape-global", "topk-adamw"}));
  EXPECT_EQ(OptimizerNameList(), "adamw, adams, scape, scape-global, topk-adamw");
  std::set<std::string> sparse, mask_epochs, clipping;
  for (const OptimizerTraits& traits : Optimizers()) {
    if (traits.sparse) sparse.insert(traits.name);
    if (traits.uses_mask_epochs) mask_epochs.insert(traits.name);
    if (traits.clips_gradients) clipping.insert(traits.name);
  }
  EXPECT_EQ(sparse, (std::set<std::string>{"scape", "scape-global", "topk-adamw"}));
  EXPECT_EQ(mask_epochs, (std::set<std::string>{"scape", "scape-global"}));
  EXPECT_EQ(clipping, (std::set<std::string>{"adamw"}));
}

TEST(OptimizerRegistryTest, UnknownNamesAreRefusedWithTheList) {
  auto found = FindOptimizer("lion");
  EXPECT_EQ(found.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(found.status().message(),
            "unknown optimizer 'lion' (adamw, adams, scape, scape-global, topk-adamw)");
  InProcessHub hub(1);
  InProcessRankGroup group(&hub, 0);
  OptimizerOptions options;
  options.name = "";
  EXPECT_EQ(CreateOptimizer(options, &group, DecayMask(8, 1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Each name builds the optimizer it names; its checkpoint says so.
TEST(OptimizerRegistryTest, BuildsWhatEachNameNames) {
  InProcessHub hub(1);
  InProcessRankGroup group(&hub, 0);
  for (const std::string& name : OptimizerNames()) {
    OptimizerOptions options;
    options.name = name;
    auto optimizer = CreateOptimizer(options, &group, DecayMask(64, 1));
    ASSERT_TRUE(optimizer.ok()) << name << ": " << optimizer.status();
    // scape-global is SCAPE with whole-buffer masks: same class, same state.
    EXPECT_EQ((*optimizer)->name(), name == "scape-global" ? "scape" : name);
    EXPECT_EQ((*optimizer)->first_moment().size(), 64u) << name;
  }
}

TEST(OptimizerRegistryTest, SparseDensityIsChecked) {
  InProcessHub hub(1);
  InProcessRankGroup group(&hub, 0);
  for (const char* name : {"topk-adamw", "scape"}) {
    OptimizerOptions options;
    options.name = name;
    options.scape.density = 1.5;
    EXPECT_EQ(CreateOptimizer(options, &group, DecayMask(8, 1)).status().code(),
              absl::StatusCode::kInvalidArgument)
        << name;
  }
}

}  // namespace
}  // namespace corescape::optim
