#include "serve/chat_fields.hpp"

#include <fmt/format.h>

#include <string>
#include <utility>

#include "kern/base/json.hpp"
#include "serve/request_fields.hpp"

namespace kern::serve::detail {

namespace {

std::string flatten_content_parts(const RequestJson& parts, const std::string& path) {
  std::string text;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const RequestJson& part = parts[i];
    const std::string at = base::json_path_index(path, i);
    if (!part.is_object()) reject(at, fmt::format("'{}' must be an object {{\"type\": \"text\", \"text\": ...}}", at));
    const RequestJson* type = field(part, "type");
    const std::string type_at = base::json_path_key(at, "type");
    if (!type || !type->is_string()) reject(type_at, fmt::format("'{}' must be a string", type_at));
    if (type->get_ref<const std::string&>() != "text")
      reject(type_at, fmt::format("'{}' is \"{}\": only \"text\" content parts are supported", type_at,
                                  type->get_ref<const std::string&>()));
    const RequestJson* t = field(part, "text");
    const std::string text_at = base::json_path_key(at, "text");
    if (!t || !t->is_string()) reject(text_at, fmt::format("'{}' must be a string", text_at));
    if (i > 0) text += '\n';
    text += t->get_ref<const std::string&>();
  }
  return text;
}

}  // namespace

RequestJson read_messages(const RequestJson& value, std::size_t max_messages) {
  if (!value.is_array()) reject("messages", "'messages' must be an array of message objects");
  if (value.empty()) reject("messages", "'messages' must not be empty");
  if (value.size() > max_messages)
    reject("messages", fmt::format("'messages' has {} entries, more than the limit of {}", value.size(), max_messages));
  RequestJson out = RequestJson::array();
  for (std::size_t i = 0; i < value.size(); ++i) {
    const RequestJson& m = value[i];
    const std::string at = base::json_path_index("messages", i);
    if (!m.is_object()) reject(at, fmt::format("'{}' must be an object", at));
    const std::string role_at = base::json_path_key(at, "role");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) reject(role_at, fmt::format("'{}' must be a string", role_at));
    if (role->get_ref<const std::string&>().empty()) reject(role_at, fmt::format("'{}' must not be empty", role_at));
    RequestJson copy = m;
    const std::string content_at = base::json_path_key(at, "content");
    if (auto c = m.find("content"); c != m.end()) {
      if (c->is_array()) {
        copy["content"] = flatten_content_parts(*c, content_at);
      } else if (!c->is_string() && !c->is_null()) {
        reject(content_at, fmt::format("'{}' must be a string, null or an array of text parts", content_at));
      }
    }
    if (auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null()) {
      const std::string tc_at = base::json_path_key(at, "tool_calls");
      if (!tc->is_array()) reject(tc_at, fmt::format("'{}' must be an array", tc_at));
      for (std::size_t k = 0; k < tc->size(); ++k)
        if (!(*tc)[k].is_object()) {
          const std::string call_at = base::json_path_index(tc_at, k);
          reject(call_at, fmt::format("'{}' must be an object", call_at));
        }
    }
    out.push_back(std::move(copy));
  }
  return out;
}

RequestJson read_tools(const RequestJson& value) {
  if (!value.is_array()) reject("tools", "'tools' must be an array of tool objects");
  for (std::size_t i = 0; i < value.size(); ++i) {
    const RequestJson& t = value[i];
    const std::string at = base::json_path_index("tools", i);
    if (!t.is_object()) reject(at, fmt::format("'{}' must be an object", at));
    const std::string type_at = base::json_path_key(at, "type");
    auto type = t.find("type");
    if (type == t.end() || !type->is_string() || type->get_ref<const std::string&>() != "function")
      reject(type_at, fmt::format("'{}' must be \"function\"", type_at));
    const std::string fn_at = base::json_path_key(at, "function");
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object()) reject(fn_at, fmt::format("'{}' must be an object", fn_at));
    const std::string name_at = base::json_path_key(fn_at, "name");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get_ref<const std::string&>().empty())
      reject(name_at, fmt::format("'{}' must be a non-empty string", name_at));
    if (auto p = fn->find("parameters"); p != fn->end() && !p->is_object() && !p->is_null()) {
      const std::string p_at = base::json_path_key(fn_at, "parameters");
      reject(p_at, fmt::format("'{}' must be an object (a JSON Schema)", p_at));
    }
  }
  return value;
}

RequestJson read_tool_choice(const RequestJson& value, const RequestJson& tools) {
  if (value.is_string()) {
    const std::string& s = value.get_ref<const std::string&>();
    if (s != "none" && s != "auto" && s != "required")
      reject("tool_choice", fmt::format("'tool_choice' must be \"none\", \"auto\", \"required\" or a function "
                                        "object, got \"{}\"",
                                        s));
    if (s == "required" && (!tools.is_array() || tools.empty()))
      reject("tool_choice", "'tool_choice' is \"required\" but the request has no tools");
    return value;
  }
  if (!value.is_object()) reject("tool_choice", "'tool_choice' must be a string or an object");
  auto type = value.find("type");
  if (type == value.end() || !type->is_string() || type->get_ref<const std::string&>() != "function")
    reject("tool_choice.type", "'tool_choice.type' must be \"function\"");
  auto fn = value.find("function");
  if (fn == value.end() || !fn->is_object()) reject("tool_choice.function", "'tool_choice.function' must be an object");
  auto name = fn->find("name");
  if (name == fn->end() || !name->is_string())
    reject("tool_choice.function.name", "'tool_choice.function.name' must be a string");
  const std::string& wanted = name->get_ref<const std::string&>();
  if (tools.is_array())
    for (const RequestJson& t : tools)
      if (t.at("function").at("name").get_ref<const std::string&>() == wanted) return value;
  reject("tool_choice.function.name",
         fmt::format("'tool_choice' names the function \"{}\", which is not among the request's tools", wanted));
}

RequestJson read_chat_template_kwargs(const RequestJson& value) {
  if (!value.is_object()) reject("chat_template_kwargs", "'chat_template_kwargs' must be an object");
  return value;
}

}  // namespace kern::serve::detail
