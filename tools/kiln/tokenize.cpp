// `kiln tokenize --text FILE [--out DIR]`: FILE's characters as token ids in an llm.c token shard
// (DIR/train.bin: a 256-int header, then uint16 ids) with their vocabulary (DIR/vocab.txt), for
// `kiln train --tokens DIR/train.bin`.
#include <kiln/kiln.h>

#include <cstdio>

#include "args.h"
#include "commands.h"

namespace kiln::cli {

int tokenize(int argc, char** argv) {
  Args a(argc, argv, "tokenize", {"--text", "--out"});
  if (!a.has("--text")) throw Error(a.error("--text FILE is required"));
  const std::string text = a.read_file("--text");
  data::CharTokenizer tok = data::CharTokenizer::from_text(text);
  if (tok.vocab_size() > 65536)
    throw Error(a.error(a.text("--text", "") + " has " + std::to_string(tok.vocab_size()) +
                        " distinct characters; a token shard holds ids below 65536"));
  std::vector<int64_t> ids = tok.encode(text);
  const std::string out = a.output_dir("--out", "kiln-tokens");
  data::write_llmc_tokens(out + "/train.bin", std::vector<uint16_t>(ids.begin(), ids.end()));
  tok.save(out + "/vocab.txt");
  std::printf("kiln tokenize: %zu tokens (vocabulary %lld) to %s/train.bin and %s/vocab.txt\n", ids.size(),
              static_cast<long long>(tok.vocab_size()), out.c_str(), out.c_str());
  return 0;
}

}  // namespace kiln::cli
