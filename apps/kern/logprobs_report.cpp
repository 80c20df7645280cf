#include "logprobs_report.hpp"

#include <fmt/format.h>

namespace kern::cli {
namespace {

Json token_entry(std::int64_t id, float logprob, const tokenizer::Tokenizer* tok) {
  Json e = Json::object();
  e["id"] = id;
  e["logprob"] = logprob;
  if (tok && id >= 0 && tok->contains(static_cast<tokenizer::TokenId>(id))) {
    const tokenizer::TokenId t = static_cast<tokenizer::TokenId>(id);
    e["token"] = tok->decode(std::span<const tokenizer::TokenId>(&t, 1));  // lossy: valid UTF-8 for JSON
    Json bytes = Json::array();
    for (unsigned char c : tok->token_bytes(t)) bytes.push_back(static_cast<int>(c));
    e["bytes"] = std::move(bytes);
  } else {
    e["token"] = fmt::format("<{}>", id);
    e["bytes"] = nullptr;
  }
  return e;
}

}  // namespace

Json logprobs_json(const std::vector<std::int64_t>& tokens, const std::vector<driver::TokenLogprobs>& logprobs,
                   const tokenizer::Tokenizer* tok) {
  Json content = Json::array();
  for (std::size_t i = 0; i < tokens.size() && i < logprobs.size(); ++i) {
    Json e = token_entry(tokens[i], logprobs[i].chosen, tok);
    Json top = Json::array();
    for (const auto& [id, lp] : logprobs[i].top) top.push_back(token_entry(id, lp, tok));
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  return content;
}

std::string logprobs_lines(const Json& content) {
  std::string out;
  for (std::size_t i = 0; i < content.size(); ++i) {
    const Json& e = content[i];
    out += fmt::format("logprob[{}] {} {:?} {:.4f}", i, e["id"].get<std::int64_t>(), e["token"].get<std::string>(),
                       e["logprob"].get<double>());
    for (const Json& t : e["top_logprobs"])
      out += fmt::format(" | {} {:?} {:.4f}", t["id"].get<std::int64_t>(), t["token"].get<std::string>(),
                         t["logprob"].get<double>());
    out += '\n';
  }
  return out;
}

}  // namespace kern::cli
