// autotune layers: the problems given, printed as a benchdnn batch file (what --batch reads).
#include <iostream>
#include <set>

#include "options.hpp"

namespace conv::cli {

int run_layers(const TuneArgs& t, const MiopenArgs& miopen) {
  const std::vector<conv::ConvProblem> problems = collect_problems(t, miopen);
  std::set<std::string> distinct;
  for (const auto& p : problems) distinct.insert(p.key());
  std::cout << "# " << problems.size() << " convolution(s), " << distinct.size()
            << " distinct; benchdnn conv descriptors for autotune tune --batch FILE\n";
  for (const auto& p : problems) std::cout << conv::to_descriptor(p) << "\n";
  return 0;
}

}  // namespace conv::cli
