// A fake of the CUPTI Activity API for tests without a GPU: the cupti* C functions the
// tracer calls, with CUPTI's buffer rules modelled.
//
// The rule that matters for coexistence: a process has one pair of buffer callbacks
// (cuptiActivityRegisterCallbacks replaces the previous pair), a buffer is requested from
// the pair registered when a record needs room, and completed into the pair registered
// when it completes (full, or a flush). A client that registers while another client's
// buffer is still open therefore receives that buffer. The fake counts every buffer
// completed into a pair that did not request it (`misdelivered`). Single-threaded.
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>

namespace fake_cupti {

// Forgets everything (registered callbacks, kinds, the open buffer, counts). An open
// buffer is dropped without completing it: call between tests after the clients stopped.
void reset();
// One kernel launched by the calling "thread": a runtime API record (its kind enabled, or the
// launch call's records enabled alone), an external correlation record per kind pushed, and a
// kernel record, each if its kind is enabled.
void launch_kernel(const char* name);
// One cudaMemcpyAsync of `kind` (its memcpy record 300 ns long) and one cudaMemsetAsync (200 ns),
// with the same API and external correlation records as a launch.
void copy_memory(CUpti_ActivityMemcpyKind kind, uint64_t bytes);
void set_memory(uint64_t bytes);
// Buffers completed into a callback pair other than the one that requested them.
int64_t misdelivered();
// Runtime API calls enabled one by one (cuptiActivityEnableRuntimeApi), and whether a kind is on.
std::size_t runtime_apis_enabled();
bool kind_enabled(CUpti_ActivityKind kind);
// Buffers completed in all (to the right pair or not).
int64_t completed();
// Whether a buffer is open (requested, not completed yet).
bool buffer_open();
// Registers the pair registered before the current one again, without any flush (a client
// that takes the callbacks back carelessly).
void reregister_previous();
// Room for records in each buffer the fake asks for, at most (0: the size the client gave).
void set_records_per_buffer(std::size_t records);

}  // namespace fake_cupti
