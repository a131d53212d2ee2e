// The .npy header's 'descr' strings of ein's element types, shared by the
// reader and the writer.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ein/types.hpp"

namespace ein::npy {

const char *descrOf(ElementType type);  // "<f4"; "" for BF16
std::optional<ElementType> typeOfDescr(std::string_view descr);
std::string supportedDescrs();  // "<f2, <f4, ..."

}  // namespace ein::npy
