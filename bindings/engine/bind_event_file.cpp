// TensorBoard event-file records of scalars, built in C++ so that a step's scalars cost a few
// microseconds of GIL time: predict_on writes them for every step, on the thread that shares
// the GIL with training. The format is TensorBoard's (tensorboard/compat/proto/event.proto,
// summary.proto; record framing as in TFRecord): uint64 length, masked CRC-32C of the length,
// the serialised Event, masked CRC-32C of it. Only the fields Habitat writes are encoded.
#include <pybind11/stl.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings.h"

namespace habitat::python {
namespace py = pybind11;

namespace {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), table-driven.
constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1U) ? (crc >> 1) ^ 0x82F63B78U : crc >> 1;
    table[i] = crc;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrcTable = make_crc_table();

uint32_t crc32c(const char* data, size_t size) {
  uint32_t crc = 0xFFFFFFFFU;
  for (size_t i = 0; i < size; ++i)
    crc = kCrcTable[(crc ^ static_cast<uint8_t>(data[i])) & 0xFFU] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFU;
}

// TFRecord masks the CRC so that a CRC of data holding CRCs stays well distributed.
uint32_t masked_crc(const char* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8U;
}

void put_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFU));
}

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80U) {
    out.push_back(static_cast<char>((value & 0x7FU) | 0x80U));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

// Protobuf wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32.
void put_key(std::string& out, uint32_t field, uint32_t wire_type) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | wire_type);
}

void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

void put_double(std::string& out, uint32_t field, double value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  if (bits == 0) return;  // proto3: +0.0 is the default, left out as protobuf does
  put_key(out, field, 1);
  put_le(out, bits, 8);
}

// Event {wall_time = 1 (double), step = 2 (int64)}; the caller appends the rest.
std::string event_head(double wall_time, int64_t step) {
  std::string event;
  put_double(event, 1, wall_time);
  if (step != 0) {  // proto3: a zero scalar is left out, as the protobuf library does
    put_key(event, 2, 0);
    put_varint(event, static_cast<uint64_t>(step));
  }
  return event;
}

py::bytes framed(const std::string& event) {
  std::string record;
  record.reserve(event.size() + 16);
  put_le(record, event.size(), 8);
  put_le(record, masked_crc(record.data(), 8), 4);
  record += event;
  put_le(record, masked_crc(event.data(), event.size()), 4);
  return py::bytes(record);
}

// One Event holding one Summary with a simple_value per tag: Summary.value = 1 (repeated
// Value), Value.tag = 1 (string), Value.simple_value = 2 (float); Event.summary = 5.
py::bytes scalars_record(int64_t step, double wall_time, const std::vector<std::string>& tags,
                         const std::vector<double>& values) {
  if (tags.size() != values.size())
    throw std::invalid_argument("tb_scalars_record: got " + std::to_string(tags.size()) +
                                " tags and " + std::to_string(values.size()) +
                                " values; pass one value per tag");
  std::string summary;
  for (size_t i = 0; i < tags.size(); ++i) {
    std::string value;
    put_bytes(value, 1, tags[i]);
    const auto simple = static_cast<float>(values[i]);
    uint32_t bits = 0;
    std::memcpy(&bits, &simple, sizeof bits);
    put_key(value, 2, 5);
    put_le(value, bits, 4);
    put_bytes(summary, 1, value);
  }
  std::string event = event_head(wall_time, step);
  put_bytes(event, 5, summary);
  return framed(event);
}

// The record an event file starts with: Event.file_version = 3 ("brain.Event:2").
py::bytes file_version_record(double wall_time) {
  std::string event = event_head(wall_time, 0);
  put_bytes(event, 3, "brain.Event:2");
  return framed(event);
}

}  // namespace

void bind_event_file(py::module_& m) {
  m.def("tb_scalars_record", &scalars_record, py::arg("step"), py::arg("wall_time"),
        py::arg("tags"), py::arg("values"),
        "A TensorBoard event-file record: one Event at `step` holding a scalar per tag.");
  m.def("tb_file_version_record", &file_version_record, py::arg("wall_time"),
        "The record a TensorBoard event file starts with (file_version brain.Event:2).");
  m.def(
      "tb_record",
      [](const py::bytes& event) {
        const std::string s = event;
        return framed(s);
      },
      py::arg("event"), "A serialised Event framed as an event-file record (length, CRCs).");
  m.def(
      "crc32c",
      [](const py::bytes& data) {
        const std::string s = data;
        return crc32c(s.data(), s.size());
      },
      py::arg("data"), "CRC-32C (Castagnoli) of `data`, unmasked.");
}

}  // namespace habitat::python
