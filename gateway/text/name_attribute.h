// The `name="..."` attribute of the MiniMax tool-call tags (<invoke name="f">,
// <parameter name="p">), as the models write it: double, single or no quotes, spaces around '='.
#pragma once

#include <string>
#include <string_view>

namespace m3::text {

// `s` is the text after the tag keyword up to and including '>' (e.g. ` name="f">`). Returns
// false when it does not have that shape or the name is empty.
bool ParseNameAttribute(std::string_view s, std::string& name);

}  // namespace m3::text
