// Data movement: copies and casts, gathers and scatters, embedding lookups, and the view and
// metadata ops that move nothing. Gathers read only the elements they fetch, bounded by the
// source's size (repeated rows come from cache): min(elements(out) * element size, source).
#include <algorithm>

#include "cost/embedding_paths.h"
#include "cost/op_cost_detail.h"

namespace habitat::op_cost {
namespace {

bool same_storage_known(const TensorMeta& a, const TensorMeta& b, bool* same) {
  if (a.storage == 0 || b.storage == 0) return false;
  *same = a.storage == b.storage;
  return true;
}

OpCost copy_cost(const OpContext& c, double read) {
  return make_cost(OpClass::Copy, 0, read, output_bytes(c), simt_precision(op_dtype(c)), 1);
}

// copy_(self, src) overwrites self with src (casting, or crossing devices as a memcpy).
OpCost copy_into(const OpContext& c, double) {
  return copy_cost(c, input_bytes(c, /*skip_self=*/true));
}

OpCost streaming_copy(const OpContext& c, double) { return copy_cost(c, input_bytes(c)); }

// Ops that return a view when they can and copy otherwise (reshape, contiguous, to, ...).
// The record decides: an output on the input's storage is a view. Without storage ids, a
// contiguous input (param 1: or any input, for ops that never copy) is taken as a view.
OpCost view_or_copy(const OpContext& c, double always_view) {
  const TensorMeta* in = tensor_arg(c, "self");
  const TensorMeta* out = main_output(c);
  if (in == nullptr || out == nullptr) return no_kernel_cost();
  bool same = false;
  if (same_storage_known(*in, *out, &same)) {
    return same ? no_kernel_cost() : streaming_copy(c, 0);
  }
  const bool converts = in->dtype != out->dtype || in->device != out->device;
  if (converts || (always_view == 0 && !in->contiguous)) return streaming_copy(c, 0);
  return no_kernel_cost();
}

// item() / _local_scalar_dense: one element to the host, and a device synchronisation.
OpCost scalar_to_host(const OpContext& c, double) {
  const TensorMeta* in = tensor_arg(c, "self");
  const double bytes = in != nullptr ? static_cast<double>(element_size(*in)) : 0;
  return make_cost(OpClass::Copy, 0, bytes, bytes, Precision::Fp32Simt, 1);
}

double gathered_bytes(const TensorMeta& source, double elements) {
  return std::min(footprint_bytes(source), elements * static_cast<double>(element_size(source)));
}

// Reads of everything except `source`, which is read at gather size.
double gather_reads(const OpContext& c, const TensorMeta& source, double elements) {
  double read = gathered_bytes(source, elements);
  for (const auto* t : input_tensors(c)) {
    if (t != &source) read += footprint_bytes(*t);
  }
  return read;
}

// index.Tensor, index_select, gather: fetch elements(out) elements of self plus the indices.
OpCost gather(const OpContext& c, double) {
  const TensorMeta* src = tensor_arg(c, "self");
  const TensorMeta* out = main_output(c);
  if (src == nullptr || out == nullptr) return OpCost{};
  return copy_cost(c, gather_reads(c, *src, numel(*out)));
}

// Elements a scatter writes: one per index (scatter) / per source row (index_add) / per
// value (index_put_). Index values are data, so duplicates and boolean masks cannot be
// resolved: index_put_ with one broadcast value assumes every index hits (an upper bound).
double scattered_elements(const OpContext& c) {
  if (const TensorMeta* index = tensor_arg(c, "index")) {
    const TensorMeta* source = tensor_arg(c, "source");  // index_add
    return source != nullptr ? numel(*source) : numel(*index);
  }
  const TensorMeta* values = tensor_arg(c, "values");
  double n = values != nullptr ? numel(*values) : 0;
  if (n <= 1) {
    for (const auto* t : tensor_list_arg(c, "indices")) n = std::max(n, numel(*t));
  }
  return n;
}

// scatter/scatter_add/index_put/index_add. In place, only the hit elements of self are
// touched (read too when accumulating); out of place, self is first copied whole.
// param: 1 when the op accumulates (a FLOP per element).
OpCost scatter(const OpContext& c, double accumulates) {
  const TensorMeta* self = tensor_arg(c, "self");
  if (self == nullptr) return OpCost{};
  const bool accumulate =
      accumulates != 0 || bool_arg(c, "accumulate", false) || arg(c, "reduce") != nullptr;
  const double elements = scattered_elements(c);
  const double touched = elements * static_cast<double>(element_size(*self));
  double read = input_bytes(c, /*skip_self=*/true) + (accumulate ? touched : 0);
  double written = touched;
  if (!c.in_place) {  // out of place: a clone of self, then the scatter into it
    read += footprint_bytes(*self);
    written += output_bytes(c);
  }
  return make_cost(OpClass::Copy, accumulate ? elements : 0, read, written,
                   simt_precision(self->dtype), c.in_place ? 1 : 2);
}

// embedding(weight, indices): gathers one row per index.
OpCost embedding(const OpContext& c, double) {
  const TensorMeta* weight = tensor_arg(c, "weight");
  const TensorMeta* out = main_output(c);
  if (weight == nullptr || out == nullptr) return OpCost{};
  return make_cost(OpClass::Embedding, 0, gather_reads(c, *weight, numel(*out)), output_bytes(c),
                   simt_precision(weight->dtype), 1);
}

// embedding_dense_backward: sums grad_output rows into a zeroed [num_weights, D] gradient, on
// ATen's per-feature path in 2 kernels (a zero fill and the accumulation), otherwise in 14 (the
// sort and segment kernels of the H100 collection's rows): cost/embedding_paths.h. Its time:
// predict/embedding_kernels.h.
OpCost embedding_backward(const OpContext& c, double) {
  const TensorMeta* grad = tensor_arg(c, "grad_output");
  const TensorMeta* indices = tensor_arg(c, "indices");
  if (grad == nullptr || indices == nullptr) return OpCost{};
  const bool feature_path = embedding_paths::feature_path(static_cast<int64_t>(numel(*indices)),
                                                          bool_arg(c, "scale_grad_by_freq", false));
  return make_cost(OpClass::Embedding, numel(*grad), input_bytes(c), output_bytes(c),
                   simt_precision(grad->dtype), feature_path ? 2 : 14);
}

OpCost no_kernel(const OpContext&, double) { return no_kernel_cost(); }

}  // namespace

void add_memory_rules(RuleTable& t) {
  t["copy"] = {copy_into};  // aten::copy_ and the functional aten::copy
  add_rules(t,
            "_to_copy clone cat stack concat concatenate hstack vstack roll flip repeat "
            "constant_pad_nd lift_fresh_copy tril triu narrow_copy expand_copy permute_copy "
            "view_copy _reshape_copy reflection_pad1d reflection_pad2d replication_pad1d "
            "replication_pad2d",
            {streaming_copy});
  t["to"] = {view_or_copy, 0};
  t["contiguous"] = {view_or_copy, 0};
  t["reshape"] = {view_or_copy, 0};
  t["reshape_as"] = {view_or_copy, 0};
  t["flatten"] = {view_or_copy, 0};
  t["_unsafe_view"] = {view_or_copy, 1};  // never copies in ATen: a view for autograd's eyes
  t["_local_scalar_dense"] = {scalar_to_host};
  t["item"] = {scalar_to_host};
  t["is_nonzero"] = {scalar_to_host};
  // nonzero counts, synchronises to size its output, then writes the indices.
  t["nonzero"] = {[](const OpContext& c, double) {
    OpCost cost = streaming_copy(c, 0);
    cost.kernels = cost.kernels > 0 ? 2 : 0;
    return cost;
  }};
  add_rules(t, "index _unsafe_index index_select gather take", {gather});
  add_rules(t, "scatter index_put _index_put_impl _unsafe_index_put", {scatter, 0});
  add_rules(t, "scatter_add scatter_reduce index_add", {scatter, 1});
  t["embedding"] = {embedding};
  t["embedding_dense_backward"] = {embedding_backward};

  // Views, metadata and allocation: no device work. resize_ only (re)allocates.
  add_rules(
      t,
      "view view_as _reshape_alias expand expand_as t transpose swapaxes swapdims permute "
      "movedim moveaxis as_strided slice select squeeze unsqueeze unflatten narrow diagonal "
      "unfold split split_with_sizes unsafe_split unsafe_split_with_sizes tensor_split chunk "
      "unsafe_chunk unbind detach alias lift lift_fresh real imag view_as_real view_as_complex "
      "_conj conj _neg_view resolve_conj resolve_neg numpy_T mT mH adjoint empty empty_like "
      "empty_strided new_empty new_empty_strided empty_permuted resize resize_as set "
      "is_same_size size sym_size stride sym_stride numel sym_numel dim is_contiguous "
      "is_floating_point is_complex retain_grad retains_grad output_nr _version _fw_primal "
      "_make_dual _unpack_dual _has_compatible_shallow_copy_type _assert_tensor_metadata "
      "record_stream align_to rename refine_names result_type broadcast_tensors broadcast_to "
      "atleast_1d atleast_2d atleast_3d "
      // Backend queries: a bool from the tensor's metadata, no kernel on any device.
      "cudnn_is_acceptable is_pinned is_set_to _use_cudnn_ctc_loss _use_cudnn_rnn_flatten_weight "
      "_fused_sdp_choice",
      {no_kernel});
}

}  // namespace habitat::op_cost
