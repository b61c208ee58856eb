#include "checkpoint/shard_io.h"

#include "checkpoint/tokenizer_files.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "checkpoint/json_parse.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/tokenizer_files.h"
#include "core/kernels/bf16_math.h"
#include "core/status.h"

namespace mtnlg {

namespace fs = std::filesystem;

namespace {

constexpr const char* kTensorRankKey = "mtnlg.tensor_rank";
constexpr const char* kPipelineRankKey = "mtnlg.pipeline_rank";
constexpr const char* kDataRankKey = "mtnlg.data_rank";

std::string ints(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s + "]";
}

std::string slice_json(const StateTensor& s) {
  return "{\"global_shape\":" + ints(s.global_shape) + ",\"start\":" + ints(s.start) +
         ",\"shape\":" + ints(s.shape) + ",\"flat\":[" + std::to_string(s.flat_begin) + "," +
         std::to_string(s.flat_end) + "],\"valid_rows\":" + std::to_string(s.valid_rows) + "}";
}

// A tensor's place in the global 2-D view [rows, cols] (1-D tensors are one row).
struct Box2 {
  int64_t r0 = 0, rows = 1, c0 = 0, cols = 1;
};

Box2 box2(const StateTensor& s) {
  Box2 b;
  if (s.shape.size() == 1) {
    b.c0 = s.start[0];
    b.cols = s.shape[0];
  } else if (s.shape.size() == 2) {
    b.r0 = s.start[0];
    b.rows = s.shape[0];
    b.c0 = s.start[1];
    b.cols = s.shape[1];
  } else {
    MTNLG_CHECK_MSG(s.shape.empty(), "state tensor " << s.name << " has " << s.shape.size()
                                                     << " dimensions; at most 2 are supported");
  }
  return b;
}

}  // namespace

std::string model_file_name(int64_t tensor_rank, int64_t pipeline_rank) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "model_tp%02lld_pp%03lld.safetensors",
                static_cast<long long>(tensor_rank), static_cast<long long>(pipeline_rank));
  return buf;
}

std::string optim_file_name(int64_t tensor_rank, int64_t pipeline_rank, int64_t data_rank) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "optim_tp%02lld_pp%03lld_dp%03lld.safetensors",
                static_cast<long long>(tensor_rank), static_cast<long long>(pipeline_rank),
                static_cast<long long>(data_rank));
  return buf;
}

FileDigest write_shard_file(const std::string& path, const std::vector<StateTensor>& state,
                            const ShardCoords& coords) {
  SafetensorsWriter w(path);
  w.add_metadata(kTensorRankKey, std::to_string(coords.tensor));
  w.add_metadata(kPipelineRankKey, std::to_string(coords.pipeline));
  w.add_metadata(kDataRankKey, std::to_string(coords.data));
  for (const StateTensor& s : state) {
    MTNLG_CHECK_EQ(s.tensor.numel(), s.flat_end - s.flat_begin);
    const bool whole = s.flat_begin == 0 && s.flat_end == shape_numel(s.shape);
    w.add(s.name, s.tensor.view(whole ? s.shape : Shape{s.flat_end - s.flat_begin}));
    w.add_metadata(s.name, slice_json(s));
  }
  w.commit();
  return FileDigest{w.file_bytes(), w.checksum()};
}

struct ShardIndex::Piece {
  size_t file = 0;
  std::string name;
  StateTensor where;                    // tensor unset: the bytes stay in the file
  std::pair<int64_t, int64_t> replica;  // (tensor rank, pipeline rank) of the file
};

struct ShardIndex::File {
  ManifestFile info;
  std::string path;
  std::unique_ptr<SafetensorsFile> st;
  bool sum_checked = false;
  ShardCoords coords;
};

ShardIndex::ShardIndex(std::string dir, const CheckpointManifest& manifest)
    : dir_(std::move(dir)), manifest_(manifest) {
  for (const ManifestFile& f : manifest_.files) {
    if (!is_shard_file(f)) continue;  // the tokenizer's files: verify_other_files checks them
    auto file = std::make_unique<File>();
    file->info = f;
    file->path = (fs::path(dir_) / f.name).string();
    files_.push_back(std::move(file));
  }
}

ShardIndex::~ShardIndex() = default;

ShardIndex::File& ShardIndex::open(size_t index) {
  File& f = *files_[index];
  if (f.st) return f;
  struct stat st {};
  if (::stat(f.path.c_str(), &st) != 0) {
    if (errno == ENOENT)
      throw not_found(
          "the checkpoint's shard is missing (the manifest lists it); restore it or "
          "load an earlier checkpoint",
          f.path);
    throw io_error(std::string("cannot stat: ") + std::strerror(errno), f.path);
  }
  if (st.st_size != f.info.bytes)
    throw corruption("the shard is " + std::to_string(st.st_size) +
                         " bytes but the manifest says " + std::to_string(f.info.bytes) +
                         " (truncated or replaced); restore it or load an earlier checkpoint",
                     f.path);
  f.st = std::make_unique<SafetensorsFile>(f.path);
  const auto& md = f.st->metadata();
  const auto coord = [&](const char* key) -> int64_t {
    const auto it = md.find(key);
    if (it == md.end())
      throw corruption(
          std::string("the shard has no ") + key + " metadata: not an mtnlg-train checkpoint shard",
          f.path);
    return std::stoll(it->second);
  };
  f.coords = ShardCoords{coord(kTensorRankKey), coord(kPipelineRankKey), coord(kDataRankKey)};
  for (const SafetensorsEntry& e : f.st->entries()) {
    const auto it = md.find(e.name);
    if (it == md.end()) throw corruption("tensor '" + e.name + "' has no slice metadata", f.path);
    const JsonValue v = parse_json(it->second, f.path + " metadata of " + e.name);
    const auto int_list = [&](const char* key) {
      const JsonValue* a = v.find(key);
      std::vector<int64_t> out;
      if (a == nullptr || !a->is_array())
        throw corruption("tensor '" + e.name + "' metadata has no list " + key, f.path);
      for (const JsonValue& x : a->items) {
        int64_t n = 0;
        if (!x.to_int64(&n) || n < 0)
          throw corruption("tensor '" + e.name + "' metadata " + key + " is not integers", f.path);
        out.push_back(n);
      }
      return out;
    };
    Piece p;
    p.file = index;
    p.name = e.name;
    p.where.name = e.name;
    p.where.global_shape = int_list("global_shape");
    p.where.start = int_list("start");
    p.where.shape = int_list("shape");
    const std::vector<int64_t> flat = int_list("flat");
    const JsonValue* valid = v.find("valid_rows");
    if (valid == nullptr || !valid->to_int64(&p.where.valid_rows))
      throw corruption("tensor '" + e.name + "' metadata has no valid_rows", f.path);
    const size_t nd = p.where.global_shape.size();
    bool ok = nd <= 2 && p.where.start.size() == nd && p.where.shape.size() == nd &&
              flat.size() == 2 && flat[0] <= flat[1] && flat[1] <= shape_numel(p.where.shape) &&
              flat[1] - flat[0] == shape_numel(e.shape);
    for (size_t d = 0; ok && d < nd; ++d)
      ok = p.where.start[d] + p.where.shape[d] <= p.where.global_shape[d];
    if (!ok)
      throw corruption("tensor '" + e.name + "' metadata " + it->second +
                           " does not fit its shape " + shape_str(e.shape),
                       f.path);
    p.where.flat_begin = flat[0];
    p.where.flat_end = flat[1];
    p.replica = {f.coords.tensor, f.coords.pipeline};
    pieces_[e.name].push_back(std::move(p));
  }
  return f;
}

void ShardIndex::open_files(const std::string& prefix) {
  if (opened_prefixes_[prefix]) return;
  for (size_t i = 0; i < files_.size(); ++i)
    if (files_[i]->info.name.rfind(prefix, 0) == 0) open(i);
  opened_prefixes_[prefix] = true;
}

void ShardIndex::check_sum(File& f) {
  if (f.sum_checked) return;
  // Over the mapping: the one read of the file from disk, which the copies then find cached.
  Checksum sum;
  const std::span<const std::byte> bytes = f.st->file_bytes();
  sum.update(bytes.data(), bytes.size());
  const FileDigest d{static_cast<int64_t>(bytes.size()), sum.digest()};
  if (d.bytes != f.info.bytes || d.xxh3 != f.info.xxh3)
    throw corruption("the shard's checksum is " + checksum_text(d.xxh3) +
                         " but the manifest says " + checksum_text(f.info.xxh3) +
                         " (the file is damaged); restore it or load an earlier checkpoint",
                     f.path);
  f.sum_checked = true;
}

std::vector<const ShardIndex::Piece*> ShardIndex::pieces_of(const std::string& name) {
  open_files(name.rfind("exp_avg", 0) == 0 ? "optim_" : "model_");
  std::vector<const Piece*> out;
  const auto it = pieces_.find(name);
  if (it == pieces_.end()) return out;
  // Replicated copies of one box (a replicated parameter on every tensor rank, the tied embedding
  // on the first and last stage): keep one replica's pieces (prefer_replica()).
  const auto same_box = [](const StateTensor& a, const StateTensor& b) {
    return a.start == b.start && a.shape == b.shape;
  };
  const auto rank_of = [&](const Piece& p) {
    // The preferred replica sorts first.
    return std::pair{p.replica != preferred_, p.replica};
  };
  for (const Piece& p : it->second) {
    bool best = true;
    for (const Piece& q : it->second)
      if (same_box(p.where, q.where) && rank_of(q) < rank_of(p)) best = false;
    if (best) out.push_back(&p);
  }
  return out;
}

std::vector<std::string> ShardIndex::names(const std::string& file_prefix) {
  open_files(file_prefix);
  std::vector<std::string> out;
  for (const auto& [name, pieces] : pieces_)
    for (const Piece& p : pieces)
      if (files_[p.file]->info.name.rfind(file_prefix, 0) == 0) {
        out.push_back(name);
        break;
      }
  return out;
}

Shape ShardIndex::global_shape(const std::string& name) {
  const auto pieces = pieces_of(name);
  if (pieces.empty()) throw not_found("the checkpoint has no tensor '" + name + "'", dir_);
  return pieces.front()->where.global_shape;
}

void ShardIndex::verify_all() {
  for (size_t i = 0; i < files_.size(); ++i) check_sum(open(i));
}

namespace {

// One element of checkpoint state as a double (F32, F64, BF16 or F16 bytes, little endian).
double load_element(safetensors::DType dtype, const std::byte* at) {
  if (dtype == safetensors::DType::kF64) {
    double x;
    std::memcpy(&x, at, sizeof x);
    return x;
  }
  if (dtype == safetensors::DType::kBF16) {
    uint16_t h;
    std::memcpy(&h, at, sizeof h);
    return bf16_to_f32(h);
  }
  if (dtype == safetensors::DType::kF16) {
    uint16_t h;
    std::memcpy(&h, at, sizeof h);
    return f16_to_f32(h);
  }
  float x;
  std::memcpy(&x, at, sizeof x);
  return x;
}

void store_element(DType dtype, char* at, double x) {
  if (dtype == DType::kF64) {
    std::memcpy(at, &x, sizeof x);
  } else if (dtype == DType::kBF16) {
    const uint16_t h = f32_to_bf16(static_cast<float>(x));
    std::memcpy(at, &h, sizeof h);
  } else if (dtype == DType::kF16) {
    const uint16_t h = f32_to_f16(static_cast<float>(x));
    std::memcpy(at, &h, sizeof h);
  } else {
    const auto f = static_cast<float>(x);
    std::memcpy(at, &f, sizeof f);
  }
}

}  // namespace

void ShardIndex::read(const StateTensor& target, Tensor& out) {
  MTNLG_CHECK_EQ(out.numel(), target.flat_end - target.flat_begin);
  MTNLG_CHECK(out.dtype() == DType::kF32 || out.dtype() == DType::kF64 ||
              out.dtype() == DType::kBF16 || out.dtype() == DType::kF16);
  const std::vector<const Piece*> pieces = pieces_of(target.name);
  if (pieces.empty())
    throw not_found("the checkpoint has no tensor '" + target.name +
                        "' (a missing shard, or a checkpoint of another model); load a "
                        "checkpoint of this model",
                    dir_);
  const Shape& tg = target.global_shape;
  const int64_t valid = target.valid_rows > 0 ? target.valid_rows : (tg.empty() ? 1 : tg[0]);
  const Box2 t = box2(target);
  const size_t out_item = dtype_size(out.dtype());
  auto* dst = static_cast<char*>(out.data());
  int64_t copied = 0;  // elements in valid rows
  std::string looked;
  for (const Piece* p : pieces) {
    const StateTensor& s = p->where;
    // Same tensor? Shapes must agree except the padded rows of dimension 0.
    bool shape_ok = s.global_shape.size() == tg.size();
    for (size_t d = 0; shape_ok && d < tg.size(); ++d)
      shape_ok = d == 0 && s.valid_rows > 0 ? s.valid_rows == target.valid_rows
                                            : s.global_shape[d] == tg[d];
    File& f = *files_[p->file];
    if (!shape_ok)
      throw corruption("tensor '" + target.name + "' is " + shape_str(s.global_shape) +
                           " in the checkpoint but " + shape_str(tg) +
                           " in this model; load a checkpoint of the same model shape",
                       f.path);
    if (!looked.empty()) looked += ", ";
    looked += f.info.name;
    const Box2 b = box2(s);
    const int64_t s_row_lo = b.r0 + s.flat_begin / b.cols;
    const int64_t s_row_hi =
        s.flat_end == s.flat_begin ? s_row_lo : b.r0 + (s.flat_end - 1) / b.cols + 1;
    const int64_t t_row_lo = t.r0 + target.flat_begin / t.cols;
    const int64_t t_row_hi =
        target.flat_end == target.flat_begin ? t_row_lo : t.r0 + (target.flat_end - 1) / t.cols + 1;
    const int64_t r_lo = std::max(s_row_lo, t_row_lo), r_hi = std::min(s_row_hi, t_row_hi);
    const int64_t c_lo = std::max(b.c0, t.c0), c_hi = std::min(b.c0 + b.cols, t.c0 + t.cols);
    if (r_lo >= r_hi || c_lo >= c_hi) continue;
    check_sum(f);
    const SafetensorsEntry& e = f.st->entry(p->name);
    const auto src_bytes = f.st->raw(p->name);
    const safetensors::DType sd = e.dtype;
    const size_t s_item = safetensors::dtype_info(sd).itemsize;
    // Any of F32, F64, BF16 and F16 into any of f32, f64, bf16 and f16: a checkpoint saved in
    // one precision loads in another (rounded to nearest even; F64 -> bf16/f16 through float).
    const bool same = (sd == safetensors::DType::kF32 && out.dtype() == DType::kF32) ||
                      (sd == safetensors::DType::kF64 && out.dtype() == DType::kF64) ||
                      (sd == safetensors::DType::kBF16 && out.dtype() == DType::kBF16) ||
                      (sd == safetensors::DType::kF16 && out.dtype() == DType::kF16);
    if (sd != safetensors::DType::kF32 && sd != safetensors::DType::kF64 &&
        sd != safetensors::DType::kBF16 && sd != safetensors::DType::kF16)
      throw unsupported("tensor '" + p->name + "' is " +
                            std::string(safetensors::dtype_info(sd).name) +
                            "; this build reads F32, F64, BF16 and F16 checkpoint state",
                        f.path);
    for (int64_t r = r_lo; r < r_hi; ++r) {
      // Columns c with the source flat index in [flat_begin, flat_end) and the target's too.
      const int64_t s_base = (r - b.r0) * b.cols - b.c0;  // source flat = s_base + c
      const int64_t t_base = (r - t.r0) * t.cols - t.c0;
      const int64_t lo = std::max({c_lo, s.flat_begin - s_base, target.flat_begin - t_base});
      const int64_t hi = std::min({c_hi, s.flat_end - s_base, target.flat_end - t_base});
      if (lo >= hi) continue;
      const int64_t n = hi - lo;
      const std::byte* from =
          src_bytes.data() + static_cast<size_t>(s_base + lo - s.flat_begin) * s_item;
      char* to = dst + static_cast<size_t>(t_base + lo - target.flat_begin) * out_item;
      if (same) {
        std::memcpy(to, from, static_cast<size_t>(n) * out_item);
      } else {
        for (int64_t i = 0; i < n; ++i) {
          const double x = load_element(sd, from + static_cast<size_t>(i) * s_item);
          store_element(out.dtype(), to + static_cast<size_t>(i) * out_item, x);
        }
      }
      if (r < valid) copied += n;
    }
  }
  // Elements of the target in valid rows.
  int64_t expected = 0;
  {
    const int64_t last_valid_flat =
        std::min(target.flat_end, std::max<int64_t>(0, (valid - t.r0) * t.cols));
    expected = std::max<int64_t>(0, last_valid_flat - target.flat_begin);
  }
  if (copied != expected)
    throw not_found("the checkpoint holds " + std::to_string(copied) + " of the " +
                        std::to_string(expected) + " elements of '" + target.name +
                        "' this rank needs (looked in " + looked +
                        "): a shard is missing; restore it or load an earlier checkpoint",
                    dir_);
}

}  // namespace mtnlg

#include "core/backend.h"

namespace mtnlg {

void load_state(ShardIndex& index, const std::vector<StateTensor>& targets, Backend& backend) {
  for (const StateTensor& t : targets) {
    if (t.tensor.device() == Device::kCPU) {  // straight into place
      Tensor flat = t.tensor.view({t.flat_end - t.flat_begin});
      index.read(t, flat);
      continue;
    }
    Tensor host = Tensor::cpu({t.flat_end - t.flat_begin}, t.tensor.dtype());
    index.read(t, host);
    Tensor dst = t.tensor;
    backend.copy(dst, host.view(t.tensor.shape()));
  }
}

}  // namespace mtnlg
