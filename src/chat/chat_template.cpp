#include "kern/chat/chat_template.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "kern/base/error.hpp"
#include "kern/base/file.hpp"
#include "kern/base/json.hpp"

namespace kern::chat {

namespace {

namespace fs = std::filesystem;

std::optional<std::string> special_token(const Json& config, const char* key, const std::string& what) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    const auto content = it->find("content");
    if (content != it->end() && content->is_string()) return content->get<std::string>();
  }
  fail(ErrorKind::Template, "{}: {} must be a string or an object with a string \"content\"", what, key);
}

std::string config_template(const Json& config, const std::string& what) {
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null())
    fail(ErrorKind::Template, "{} has no chat_template (and there is no chat_template.jinja beside it)", what);
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const Json& entry : *it) {
      if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
          !entry["template"].is_string())
        fail(ErrorKind::Template, "{}: chat_template list entries must be {{\"name\", \"template\"}} objects", what);
      if (entry["name"] == "default") return entry["template"].get<std::string>();
    }
    fail(ErrorKind::Template, "{}: chat_template lists several templates and none is named \"default\"", what);
  }
  fail(ErrorKind::Template, "{}: chat_template must be a string or a list of {{name, template}}", what);
}

}  // namespace

ChatTemplate ChatTemplate::load(const std::string& path) {
  const fs::path p(path);
  const fs::path dir = fs::is_directory(p) ? p : p.parent_path();
  const fs::path config_path = fs::is_directory(p) ? p / "tokenizer_config.json" : p;
  const fs::path jinja_path = dir / "chat_template.jinja";
  Json config = Json::object();
  if (fs::exists(config_path)) {
    config = parse_json_strict(read_file(config_path.string()), {ErrorKind::Template, config_path.string(), 64});
    if (!config.is_object()) fail(ErrorKind::Template, "{} is not a JSON object", config_path.string());
  } else if (!fs::exists(jinja_path)) {
    fail(ErrorKind::Io, "{}: neither tokenizer_config.json nor chat_template.jinja is there", path);
  }
  const bool from_file = fs::exists(jinja_path);
  const std::string source = from_file ? read_file(jinja_path.string()) : config_template(config, config_path.string());
  const std::string name = from_file ? jinja_path.string() : config_path.string() + " chat_template";
  return from_source(source, special_token(config, "bos_token", config_path.string()),
                     special_token(config, "eos_token", config_path.string()), name);
}

ChatTemplate ChatTemplate::from_source(std::string_view source, std::optional<std::string> bos_token,
                                       std::optional<std::string> eos_token, std::string name) {
  ChatTemplate t;
  t.template_ = jinja::Template::parse(source, std::move(name));
  t.source_ = std::string(source);
  t.bos_ = std::move(bos_token);
  t.eos_ = std::move(eos_token);
  return t;
}

std::string ChatTemplate::render(const nlohmann::ordered_json& request, const jinja::RenderLimits& limits) const {
  using OJson = nlohmann::ordered_json;
  if (!request.is_object()) fail(ErrorKind::Api, "chat request: expected a JSON object with \"messages\"");
  const auto messages = request.find("messages");
  if (messages == request.end() || !messages->is_array())
    fail(ErrorKind::Api, "chat request: \"messages\" must be an array");
  for (std::size_t i = 0; i < messages->size(); ++i)
    if (!(*messages)[i].is_object()) fail(ErrorKind::Api, "chat request: messages[{}] is not an object", i);
  const auto tools = request.find("tools");
  if (tools != request.end() && !tools->is_null()) {
    if (!tools->is_array()) fail(ErrorKind::Api, "chat request: \"tools\" must be an array or null");
    for (std::size_t i = 0; i < tools->size(); ++i)
      if (!(*tools)[i].is_object()) fail(ErrorKind::Api, "chat request: tools[{}] is not a JSON schema object", i);
  }
  // The keyword order transformers renders with: its named arguments, the special tokens, then kwargs.
  OJson globals = OJson::object();
  globals["messages"] = *messages;
  globals["tools"] = tools == request.end() ? OJson() : *tools;
  globals["documents"] = request.contains("documents") ? request["documents"] : OJson();
  globals["add_generation_prompt"] =
      request.contains("add_generation_prompt") ? request["add_generation_prompt"] : OJson(false);
  if (bos_) globals["bos_token"] = *bos_;
  if (eos_) globals["eos_token"] = *eos_;
  for (const auto& [key, value] : request.items())
    if (key != "messages" && key != "tools" && key != "documents" && key != "add_generation_prompt")
      globals[key] = value;
  jinja::Value values;
  try {
    values = jinja::from_json(globals);
  } catch (const jinja::Fault& f) {
    fail(ErrorKind::Api, "chat request: {}", f.message);
  }
  return template_.render(values, limits);
}

}  // namespace kern::chat
