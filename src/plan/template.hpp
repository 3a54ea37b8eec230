#pragma once
// Job-script templates: {{name}} placeholders, every substituted value shell-quoted, so no
// value from a campaign file reaches a shell as code.
#include <map>
#include <string>

namespace d500 {

// Renders `text` (read from `path`, for error messages). An unknown placeholder is an error
// naming the template's line; "{{" without "}}" likewise. {{?name}} is an optional value: the
// line holding it is left out when the value is empty (e.g. "#SBATCH --account={{?account}}").
// A value with a control character (a newline) is refused: the output has exactly the
// template's lines, less the dropped ones.
// Throws naming file:line:column for a placeholder where a single-quoted word does not protect
// its value: inside double quotes, backquotes or a here-document that expands $(...).
// render_template checks this first; the planner checks a template as it loads it.
void check_placeholder_contexts(const std::string& text, const std::string& path);

std::string render_template(const std::string& text, const std::string& path,
                            const std::map<std::string, std::string>& vars);

}  // namespace d500
