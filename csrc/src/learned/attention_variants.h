// Attention dropout and attention masks in the fused SDPA kernels: the attention model learns
// the plain kernels (the collections' `sdpa` rows); a call with dropout or a mask runs the same
// kernels with the random draw or the mask's loads inside them, measured as a factor on the
// plain time.
#pragma once

#include "habitat/trace.h"

namespace habitat {

// The factor on a fused attention op's plain forecast for its dropout (dropout_p > 0) and its
// mask (an attn_mask, attn_bias or bias tensor). `backend`: the attention family's column (0
// flash, 1 memory-efficient, 2 cuDNN). 1 for a plain call.
double attention_variant_scale(const OpRecord& op, double backend, bool backward, bool fp32);

}  // namespace habitat
