#include "habitat/prediction_memo.h"

namespace habitat {

std::pair<PredictionMemo::Entry*, bool> PredictionMemo::find_or_add(const std::string& key) {
  if (const auto it = entries_.find(key); it != entries_.end()) return {&it->second, false};
  if (entries_.size() >= max_ops_) entries_.clear();  // ops that never repeat: start afresh
  return {&entries_.try_emplace(key).first->second, true};
}

std::size_t PredictionMemo::slot(const Device* target) {
  return slots_.try_emplace(target, slots_.size()).first->second;
}

}  // namespace habitat
