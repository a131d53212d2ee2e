#include "tool_support.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ein::tools {

int fail(const char *tool, const std::string &message) {
  std::fprintf(stderr, "%s: error: %s\n", tool, message.c_str());
  return 1;
}

namespace {

size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closestName(const std::string &name, const std::vector<std::string> &candidates) {
  std::string best;
  size_t bestDistance = std::max<size_t>(1, name.size() / 3) + 1;
  for (const std::string &candidate : candidates)
    if (const size_t distance = editDistance(name, candidate); distance < bestDistance && distance < name.size()) {
      best = candidate;
      bestDistance = distance;
    }
  return best;
}

std::optional<std::vector<int64_t>> parseTokenIds(const std::string &text) {
  std::vector<int64_t> ids;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string id = text.substr(start, end - start);
    char *rest = nullptr;
    errno = 0;
    const long long value = std::strtoll(id.c_str(), &rest, 10);
    if (id.empty() || *rest != '\0' || errno != 0 || value < 0) return std::nullopt;
    ids.push_back(value);
    start = end + 1;
  }
  return ids;
}

double percentile(const std::vector<double> &sorted, double p) {
  auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace ein::tools
