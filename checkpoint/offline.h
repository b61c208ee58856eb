// Offline checkpoint work (mtnlg-ckpt): describe, verify, export to Hugging Face GPT-2, and
// reshard to another layout. Each reads through ShardIndex, the code the trainer loads with, so a
// checkpoint converted offline is the checkpoint the trainer would have resharded online.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace mtnlg {

// PATH (an iter_NNNNNNN directory or a root) to its checkpoint directory; not_found if none.
std::string require_checkpoint(const std::string& path);

// Iteration, layout, data position, files and every model tensor with its global shape.
void inspect_checkpoint(const std::string& path, std::ostream& out);

// Every listed file present with its recorded size and checksum; the manifest parses. Throws the
// first problem (naming the file); prints one line per file checked.
void verify_checkpoint(const std::string& path, std::ostream& out);

// The whole model gathered from the shards into one Hugging Face GPT-2 safetensors file
// (vocabulary unpadded, Conv1D layout; model.init_from reads it back) and config.json beside it.
void export_checkpoint_hf_gpt2(const std::string& path, const std::string& output);

// The checkpoint resharded to (tensor, pipeline, data) with ZeRO stage `zero_stage` (-1: the
// source's), written and committed under `out_root` as the same iteration.
void convert_checkpoint(const std::string& path, const std::string& out_root, int64_t tensor,
                        int64_t pipeline, int64_t data, int zero_stage);

}  // namespace mtnlg
