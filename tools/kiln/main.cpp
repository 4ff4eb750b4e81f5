// The `kiln` command-line tool: `kiln info` (build and runtime facts, settings), `kiln tokenize` (a
// text file as an llm.c token shard), `kiln train` (a GPT on a text file or a token shard, saved to a
// directory) and `kiln sample` (text from such a directory). Any problem is one line on stderr and exit
// status 2.
#include <kiln/kiln.h>

#include <cstdio>
#include <string>

#include "commands.h"

namespace {

const char* kUsage =
    "usage: kiln <command> [options]\n"
    "commands:\n"
    "  info                                  version, threads, C compiler, kernel cache, devices and\n"
    "                                        every KILN_* setting\n"
    "  tokenize --text FILE [--out DIR]     FILE's characters as ids in an llm.c token shard,\n"
    "                                        DIR/train.bin, with DIR/vocab.txt (out dir kiln-tokens)\n"
    "  train (--text FILE | --tokens SHARD) [--steps N] [--minutes M] [--out DIR] [--dtype f32|bf16]\n"
    "                                        train a character-level GPT on FILE, or on the ids of an\n"
    "                                        llm.c token shard (its vocabulary: vocab.txt beside it, else\n"
    "                                        the largest id + 1) (default: 500 steps or 5 minutes,\n"
    "                                        whichever ends first; out dir kiln-model); saves\n"
    "                                        DIR/model.safetensors, DIR/config.txt and the vocab.txt;\n"
    "                                        bf16: matmuls in bf16 under autocast, weights stay f32\n"
    "  sample --model DIR [--tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]\n"
    "         [--prompt TEXT]                print N (default 200, at most 100000) sampled characters\n"
    "                                        after TEXT, each as it is drawn (top-p in (0, 1])\n"
    "  --help                                this text\n";

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (cmd == "info") return kiln::cli::info(argc, argv);
    if (cmd == "train") return kiln::cli::train(argc, argv);
    if (cmd == "sample") return kiln::cli::sample(argc, argv);
    if (cmd == "tokenize") return kiln::cli::tokenize(argc, argv);
    std::fprintf(stderr, "%s%s",
                 cmd.empty() ? "kiln: no command given\n" : ("kiln: unknown command '" + cmd + "'\n").c_str(),
                 kUsage);
    return 2;
  } catch (const std::exception& e) {  // kiln::Error, and anything a library below lets out
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
