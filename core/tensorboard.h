// TensorBoard event files, written without TensorFlow: what Megatron-LM's --tensorboard-dir
// gives, read by TensorBoard's own reader.
//
// A file DIR/events.out.tfevents.<unix seconds>.<host>.<pid> holds TFRecords:
//   uint64 length, uint32 masked CRC-32C of those 8 bytes, the record, uint32 masked CRC-32C of it
// (little-endian; masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8), and each record is an
// `Event` protocol buffer, encoded here by hand (documented encoding; no libprotobuf):
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
// The first record is {wall_time, file_version: "brain.Event:2"}; each scalar is one Event.
// tests/core/tensorboard_test.cc checks the CRC against published vectors and
// tests/cmd/tensorboard_test.sh decodes a training run's file in Python, independently.
//
// Not thread-safe. Write errors throw io_error naming the file (is the disk full?).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace mtnlg {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), and TFRecord's mask of it.
uint32_t crc32c(const void* data, size_t bytes);
uint32_t masked_crc32c(const void* data, size_t bytes);

// The Event protocol buffers above, as bytes.
std::string tensorboard_scalar_event(double wall_time, int64_t step, std::string_view tag,
                                     float value);
std::string tensorboard_version_event(double wall_time);
// One TFRecord around `record`.
std::string tfrecord(std::string_view record);

class TensorBoardWriter {
 public:
  // Creates `dir` and a new event file in it (a resumed run adds a file; TensorBoard reads them
  // all in time order).
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  void scalar(std::string_view tag, double value, int64_t step);
  // Hands what was written to the OS, so that TensorBoard sees it while the run goes on.
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write(std::string_view bytes);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace mtnlg
