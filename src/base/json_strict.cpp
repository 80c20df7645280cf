#include <optional>
#include <vector>

#include "kern/base/json.hpp"

namespace kern::base {

std::string json_path_key(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  std::string out(parent);
  out += '.';
  out += key;
  return out;
}

std::string json_path_index(std::string_view parent, std::size_t index) { return fmt::format("{}[{}]", parent, index); }

TextPosition text_position(std::string_view text, std::size_t offset) {
  TextPosition p;
  if (offset > text.size()) offset = text.size();
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++p.line;
      p.column = 1;
    } else {
      ++p.column;
    }
  }
  return p;
}

namespace {

// Builds the DOM itself so it can see every key as it arrives (nlohmann's own DOM builder keeps
// the last duplicate silently) and track the JSON path for messages.
class StrictBuilder : public nlohmann::json_sax<Json> {
 public:
  explicit StrictBuilder(std::size_t max_depth) : max_depth_(max_depth) {}

  bool null() override { return put(Json(nullptr)); }
  bool boolean(bool v) override { return put(Json(v)); }
  bool number_integer(number_integer_t v) override { return put(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return put(Json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return put(Json(v)); }
  bool string(string_t& v) override { return put(Json(std::move(v))); }
  bool binary(binary_t& v) override { return put(Json::binary(std::move(v))); }

  bool start_object(std::size_t) override { return open(Json::object()); }
  bool start_array(std::size_t) override { return open(Json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& k) override {
    Frame& f = frames_.back();
    if (f.node->contains(k)) {
      error_ = fmt::format("duplicate key \"{}\" at {}", k, json_path_key(path_of_frame(), k));
      return false;
    }
    f.key = std::move(k);
    return true;
  }

  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& ex) override {
    syntax_offset_ = position;
    syntax_message_ = ex.what();
    (void)last_token;
    return false;
  }

  Json take() { return std::move(root_); }
  const std::string& error() const { return error_; }
  std::optional<std::size_t> syntax_offset() const { return syntax_offset_; }
  const std::string& syntax_message() const { return syntax_message_; }

 private:
  struct Frame {
    Json* node;
    std::string key;   // pending key when node is an object
    std::string path;  // path of node itself
  };

  std::string path_of_frame() const { return frames_.empty() ? std::string() : frames_.back().path; }

  // Where the next value goes, and its path.
  std::pair<Json*, std::string> slot() {
    if (frames_.empty()) return {&root_, std::string()};
    Frame& f = frames_.back();
    if (f.node->is_object()) {
      Json& v = (*f.node)[f.key];
      return {&v, json_path_key(f.path, f.key)};
    }
    std::size_t i = f.node->size();
    f.node->push_back(Json());
    return {&f.node->back(), json_path_index(f.path, i)};
  }

  bool put(Json v) {
    auto [dst, path] = slot();
    *dst = std::move(v);
    return true;
  }

  bool open(Json v) {
    if (frames_.size() >= max_depth_) {
      error_ = fmt::format("nesting deeper than {} levels at {}", max_depth_,
                           path_of_frame().empty() ? "<root>" : path_of_frame());
      return false;
    }
    auto [dst, path] = slot();
    *dst = std::move(v);
    frames_.push_back(Frame{dst, {}, std::move(path)});
    return true;
  }

  bool close() {
    frames_.pop_back();
    return true;
  }

  std::size_t max_depth_;
  Json root_;
  std::vector<Frame> frames_;
  std::string error_;
  std::optional<std::size_t> syntax_offset_;
  std::string syntax_message_;
};

}  // namespace

Json parse_json_strict(std::string_view text, const StrictJsonOptions& options) {
  StrictBuilder builder(options.max_depth);
  bool ok = false;
  try {
    ok = Json::sax_parse(text.begin(), text.end(), &builder, nlohmann::detail::input_format_t::json, true, false);
  } catch (const nlohmann::json::exception& e) {
    throw Error(options.kind, fmt::format("{}: {}", options.what, e.what()));
  }
  if (ok) return builder.take();
  if (!builder.error().empty()) throw Error(options.kind, fmt::format("{}: {}", options.what, builder.error()));
  std::size_t offset = builder.syntax_offset().value_or(0);
  // nlohmann reports the count of bytes read; the offending byte is the last one read.
  TextPosition p = text_position(text, offset > 0 ? offset - 1 : 0);
  std::string msg = builder.syntax_message();
  // Drop nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 2: " prefix.
  if (auto colon = msg.find(": "); colon != std::string::npos && msg.rfind("[json.exception", 0) == 0)
    msg = msg.substr(colon + 2);
  throw Error(options.kind,
              fmt::format("{}: syntax error at line {}, column {}: {}", options.what, p.line, p.column, msg));
}

}  // namespace kern::base
