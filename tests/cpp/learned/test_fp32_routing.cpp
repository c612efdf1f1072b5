// Which model serves an op (learned_models.h): <family>_fp32 for FP32 SIMT work whose roofline
// is at least its from_roofline_us, <family> for everything else; and the dominance envelope's
// memo gives the very numbers computing every forecast afresh gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "cost/test_op_cost_builders.h"
#include "habitat/learned_envelope.h"
#include "habitat/learned_features.h"
#include "habitat/learned_models.h"
#include "habitat/op_cost.h"
#include "test_devices.h"

namespace habitat {
namespace {

namespace fs = std::filesystem;

const std::string kWeights = std::string(HABITAT_SOURCE_DIR) + "/weights";

using test::db;

// A weights folder holding only `stem`'s files of the shipped weights, renamed to `family`.
std::string only(const std::string& stem, const std::string& family) {
  const fs::path dir = fs::temp_directory_path() / ("habitat_routing_" + stem + "_as_" + family);
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* ext : {".safetensors", ".json"}) {
    fs::copy_file(fs::path(kWeights) / (stem + ext), dir / (family + ext),
                  fs::copy_options::overwrite_existing);
  }
  return dir.string();
}

TEST(Fp32Routing, Fp32SimtAboveTheThresholdIsTheFp32ModelsEverythingElseTheMainModels) {
  if (!fs::exists(fs::path(kWeights) / "gemm_fp32.safetensors")) GTEST_SKIP() << "no FP32 model";
  const LearnedModels shipped = LearnedModels::load(kWeights);
  const LearnedModels fp32 = LearnedModels::load(only("gemm_fp32", "gemm"));
  const LearnedModels main = LearnedModels::load(only("gemm", "gemm"));
  const Device& d = db().find("A100-SXM4-40GB");
  int big = 0, small = 0;
  for (double size : {64.0, 256.0, 1024.0, 4096.0, 8192.0}) {
    const LearnedShape s{{"b", 1}, {"m", size}, {"n", size}, {"k", size}, {"elem_bytes", 4}};
    const double roof =
        compute_learned_features(LearnedFamily::Gemm, s, d, Precision::Fp32Simt).roofline_us;
    const double got = *shipped.predict_family_us(LearnedFamily::Gemm, s, d, Precision::Fp32Simt);
    // gemm_fp32.json: from_roofline_us 32.
    const LearnedModels& expected = roof >= 32.0 ? fp32 : main;
    (roof >= 32.0 ? big : small) += 1;
    EXPECT_DOUBLE_EQ(got,
                     *expected.predict_family_us(LearnedFamily::Gemm, s, d, Precision::Fp32Simt))
        << size;
    // Tensor-core precisions always take the main model.
    LearnedShape half = s;
    half["elem_bytes"] = 2;
    EXPECT_DOUBLE_EQ(
        *shipped.predict_family_us(LearnedFamily::Gemm, half, d, Precision::Bf16Tensor),
        *main.predict_family_us(LearnedFamily::Gemm, half, d, Precision::Bf16Tensor));
  }
  EXPECT_GT(big, 0);
  EXPECT_GT(small, 0);
}

TEST(Fp32Routing, AnFp32ModelWithoutItsMainModelIsNotLoaded) {
  if (!fs::exists(fs::path(kWeights) / "gemm_fp32.safetensors")) GTEST_SKIP() << "no FP32 model";
  const LearnedModels models = LearnedModels::load(only("gemm_fp32", "gemm_fp32"));
  EXPECT_TRUE(models.empty());
}

TEST(DominanceEnvelopeMemo, GivesTheUnmemoisedMinimumForOpsBuiltInTheSamePlace) {
  if (!fs::exists(fs::path(kWeights) / "gemm.safetensors")) GTEST_SKIP() << "no weights";
  const LearnedModels models = LearnedModels::load(kWeights);
  const DominanceEnvelope envelope(models, db());
  for (int64_t m : {16, 256, 4096}) {
    for (const char* dtype : {"float32", "bfloat16"}) {
      // A fresh op each time, at the same stack address: the memo must key on content.
      OpRecord op;
      op.name = "aten::mm";
      op.args = {test::tensor("self", test::T({m, 512}, dtype)),
                 test::tensor("mat2", test::T({512, 1024}, dtype))};
      op.outputs = {test::T({m, 1024}, dtype)};
      const OpCost cost = estimate_cost(op, false);
      for (const Device& target : db().all()) {
        double expected = *models.predict_us(op, cost, target);
        for (const Device& other : db().all()) {
          if (other.name != target.name && at_least_as_good(target, other, cost.precision)) {
            expected = std::min(expected, *models.predict_us(op, cost, other));
          }
        }
        EXPECT_DOUBLE_EQ(*envelope.predict_us(op, cost, target), expected)
            << m << dtype << target.name;
        // A copy of the device (not the database's own) is forecast too, without the memo.
        const Device copy = target;
        EXPECT_DOUBLE_EQ(*envelope.predict_us(op, cost, copy), expected);
      }
    }
  }
}

}  // namespace
}  // namespace habitat
