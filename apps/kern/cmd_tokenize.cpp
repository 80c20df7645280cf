// kern tokenize: text <-> token ids with a HF tokenizer.json, through stdin and stdout.
//   kern tokenize --tokenizer FILE            UTF-8 text in, ids out (space separated)
//   kern tokenize --tokenizer FILE --json     JSON array of strings in, JSON array of id arrays out
//   kern tokenize --tokenizer FILE --decode   ids in (space separated), text out
//   ... --decode --json                       JSON array of id arrays in, JSON array of strings out
#include <charconv>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "command.hpp"
#include "kern/base/error.hpp"
#include "kern/base/json.hpp"
#include "kern/tokenizer/tokenizer.hpp"

namespace kern::cli::cmd_tokenize {
namespace {

struct Options {
  std::string tokenizer;
  bool json = false;
  bool decode = false;
};

std::string read_stdin() {
  std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  if (std::cin.bad()) fail(ErrorKind::Io, "cannot read standard input");
  return text;
}

void write_stdout(std::string_view bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size())
    fail(ErrorKind::Io, "cannot write standard output");
}

// Space-separated decimal ids ("1 2 3", any whitespace).
std::vector<tokenizer::TokenId> parse_ids(std::string_view text) {
  std::vector<tokenizer::TokenId> ids;
  std::size_t i = 0, index = 0;
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  while (true) {
    while (i < text.size() && space(text[i])) ++i;
    if (i == text.size()) break;
    std::size_t end = i;
    while (end < text.size() && !space(text[end])) ++end;
    const std::string_view word = text.substr(i, end - i);
    tokenizer::TokenId id = 0;
    const auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), id);
    if (ec != std::errc() || ptr != word.data() + word.size()) {
      fail(ErrorKind::Api, "stdin: \"{}\" (item {}) is not a token id", word, index);
    }
    ids.push_back(id);
    i = end;
    ++index;
  }
  return ids;
}

std::vector<tokenizer::TokenId> json_ids(const Json& j, std::string_view path) {
  if (!j.is_array()) fail(ErrorKind::Api, "stdin: {} must be an array of token ids", path);
  std::vector<tokenizer::TokenId> ids;
  for (std::size_t k = 0; k < j.size(); ++k) {
    const Json& v = j[k];
    if (!v.is_number_integer() || v.get<std::int64_t>() < INT32_MIN || v.get<std::int64_t>() > INT32_MAX) {
      fail(ErrorKind::Api, "stdin: {} is not a token id", json_path_index(path, k));
    }
    ids.push_back(static_cast<tokenizer::TokenId>(v.get<std::int64_t>()));
  }
  return ids;
}

int run(const Options& o) {
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_file(o.tokenizer);
  const std::string input = read_stdin();
  if (!o.json) {
    if (o.decode) {
      write_stdout(tok.decode(parse_ids(input)));
      return 0;
    }
    std::string out;
    for (tokenizer::TokenId id : tok.encode(input)) {
      if (!out.empty()) out += ' ';
      out += std::to_string(id);
    }
    out += '\n';
    write_stdout(out);
    return 0;
  }
  const Json doc = parse_json_strict(input, {ErrorKind::Api, "stdin", 16});
  if (!doc.is_array()) {
    fail(ErrorKind::Api, "stdin: expected a JSON array of {}", o.decode ? "id arrays" : "strings");
  }
  Json out = Json::array();
  for (std::size_t k = 0; k < doc.size(); ++k) {
    const std::string path = json_path_index("", k);
    if (o.decode) {
      try {
        out.push_back(tok.decode(json_ids(doc[k], path)));
      } catch (const Error& e) {
        throw Error::call(fmt::format("stdin {}", path), e);
      }
    } else {
      if (!doc[k].is_string()) fail(ErrorKind::Api, "stdin: {} is not a string", path);
      try {
        out.push_back(tok.encode(doc[k].get_ref<const std::string&>()));
      } catch (const Error& e) {
        throw Error::call(fmt::format("stdin {}", path), e);
      }
    }
  }
  write_stdout(out.dump() + "\n");
  return 0;
}

Runner setup(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("tokenize", "Encode UTF-8 text from stdin to token ids, or decode ids to text");
  sub->add_option("--tokenizer", opts->tokenizer, "tokenizer.json (or a directory holding one)")->required();
  sub->add_flag("--json", opts->json, "stdin is a JSON array of strings (or, with --decode, of id arrays); print JSON");
  sub->add_flag("--decode", opts->decode, "read token ids and print the text they decode to");
  return [opts] { return run(*opts); };
}

Registrar reg("tokenize", setup);

}  // namespace
}  // namespace kern::cli::cmd_tokenize
