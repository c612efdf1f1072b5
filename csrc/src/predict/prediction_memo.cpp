#include "habitat/prediction_memo.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

#include "habitat/predictor.h"

namespace habitat {
namespace {

// Walks a step's work (everything but its host times, see same_work) as a flat sequence of
// bytes: a Writer appends them, a Reader compares them with bytes written before, field by
// field, without building anything. One walk (visit_work) serves both, so the two cannot
// disagree on what is compared.
class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  void bytes(const void* p, std::size_t n) { out_.append(static_cast<const char*>(p), n); }
  template <std::size_t N>
  void fixed(const void* p) {
    bytes(p, N);
  }
  bool ok() const { return true; }

 private:
  std::string& out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : at_(in.data()), end_(in.data() + in.size()) {}
  void bytes(const void* p, std::size_t n) {
    if (!ok_ || static_cast<std::size_t>(end_ - at_) < n) {
      ok_ = false;
      return;
    }
    // Most of a step's variable-length fields (names, shapes) are short: a loop is cheaper
    // than a call for each.
    const auto* q = static_cast<const char*>(p);
    if (n <= 64) {
      uint64_t diff = 0;
      std::size_t i = 0;
      for (; i + 8 <= n; i += 8) diff |= word(at_ + i) ^ word(q + i);
      for (; i < n; ++i) diff |= static_cast<unsigned char>(at_[i] ^ q[i]);
      ok_ = diff == 0;
    } else {
      ok_ = std::memcmp(at_, p, n) == 0;
    }
    at_ += n;
  }
  // A value of a size known when compiled (compared inline).
  template <std::size_t N>
  void fixed(const void* p) {
    if (!ok_ || static_cast<std::size_t>(end_ - at_) < N) {
      ok_ = false;
      return;
    }
    ok_ = std::memcmp(at_, p, N) == 0;
    at_ += N;
  }
  bool ok() const { return ok_; }
  bool done() const { return ok_ && at_ == end_; }

 private:
  static uint64_t word(const char* p) {
    uint64_t w;
    std::memcpy(&w, p, sizeof w);
    return w;
  }

  const char* at_;
  const char* end_;
  bool ok_ = true;
};

template <class Sink, class T>
void value(Sink& sink, const T& v) {
  sink.template fixed<sizeof v>(&v);
}

template <class Sink>
void text(Sink& sink, const std::string& s) {
  value(sink, s.size());
  sink.bytes(s.data(), s.size());
}

template <class Sink>
void numbers(Sink& sink, std::span<const int64_t> v) {
  value(sink, v.size());
  sink.bytes(v.data(), v.size() * sizeof(int64_t));
}

template <class Sink>
void tensors(Sink& sink, const std::vector<TensorMeta>& ts) {
  value(sink, ts.size());
  for (const TensorMeta& t : ts) {
    numbers(sink, t.shape);
    numbers(sink, t.strides);
    text(sink, t.dtype);
    text(sink, t.device);
    const unsigned char flags =
        static_cast<unsigned char>(t.contiguous) | static_cast<unsigned char>(t.defined << 1);
    value(sink, flags);
    value(sink, t.storage);
    value(sink, t.storage_offset);
  }
}

// Doubles go by their bits (as in the op key): -0.0 and 0.0 differ.
template <class Sink>
bool visit_work(Sink& sink, const Step& step) {
  value(sink, step.measured_peak_bytes);
  value(sink, step.dropped_ops);
  value(sink, step.ops.size());
  for (const OpRecord& op : step.ops) {
    if (!sink.ok()) return false;
    value(sink, op.id);
    const uint64_t parent = op.parent.value_or(0);
    const unsigned char flags = static_cast<unsigned char>(op.parent.has_value()) |
                                static_cast<unsigned char>(op.has_children << 1) |
                                static_cast<unsigned char>(op.precision.has_value() << 2);
    value(sink, parent);
    value(sink, flags);
    value(sink, op.depth);
    value(sink, op.phase);
    text(sink, op.name);
    text(sink, op.overload);
    if (op.precision) {
      const unsigned char switches =
          static_cast<unsigned char>(op.precision->matmul_allow_tf32) |
          static_cast<unsigned char>(op.precision->cudnn_allow_tf32 << 1);
      value(sink, switches);
      text(sink, op.precision->float32_matmul_precision);
      text(sink, op.precision->autocast_dtype);
    }
    value(sink, op.args.size());
    for (const Argument& a : op.args) {
      text(sink, a.name);
      value(sink, a.value.kind);
      tensors(sink, a.value.tensors);
      numbers(sink, a.value.ints);
      value(sink, a.value.real);
      text(sink, a.value.text);
    }
    tensors(sink, op.outputs);
    value(sink, op.kernels.size());
    for (const KernelLaunch& k : op.kernels) {
      text(sink, k.name);
      sink.template fixed<sizeof k.grid>(k.grid);
      sink.template fixed<sizeof k.block>(k.block);
      value(sink, k.registers_per_thread);
      value(sink, k.static_shared_bytes);
      value(sink, k.dynamic_shared_bytes);
      value(sink, k.duration_us);
      value(sink, k.stream);
    }
  }
  return sink.ok();
}

std::string work_of(const Step& step) {
  std::string out;
  Writer w(out);
  visit_work(w, step);
  return out;
}

bool has_work(const std::string& work, const Step& step) {
  Reader r(work);
  return visit_work(r, step) && r.done();
}

}  // namespace

bool same_work(const Step& a, const Step& b) { return has_work(work_of(a), b); }

std::pair<PredictionMemo::Entry*, bool> PredictionMemo::find_or_add(const std::string& key) {
  if (const auto it = entries_.find(key); it != entries_.end()) return {&it->second, false};
  if (entries_.size() >= max_ops_) entries_.clear();  // ops that never repeat: start afresh
  return {&entries_.try_emplace(key).first->second, true};
}

std::size_t PredictionMemo::slot(const Device* target) {
  return slots_.try_emplace(target, slots_.size()).first->second;
}

PredictionMemo::Repeat* PredictionMemo::repeat_of(const Step& step,
                                                  const std::vector<const Device*>& targets) {
  if (!last_ || last_->targets != targets || !has_work(last_->work, step)) return nullptr;
  return &last_->repeat;
}

PredictionMemo::Repeat* PredictionMemo::remember(const Step& step,
                                                 const std::vector<const Device*>& targets,
                                                 std::shared_ptr<const Forecast> forecast) {
  last_ = LastStep{work_of(step), targets, Repeat{std::move(forecast), nullptr, {}}};
  return &last_->repeat;
}

}  // namespace habitat
