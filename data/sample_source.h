// SampleSource: what the trainer draws training samples from. Sample i is S+1 token ids: S
// inputs and, shifted by one, S labels. Implemented by SequentialGPTDataset (file order, no
// index), GPTDataset (Megatron's shuffled document/sample/shuffle indices) and BlendedDataset
// (a weighted mix of other sources), so the trainer takes any of them.
//
// Ownership: implementations are immutable after construction; const methods are safe from any
// thread.
#pragma once

#include <cstdint>
#include <string>

namespace mtnlg {

class SampleSource {
 public:
  virtual ~SampleSource() = default;

  // Number of samples: sample(i) is defined for 0 <= i < size(). A source that repeats
  // forever (SequentialGPTDataset) returns INT64_MAX.
  virtual int64_t size() const = 0;
  virtual int64_t seq_length() const = 0;
  // Writes the S+1 tokens of sample i to out[0, S+1). Precondition (checked): 0 <= i < size().
  virtual void sample(int64_t i, int32_t* out) const = 0;
  // Reads every token the source can return; throws invalid_argument naming the .bin file and
  // the fix for the first id outside [0, vocab_size).
  virtual void check_vocab(int64_t vocab_size) const = 0;
  // Everything the source's samples depend on, as JSON text: the key of index caches built
  // over it (BlendedDataset) and a line for the logs.
  virtual std::string description() const = 0;
};

}  // namespace mtnlg
