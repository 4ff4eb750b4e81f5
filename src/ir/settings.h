// Every KILN_* environment variable kiln reads, declared once (name, kind, allowed values, what
// unset means, help), and their strict parsing into kiln::Settings. `kiln info` lists the table.
#pragma once
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "kiln/debug.h"

namespace kiln::ir {

struct SettingSpec {
  enum class Kind { Flag, Int, Choice, Device, Text };
  const char* name;
  Kind kind;
  std::variant<bool Settings::*, int Settings::*, std::string Settings::*> field;
  const char* unset;  // what an unset (or empty) variable means
  const char* help;
  long long min = 0, max = 0;             // Int
  std::vector<std::string> choices = {};  // Choice
};

// This machine's hardware threads (at least 1), and the most KILN_THREADS may ask for: 4 per
// hardware thread, at most 1024 (beyond that it is a typo, not a machine).
int hardware_threads();
int max_threads();

const std::vector<SettingSpec>& setting_specs();
// The spec of `name`, or nullptr.
const SettingSpec* find_setting(const std::string& name);
// What a spec allows, for messages: "0 or 1", "an integer from 1 to 8", "one of generated, tile".
std::string allowed_values(const SettingSpec& spec);
// "" when `value` is allowed (an empty value is: it means unset), else the one-line error.
std::string setting_error(const SettingSpec& spec, const std::string& value);
// Settings parsed from an environment (`get` returns nullptr for an unset variable). Throws
// kiln::Error for the first invalid variable (setting_error's message).
Settings settings_from(const std::function<const char*(const char*)>& get);

}  // namespace kiln::ir
