#include "scheduler/list_pages.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "runtime/base/clock.h"
#include "scheduler/event_log.h"
#include "scheduler/in_memory_state_store.h"
#include "scheduler/node_listing.h"
#include "scheduler/node_registry.h"

namespace corescape::scheduler {
namespace {

TEST(ListPagesTest, PageSizeIsBounded) {
  EXPECT_EQ(*ResolvePageSize(0), kDefaultPageSize);
  EXPECT_EQ(*ResolvePageSize(1), 1);
  EXPECT_EQ(*ResolvePageSize(kMaxPageSize), kMaxPageSize);
  for (int bad : {-1, kMaxPageSize + 1}) {
    auto size = ResolvePageSize(bad);
    EXPECT_EQ(size.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(size.status().message().find("page_size"), std::string::npos);
  }
}

TEST(ListPagesTest, TokensAreOpaqueAndBelongToOneListing) {
  const std::string token = EncodePageToken("jobs", "123/job-7");
  EXPECT_EQ(token.find("job-7"), std::string::npos);
  EXPECT_EQ(*DecodePageToken("jobs", token), "123/job-7");
  EXPECT_EQ(*DecodePageToken("jobs", ""), "");
  for (const std::string& bad :
       {EncodePageToken("nodes", "w0"), std::string("not base64 !"), std::string(2000, 'A'),
        std::string("djE6am9icw")}) {
    auto position = DecodePageToken("jobs", bad);
    EXPECT_EQ(position.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(position.status().message().find("page_token"), std::string::npos);
  }
}

// A page holds at least one item and, past that, no more than
// kMaxPageBytes, whatever the page size.
TEST(ListPagesTest, PagesStayUnderTheByteBound) {
  std::vector<std::string> items;
  for (int i = 0; i < 1000; ++i) items.push_back(absl::StrFormat("%04d", i) + std::string(9996, 'x'));
  std::string after;
  size_t taken = 0;
  int pages = 0;
  do {
    Page<std::string> page = TakePage<std::string>(
        items, kMaxPageSize, "strings",
        [&](const std::string& item) { return after.empty() || item.substr(0, 4) > after; },
        [](const std::string& item) { return item.substr(0, 4); },
        [](const std::string& item) { return item.size(); });
    size_t bytes = 0;
    for (const std::string& item : page.items) bytes += item.size();
    EXPECT_LE(bytes, kMaxPageBytes);
    ASSERT_FALSE(page.items.empty());
    EXPECT_EQ(page.items.front().substr(0, 4), absl::StrFormat("%04d", taken));
    taken += page.items.size();
    ++pages;
    if (page.next_page_token.empty()) break;
    after = *DecodePageToken("strings", page.next_page_token);
  } while (true);
  EXPECT_EQ(taken, items.size());
  EXPECT_EQ(pages, 5);  // 10 MB in pages of at most 2 MiB

  const std::string huge(3 * kMaxPageBytes, 'y');
  Page<std::string> one = TakePage<std::string>(
      {huge, huge}, 10, "strings", [](const std::string&) { return true; },
      [](const std::string&) { return "a"; }, [](const std::string& s) { return s.size(); });
  EXPECT_EQ(one.items.size(), 1u);  // progress even past the bound
  EXPECT_FALSE(one.next_page_token.empty());
}

// 2,500 nodes page by page while others register between pages: every node
// that was there at the start comes exactly once, in name order.
TEST(ListPagesTest, NodesListPageByPageUnderConcurrentRegistrations) {
  FakeClock clock;
  InMemoryStateStore store;
  EventLog events(&clock, nullptr);
  NodeRegistry registry(&clock, &store, &events, NodeRegistryOptions{});
  auto add = [&](const std::string& name, v1::NodeRole role) {
    v1::RegisterRequest request;
    request.set_name(name);
    request.set_role(role);
    request.set_host("h");
    request.set_grpc_address("127.0.0.1:1");
    ASSERT_TRUE(registry.Register(request).ok());
  };
  std::set<std::string> workers;
  for (int i = 0; i < 2500; ++i) {
    const std::string name = absl::StrFormat("n%05d", i * 2);
    add(name, i % 5 == 0 ? v1::ATTENTION_SERVER : v1::WORKER);
    if (i % 5 != 0) workers.insert(name);
  }
  v1::ListNodesRequest request;
  request.set_role(v1::WORKER);
  request.set_page_size(300);
  std::vector<std::string> listed;
  for (int pages = 0;; ++pages) {
    ASSERT_LT(pages, 100);
    auto page = ListNodesPage(registry, request);
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_LE(page->items.size(), 300u);
    for (const v1::NodeInfo& node : page->items) listed.push_back(node.name());
    if (page->next_page_token.empty()) break;
    request.set_page_token(page->next_page_token);
    // Before the cursor (comes later in no page) and after it (comes once).
    add(absl::StrFormat("a-new-%d", pages), v1::WORKER);
    add(absl::StrFormat("%s-late", listed.back()), v1::WORKER);
  }
  std::set<std::string> unique(listed.begin(), listed.end());
  EXPECT_EQ(unique.size(), listed.size()) << "a node came twice";
  EXPECT_TRUE(std::is_sorted(listed.begin(), listed.end()));
  for (const std::string& name : workers) EXPECT_EQ(unique.count(name), 1u) << name;
  for (const std::string& name : listed) EXPECT_EQ(name.rfind("a-new-", 0), std::string::npos);

  request.set_page_token("garbage");
  EXPECT_EQ(ListNodesPage(registry, request).status().code(),
            absl::StatusCode::kInvalidArgument);
  request.clear_page_token();
  request.set_page_size(kMaxPageSize + 1);
  EXPECT_EQ(ListNodesPage(registry, request).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace corescape::scheduler
