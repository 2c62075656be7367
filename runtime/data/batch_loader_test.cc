#include "runtime/data/batch_loader.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/data/shard_set.h"
#include "runtime/data/shard_writer.h"
#include "runtime/data/test_util.h"

namespace corescape::data {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kVocab = 1000;
constexpr int32_t kEos = 998;
constexpr int32_t kPad = 999;

// Documents of lengths 0..40 (an empty one included) with tokens that
// differ by document and position.
std::shared_ptr<const ShardSet> MakeDocuments(const std::string& name,
                                              std::vector<int> lengths = {}) {
  if (lengths.empty()) {
    for (int d = 0; d < 30; ++d) lengths.push_back((d * 17) % 41);
  }
  std::vector<std::vector<int32_t>> documents;
  for (size_t d = 0; d < lengths.size(); ++d) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < lengths[d]; ++i) tokens.push_back(static_cast<int32_t>((d * 31 + i) % 990));
    documents.push_back(tokens);
  }
  std::string dir = testing::MakeTestDir(name);
  // Two shards, so documents are numbered across shards.
  size_t half = documents.size() / 2;
  std::vector<std::vector<int32_t>> first(documents.begin(), documents.begin() + half);
  std::vector<std::vector<int32_t>> second(documents.begin() + half, documents.end());
  EXPECT_TRUE(WriteShard(dir + "/0.shard", kVocab, first).ok());
  EXPECT_TRUE(WriteShard(dir + "/1.shard", kVocab, second).ok());
  auto set = ShardSet::Open({dir + "/0.shard", dir + "/1.shard"});
  EXPECT_TRUE(set.ok()) << set.status();
  return *set;
}

BatchLoaderOptions Options(int32_t seq_len, int32_t micro_batch, int32_t rank = 0,
                           int32_t world = 1) {
  BatchLoaderOptions options;
  options.seq_len = seq_len;
  options.micro_batch_size = micro_batch;
  options.rank = rank;
  options.world_size = world;
  options.seed = 42;
  options.eos_id = kEos;
  options.pad_id = kPad;
  return options;
}

std::unique_ptr<BatchLoader> MustCreate(std::shared_ptr<const ShardSet> documents,
                                        const BatchLoaderOptions& options) {
  auto loader = BatchLoader::Create(std::move(documents), options);
  EXPECT_TRUE(loader.ok()) << loader.status();
  return loader.ok() ? std::move(*loader) : nullptr;
}

// Checks one batch against the documents; returns its segments in order.
void CheckBatch(const ShardSet& documents, const PackedBatch& batch) {
  const int32_t B = batch.batch_size, T = batch.seq_len;
  ASSERT_EQ(batch.tokens.size(), size_t(B) * T);
  ASSERT_EQ(batch.targets.size(), size_t(B) * T);
  ASSERT_EQ(batch.positions.size(), size_t(B) * T);
  std::vector<int32_t> filled(B, 0);
  for (const Segment& s : batch.segments) {
    ASSERT_GE(s.row, 0);
    ASSERT_LT(s.row, B);
    // Segments tile each row from column 0, in order.
    ASSERT_EQ(s.start, filled[s.row]) << "row " << s.row;
    ASSERT_GT(s.length, 0);
    filled[s.row] += s.length;
    ASSERT_LE(filled[s.row], T);
    TokenSpan text = documents.Document(s.document);
    for (int32_t j = 0; j < s.length; ++j) {
      const size_t cell = size_t(s.row) * T + s.start + j;
      const int64_t p = s.position_offset + j;
      ASSERT_LE(p, text.size());
      EXPECT_EQ(batch.positions[cell], p);
      EXPECT_EQ(batch.tokens[cell], p < text.size() ? text[p] : kEos);
      int32_t target = p + 1 < text.size() ? text[p + 1] : (p + 1 == text.size() ? kEos : -1);
      EXPECT_EQ(batch.targets[cell], target) << "document " << s.document << " position " << p;
    }
  }
  for (int32_t row = 0; row < B; ++row) {
    for (int32_t col = filled[row]; col < T; ++col) {
      const size_t cell = size_t(row) * T + col;
      EXPECT_EQ(batch.tokens[cell], kPad);
      EXPECT_EQ(batch.targets[cell], -1);
      EXPECT_EQ(batch.positions[cell], 0);
    }
  }
}

// The pieces of one epoch in stream order must spell every document
// exactly once, each document's pieces back to back from position 0 to
// its eos.
void CheckEpochCoverage(const ShardSet& documents, const std::vector<Segment>& segments) {
  std::set<int64_t> seen;
  int64_t current = -1, next_position = 0, current_length = -1;
  for (const Segment& s : segments) {
    if (s.position_offset == 0) {
      ASSERT_EQ(next_position, current_length + 1) << "document " << current << " cut short";
      ASSERT_TRUE(seen.insert(s.document).second) << "document " << s.document << " twice";
      current = s.document;
      current_length = documents.DocumentLength(s.document);
      next_position = 0;
    }
    ASSERT_EQ(s.document, current);
    ASSERT_EQ(s.position_offset, next_position);
    next_position += s.length;
  }
  EXPECT_EQ(next_position, current_length + 1);
  EXPECT_EQ(static_cast<int64_t>(seen.size()), documents.document_count());
}

std::vector<PackedBatch> Take(BatchLoader& loader, int steps) {
  std::vector<PackedBatch> batches;
  for (int i = 0; i < steps; ++i) {
    std::optional<PackedBatch> batch = loader.Next();
    if (!batch.has_value()) break;
    batches.push_back(std::move(*batch));
  }
  return batches;
}

bool SameBatch(const PackedBatch& a, const PackedBatch& b) {
  if (a.segments.size() != b.segments.size()) return false;
  for (size_t i = 0; i < a.segments.size(); ++i) {
    const Segment &x = a.segments[i], &y = b.segments[i];
    if (x.row != y.row || x.start != y.start || x.length != y.length ||
        x.document != y.document || x.position_offset != y.position_offset) {
      return false;
    }
  }
  return a.tokens == b.tokens && a.targets == b.targets && a.positions == b.positions;
}

TEST(BatchLoaderTest, EveryTokenOfAnEpochOnceWithPositionsAndTargets) {
  auto documents = MakeDocuments("coverage");
  auto loader = MustCreate(documents, Options(16, 3));
  const int64_t steps = loader->steps_per_epoch();
  EXPECT_EQ(loader->tokens_per_epoch(), documents->token_count() + documents->document_count());
  EXPECT_EQ(loader->rows_per_epoch(), (loader->tokens_per_epoch() + 15) / 16);
  std::vector<Segment> stream;
  int64_t padded_cells = 0;
  for (int64_t step = 0; step < steps; ++step) {
    std::optional<PackedBatch> batch = loader->Next();
    ASSERT_TRUE(batch.has_value());
    CheckBatch(*documents, *batch);
    stream.insert(stream.end(), batch->segments.begin(), batch->segments.end());
    for (int32_t token : batch->tokens) padded_cells += token == kPad;
  }
  CheckEpochCoverage(*documents, stream);
  // Padding only completes the epoch's last global batch.
  EXPECT_EQ(padded_cells, steps * 3 * 16 - loader->tokens_per_epoch());
  EXPECT_EQ(loader->state().epoch, 1);
  EXPECT_EQ(loader->state().row, 0);

  // The next epoch covers everything again, in another order.
  std::vector<Segment> second;
  for (int64_t step = 0; step < steps; ++step) {
    std::optional<PackedBatch> batch = loader->Next();
    CheckBatch(*documents, *batch);
    second.insert(second.end(), batch->segments.begin(), batch->segments.end());
  }
  CheckEpochCoverage(*documents, second);
  EXPECT_NE(stream.front().document * 1000 + stream[1].document,
            second.front().document * 1000 + second[1].document);
}

TEST(BatchLoaderTest, SplitPiecesContinueTheirPositions) {
  // In shard order: document 0 (5 tokens + eos) then document 1 (10 + eos).
  auto documents = MakeDocuments("split", {5, 10});
  BatchLoaderOptions options = Options(8, 3);
  options.shuffle = false;
  auto loader = MustCreate(documents, options);
  std::optional<PackedBatch> batch = loader->Next();
  ASSERT_TRUE(batch.has_value());
  CheckBatch(*documents, *batch);
  ASSERT_EQ(batch->segments.size(), 4u);
  auto expect_segment = [](const Segment& s, int row, int start, int length, int document,
                           int offset) {
    EXPECT_EQ(s.row, row);
    EXPECT_EQ(s.start, start);
    EXPECT_EQ(s.length, length);
    EXPECT_EQ(s.document, document);
    EXPECT_EQ(s.position_offset, offset);
  };
  expect_segment(batch->segments[0], 0, 0, 6, 0, 0);
  expect_segment(batch->segments[1], 0, 6, 2, 1, 0);
  expect_segment(batch->segments[2], 1, 0, 8, 1, 2);  // positions 2..9
  expect_segment(batch->segments[3], 2, 0, 1, 1, 10);  // the eos
  TokenSpan second = documents->Document(1);
  EXPECT_EQ(batch->tokens[5], kEos);
  EXPECT_EQ(batch->targets[4], kEos);
  EXPECT_EQ(batch->targets[5], -1);
  // The last token of row 0 predicts the first of row 1: same document.
  EXPECT_EQ(batch->targets[7], second[2]);
  EXPECT_EQ(batch->tokens[8], second[2]);
  EXPECT_EQ(batch->positions[8], 2);
  EXPECT_EQ(batch->positions[15], 9);
  EXPECT_EQ(batch->targets[15], kEos);
  EXPECT_EQ(batch->tokens[16], kEos);
  EXPECT_EQ(batch->positions[16], 10);
  EXPECT_EQ(batch->tokens[17], kPad);
}

TEST(BatchLoaderTest, SameSeedSameBatchesOtherSeedOthers) {
  auto documents = MakeDocuments("determinism");
  auto a = MustCreate(documents, Options(12, 2));
  auto b = MustCreate(documents, Options(12, 2));
  BatchLoaderOptions reseeded = Options(12, 2);
  reseeded.seed = 43;
  auto c = MustCreate(documents, reseeded);
  std::vector<PackedBatch> from_a = Take(*a, 100), from_b = Take(*b, 100), from_c = Take(*c, 100);
  bool any_difference = false;
  for (size_t i = 0; i < from_a.size(); ++i) {
    EXPECT_TRUE(SameBatch(from_a[i], from_b[i])) << "step " << i;
    any_difference |= !SameBatch(from_a[i], from_c[i]);
  }
  EXPECT_TRUE(any_difference);
}

// W ranks of b rows see exactly the rows of one rank of W*b rows.
void ExpectSameRowsAsOneRank(int world, int micro_batch) {
  auto documents = MakeDocuments(absl::StrCat("ranks_", world, "_", micro_batch));
  const int T = 10;
  auto single = MustCreate(documents, Options(T, world * micro_batch));
  std::vector<std::unique_ptr<BatchLoader>> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(MustCreate(documents, Options(T, micro_batch, r, world)));
  const int64_t steps = single->steps_per_epoch() * 2 + 3;  // across epoch ends
  for (int64_t step = 0; step < steps; ++step) {
    PackedBatch whole = *single->Next();
    for (int r = 0; r < world; ++r) {
      PackedBatch part = *ranks[r]->Next();
      CheckBatch(*documents, part);
      const size_t begin = size_t(r) * micro_batch * T, cells = size_t(micro_batch) * T;
      auto slice = [&](const std::vector<int32_t>& v) {
        return std::vector<int32_t>(v.begin() + begin, v.begin() + begin + cells);
      };
      ASSERT_EQ(part.tokens, slice(whole.tokens)) << "step " << step << " rank " << r;
      ASSERT_EQ(part.targets, slice(whole.targets));
      ASSERT_EQ(part.positions, slice(whole.positions));
      std::vector<Segment> expected;
      for (const Segment& s : whole.segments) {
        if (s.row / micro_batch == r) {
          expected.push_back(s);
          expected.back().row -= r * micro_batch;
        }
      }
      ASSERT_EQ(part.segments.size(), expected.size());
      for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_EQ(part.segments[i].row, expected[i].row);
        EXPECT_EQ(part.segments[i].start, expected[i].start);
        EXPECT_EQ(part.segments[i].document, expected[i].document);
        EXPECT_EQ(part.segments[i].position_offset, expected[i].position_offset);
      }
    }
  }
}

TEST(BatchLoaderTest, TwoRanksOfBEqualOneRankOf2B) { ExpectSameRowsAsOneRank(2, 3); }
TEST(BatchLoaderTest, FourRanksOfOneEqualOneRankOfFour) { ExpectSameRowsAsOneRank(4, 1); }

TEST(BatchLoaderTest, SavedStateResumesExactly) {
  auto documents = MakeDocuments("resume");
  auto original = MustCreate(documents, Options(9, 2));
  Take(*original, 37);  // past the first epoch (~22 steps)
  std::string saved = original->state().ToJson();
  std::vector<PackedBatch> expected = Take(*original, 30);

  auto state = LoaderState::FromJson(saved);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->epoch, 1);
  auto resumed = MustCreate(documents, Options(9, 2));
  ASSERT_TRUE(resumed->Restore(*state).ok());
  auto sought = MustCreate(documents, Options(9, 2));
  ASSERT_TRUE(sought->Seek(37).ok());
  EXPECT_EQ(sought->state(), *state);
  std::vector<PackedBatch> from_resumed = Take(*resumed, 30), from_sought = Take(*sought, 30);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_TRUE(SameBatch(from_resumed[i], expected[i])) << "step " << i;
    EXPECT_TRUE(SameBatch(from_sought[i], expected[i])) << "step " << i;
  }

  // A state is for one packing of one dataset.
  auto other = MustCreate(documents, Options(10, 2));
  absl::Status refused = other->Restore(*state);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("fingerprint"));
  EXPECT_FALSE(LoaderState::FromJson("{\"epoch\": 1}").ok());
  EXPECT_FALSE(LoaderState::FromJson("not json").ok());
  LoaderState past_end = *state;
  past_end.row = resumed->rows_per_epoch();
  EXPECT_FALSE(resumed->Restore(past_end).ok());
}

TEST(BatchLoaderTest, ValidationCoversEachTokenOnceAcrossRanksThenStops) {
  auto documents = MakeDocuments("validation");
  std::vector<Segment> stream;
  std::vector<std::unique_ptr<BatchLoader>> ranks;
  for (int r = 0; r < 2; ++r) {
    auto loader = BatchLoader::CreateValidation(documents, Options(7, 2, r, 2));
    ASSERT_TRUE(loader.ok());
    ranks.push_back(std::move(*loader));
  }
  int64_t steps = 0;
  while (true) {
    std::optional<PackedBatch> zero = ranks[0]->Next();
    std::optional<PackedBatch> one = ranks[1]->Next();
    ASSERT_EQ(zero.has_value(), one.has_value());
    if (!zero.has_value()) break;
    ++steps;
    for (const PackedBatch* batch : {&*zero, &*one}) {
      CheckBatch(*documents, *batch);
      stream.insert(stream.end(), batch->segments.begin(), batch->segments.end());
    }
  }
  EXPECT_EQ(steps, ranks[0]->steps_per_epoch());
  CheckEpochCoverage(*documents, stream);
  // Shard order, no shuffle.
  int64_t previous = -1;
  for (const Segment& s : stream) {
    EXPECT_GE(s.document, previous);
    previous = s.document;
  }
  EXPECT_FALSE(ranks[0]->Next().has_value());
  EXPECT_EQ(ranks[0]->Seek(steps + 1).code(), absl::StatusCode::kOutOfRange);
  ASSERT_TRUE(ranks[0]->Seek(0).ok());
  EXPECT_TRUE(ranks[0]->Next().has_value());
}

TEST(BatchLoaderTest, RejectsBadOptions) {
  auto documents = MakeDocuments("bad_options");
  EXPECT_FALSE(BatchLoader::Create(documents, Options(0, 2)).ok());
  EXPECT_FALSE(BatchLoader::Create(documents, Options(8, 0)).ok());
  EXPECT_FALSE(BatchLoader::Create(documents, Options(8, 2, 2, 2)).ok());
  BatchLoaderOptions bad_eos = Options(8, 2);
  bad_eos.eos_id = kVocab;
  EXPECT_THAT(std::string(BatchLoader::Create(documents, bad_eos).status().message()),
              HasSubstr("eos id 1000 is outside the vocabulary"));
  EXPECT_FALSE(BatchLoader::Create(nullptr, Options(8, 2)).ok());
}

}  // namespace
}  // namespace corescape::data
