// A trace document handed to the engine as a tree of values instead of JSON text.
//
// A caller that already holds the document as objects (the Python bindings: a dict of lists
// and dicts) builds the tree value by value and trace_from_tree reads it with the very reader
// trace_from_json uses: the same validation, the same messages and field paths, the same
// structs. Encoding the document to text only for the engine to parse it back cost more than
// the forecast itself. The tree owns copies of every key and string, so it can be built
// under one lock (Python's GIL) and read after the lock is released.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "habitat/trace.h"

namespace habitat {

namespace json_reader {
class Value;
class Document;
}  // namespace json_reader

class TraceTree {
 public:
  // One value of the tree, filled in exactly once by one of the set_* calls. Numbers keep
  // JSON's kinds: set_int for integers (stored as a JSON parser stores the same literal),
  // set_uint for integers past INT64_MAX, set_real for the rest (finite only, as in JSON).
  class Node {
   public:
    void set_null();
    void set_bool(bool v);
    void set_int(int64_t v);
    void set_uint(uint64_t v);
    void set_real(double v);
    void set_string(std::string_view v);
    // An array of n elements, each then filled through element(i).
    void set_array(std::size_t n);
    Node element(std::size_t i) const;
    // An object of n members, each then named and filled through member(i, key).
    void set_object(std::size_t n);
    Node member(std::size_t i, std::string_view key) const;

   private:
    friend class TraceTree;
    Node(TraceTree* tree, json_reader::Value* value) : tree_(tree), value_(value) {}
    TraceTree* tree_;
    json_reader::Value* value_;
  };

  TraceTree();
  ~TraceTree();
  TraceTree(TraceTree&&) noexcept;
  TraceTree& operator=(TraceTree&&) noexcept;

  // The document's root (null until set).
  Node root();
  const json_reader::Document& document() const { return *document_; }

 private:
  std::unique_ptr<json_reader::Document> document_;
};

// Reads a trace from a tree exactly as trace_from_json reads the same document as text;
// throws TraceFormatError with the same message.
Trace trace_from_tree(const TraceTree& tree);

}  // namespace habitat
