// A fused attention call with dropout or a mask runs the plain kernels with the random draw or
// the mask's loads inside: its learned part is the plain problem at the measured factor
// (learned/attention_variants.h; benchmarks/results/sdpa-variants-fit.txt).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cost/test_op_cost_builders.h"
#include "habitat/learned_models.h"
#include "habitat/op_cost.h"

namespace habitat {
namespace {

using namespace habitat::test;

// BERT-base's attention: 32 x 12 heads of 128 tokens, head dim 64, [B, H, L, E].
OpRecord attention(const std::string& name, const std::string& dtype, double dropout, bool masked) {
  const TensorMeta q = T({32, 12, 128, 64}, dtype);
  std::vector<Argument> args{tensor("query", q), tensor("key", q), tensor("value", q),
                             real("dropout_p", dropout)};
  args.push_back(masked ? tensor("attn_bias", T({32, 1, 128, 128}, dtype)) : none("attn_bias"));
  return op(name, "", args, {q});
}

double scale_of(const OpRecord& o) {
  const auto parts = learned_parts(o, estimate_cost(o), true);
  EXPECT_EQ(parts.size(), 1u);
  if (parts.size() != 1) return 0.0;
  EXPECT_EQ(parts.front().family, LearnedFamily::Attention);
  return parts.front().scale;
}

TEST(AttentionVariants, DropoutAndMaskScaleThePlainProblem) {
  const std::string cudnn = "aten::_scaled_dot_product_cudnn_attention";
  EXPECT_EQ(scale_of(attention(cudnn, "bfloat16", 0.0, false)), 1.0);
  // cuDNN's 16-bit forward draws its dropout mask inside: 2.02x the plain kernel; a mask 1.58x.
  EXPECT_DOUBLE_EQ(scale_of(attention(cudnn, "bfloat16", 0.1, false)), 2.02);
  EXPECT_DOUBLE_EQ(scale_of(attention(cudnn, "bfloat16", 0.0, true)), 1.58);
  EXPECT_DOUBLE_EQ(scale_of(attention(cudnn, "bfloat16", 0.1, true)), 2.02 * 1.58);
  EXPECT_DOUBLE_EQ(scale_of(attention(cudnn + "_backward", "bfloat16", 0.1, false)), 1.20);
  // fp32 runs the memory-efficient kernels, where dropout costs less; flash takes no mask.
  const std::string efficient = "aten::_scaled_dot_product_efficient_attention";
  EXPECT_DOUBLE_EQ(scale_of(attention(efficient, "float32", 0.1, false)), 1.30);
  EXPECT_DOUBLE_EQ(scale_of(attention(efficient, "bfloat16", 0.1, false)), 1.81);
  const std::string flash = "aten::_scaled_dot_product_flash_attention";
  EXPECT_DOUBLE_EQ(scale_of(attention(flash, "bfloat16", 0.1, false)), 1.20);
  EXPECT_DOUBLE_EQ(scale_of(attention(flash, "bfloat16", 0.0, true)), 1.0);
  // The part's problem is the plain one: the same shape whatever the variant.
  const auto plain = learned_parts(attention(cudnn, "bfloat16", 0.0, false),
                                   estimate_cost(attention(cudnn, "bfloat16", 0.0, false)), true);
  const auto drop = learned_parts(attention(cudnn, "bfloat16", 0.1, true),
                                  estimate_cost(attention(cudnn, "bfloat16", 0.1, true)), true);
  ASSERT_EQ(plain.size(), 1u);
  ASSERT_EQ(drop.size(), 1u);
  EXPECT_EQ(plain.front().shape, drop.front().shape);
}

}  // namespace
}  // namespace habitat
