// TraceTree (habitat/trace_tree.h): a json_dom document built value by value; read by the
// trace reader in trace_json.cpp (trace_from_tree).
#include "habitat/trace_tree.h"

#include "trace/json_dom.h"

namespace habitat {

using json_reader::DocumentBuilder;

TraceTree::TraceTree()
    : document_(std::make_unique<json_reader::Document>(DocumentBuilder::make())) {}
TraceTree::~TraceTree() = default;
TraceTree::TraceTree(TraceTree&&) noexcept = default;
TraceTree& TraceTree::operator=(TraceTree&&) noexcept = default;

TraceTree::Node TraceTree::root() { return Node(this, &DocumentBuilder::root(*document_)); }

void TraceTree::Node::set_null() { DocumentBuilder::set_null(*value_); }
void TraceTree::Node::set_bool(bool v) { DocumentBuilder::set_bool(*value_, v); }
void TraceTree::Node::set_int(int64_t v) { DocumentBuilder::set_int(*value_, v); }
void TraceTree::Node::set_uint(uint64_t v) { DocumentBuilder::set_uint(*value_, v); }
void TraceTree::Node::set_real(double v) { DocumentBuilder::set_real(*value_, v); }

void TraceTree::Node::set_string(std::string_view v) {
  DocumentBuilder::set_string(*tree_->document_, *value_, v);
}

void TraceTree::Node::set_array(std::size_t n) {
  DocumentBuilder::set_array(*tree_->document_, *value_, n);
}

TraceTree::Node TraceTree::Node::element(std::size_t i) const {
  // The elements were made writable by set_array; the Value hands them out read-only.
  return Node(tree_, const_cast<json_reader::Value*>(&(*value_)[i]));
}

void TraceTree::Node::set_object(std::size_t n) {
  DocumentBuilder::set_object(*tree_->document_, *value_, n);
}

TraceTree::Node TraceTree::Node::member(std::size_t i, std::string_view key) const {
  json_reader::Member& m = DocumentBuilder::member(*value_, i);
  DocumentBuilder::set_key(*tree_->document_, m, key);
  return Node(tree_, &m.value);
}

}  // namespace habitat
